//! Black-box tests: the real server on 127.0.0.1 port 0, real files, raw HTTP.
#![allow(missing_docs, unreachable_pub)]

mod util;

mod access_log;
mod cases;
mod config;
mod rules;
mod static_file;
mod vhost;
