//! Pieces of Tessera's own HTTP/1.1 connection engine (issue 12), built and
//! tested on their own before the engine that drives them: the request-head
//! parser ([`head`]) and the chunked request-body decoder ([`chunked`]).
//!
//! Both are pure functions over bytes (no I/O, no allocation per call beyond
//! the header map), so that they can be fuzzed and compared with a reference
//! parse. Parsing is `httparse`'s; what is Tessera's is the framing decision
//! of RFC 9112 §6 and the request-smuggling defences of §6.3 (lighttpd's
//! `http_request_parse`, h2o's `fixup_request`, nginx's
//! `ngx_http_process_request_header`).

pub mod chunked;
pub mod head;
