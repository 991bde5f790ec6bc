//! The `reviews` target: what it checks is `operon_fuzz_checks::reviews`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| operon_fuzz_checks::reviews::check(data));
