#![no_main]
//! Fuzzes `tessera_core::fuzzing::h1` (the corpus replay test calls it too).

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_core::fuzzing::h1(data));
