//! The `operon` command: run operations and hooks locally, or serve them in a cluster.

mod cli;

operon::binary_allocator!();

fn main() -> std::process::ExitCode {
    // A sandboxed script run re-executes this binary as its launcher; it must take over
    // before any thread starts.
    operon::script::launcher::run_if_invoked();
    cli::main()
}
