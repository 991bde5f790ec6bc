//! The `hook_files` target: what it checks is `operon_fuzz_checks::hook_files`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| operon_fuzz_checks::hook_files::check(data));
