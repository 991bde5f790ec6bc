//! The script sandbox: shell scripts and shell-operator hook directories, contained by Linux.
