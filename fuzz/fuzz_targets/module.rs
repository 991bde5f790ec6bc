//! The `module` target: what it checks is `operon_fuzz_checks::module`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| operon_fuzz_checks::module::check(data));
