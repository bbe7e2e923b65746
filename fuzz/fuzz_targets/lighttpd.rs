#![no_main]
//! Fuzzes `tessera_import::fuzzing::lighttpd` (the corpus replay test calls it too).

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_import::fuzzing::lighttpd(data));
