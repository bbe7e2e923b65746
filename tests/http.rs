//! Black-box tests: the real server on 127.0.0.1 port 0, real files, raw HTTP.
#![allow(missing_docs, unreachable_pub)]

mod util;

mod access;
mod access_log;
mod alias;
mod auth_basic;
mod cases;
mod cgi;
mod compress;
mod config;
mod dashboard;
mod dir_listing;
mod engine;
mod error_pages;
mod explain;
mod fastcgi;
mod fleet;
mod fuzz_corpus;
mod health;
mod import;
mod import_backends;
mod lifecycle;
mod mass_vhost;
mod plugins;
mod properties;
mod proxy;
mod redirect;
mod rewrite;
mod rules;
mod scgi;
mod static_file;
mod tree;
mod userdir;
mod uwsgi;
mod vhost;
