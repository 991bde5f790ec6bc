//! The `hook_config` target: what it checks is `operon_fuzz_checks::hook_config`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| operon_fuzz_checks::hook_config::check(data));
