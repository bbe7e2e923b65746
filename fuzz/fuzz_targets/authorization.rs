#![no_main]
//! Fuzzes `tessera_modules::fuzzing::authorization` (the corpus replay test calls it too).

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_modules::fuzzing::authorization(data));
