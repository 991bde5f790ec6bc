//! `operon-sandbox-exec`: the script sandbox's launcher as a binary of its own. `operon`
//! uses it when it is installed beside it, from the same build; every waiting launcher
//! then maps this small program instead of the whole engine.

fn main() {
    operon::script::launcher::main_of_own_binary()
}
