//! The `operon` command: run operations and hooks locally, or serve them in a cluster.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
