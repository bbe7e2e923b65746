#![no_main]
//! Fuzzes `tessera_modules::fuzzing::accept_encoding` (the corpus replay test calls it too).

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_modules::fuzzing::accept_encoding(data));
