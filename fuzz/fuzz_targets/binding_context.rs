//! The `binding_context` target: what it checks is `operon_fuzz_checks::binding_context`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| operon_fuzz_checks::binding_context::check(data));
