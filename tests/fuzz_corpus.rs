//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/`) through
//! the entry points the fuzz targets call, so that a regression shows up in an
//! ordinary `cargo test`. A missing or empty corpus directory is a failure.

use std::path::PathBuf;

fn replay(target: &str, entry: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut n = 0;
    for f in entries {
        let path = f.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        if std::panic::catch_unwind(|| entry(&data)).is_err() {
            panic!("{target}: {} fails", path.display());
        }
        n += 1;
    }
    assert!(n > 0, "{}: no corpus files", dir.display());
}

/// One test per fuzz target, named after it.
macro_rules! replay_all {
    ($($target:ident: $entry:path),* $(,)?) => {$(
        #[test]
        fn $target() {
            replay(stringify!($target), $entry);
        }
    )*};
}

replay_all! {
    path: tessera_core::fuzzing::path,
    h1: tessera_core::fuzzing::h1,
    proxy_protocol: tessera_core::fuzzing::proxy_protocol,
    real_ip: tessera_core::fuzzing::real_ip,
    range: tessera_modules::fuzzing::range,
    expires: tessera_modules::fuzzing::expires,
    access_log_format: tessera_modules::fuzzing::access_log_format,
    accept_encoding: tessera_modules::fuzzing::accept_encoding,
    authorization: tessera_modules::fuzzing::authorization,
    htpasswd: tessera_modules::fuzzing::htpasswd,
    conditional: tessera_modules::fuzzing::conditional,
    server_toml: tessera_modules::fuzzing::server_toml,
    lighttpd: tessera_import::fuzzing::lighttpd,
    cherokee: tessera_import::fuzzing::cherokee,
}
