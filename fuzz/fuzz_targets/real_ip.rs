#![no_main]
//! Fuzzes `tessera_core::fuzzing::real_ip` (the corpus replay test calls it too).

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_core::fuzzing::real_ip(data));
