//! Hook configuration: validation of the typed config, and shell-operator config files.
