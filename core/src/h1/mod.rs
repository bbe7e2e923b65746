//! Tessera's own HTTP/1.1 connection engine (issue 12): the request-head
//! parser ([`head`]), the chunked request-body decoder ([`chunked`]), the
//! connection loop ([`conn`]) that calls the actix-web app service, and the
//! response writer (`write`). TLS and
//! HTTP/2 stay on actix-http; `[server] http1-engine` chooses for plain TCP.
//!
//! The parser and the decoder are pure functions over bytes (no I/O, no allocation per call beyond
//! the header map), so that they can be fuzzed and compared with a reference
//! parse. Parsing is `httparse`'s; what is Tessera's is the framing decision
//! of RFC 9112 §6 and the request-smuggling defences of §6.3 (lighttpd's
//! `http_request_parse`, h2o's `fixup_request`, nginx's
//! `ngx_http_process_request_header`).

pub mod accept;
pub mod body;
pub mod chunked;
pub mod conn;
pub mod head;
pub mod proxy_protocol;
mod slot;
mod write;
