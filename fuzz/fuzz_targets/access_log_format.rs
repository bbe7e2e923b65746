#![no_main]
//! Fuzzes `tessera_modules::fuzzing::access_log_format` (the corpus replay test calls it too).

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_modules::fuzzing::access_log_format(data));
