//! `scgi`: applications behind the SCGI protocol (lighttpd mod_scgi
//! `scgi.server`, Cherokee's `scgi` handler, nginx `scgi_pass`): Python's
//! flup and `scgi` servers, uWSGI's `--scgi-socket`, SCGI servers in Ruby
//! and Go.
//!
//! ```toml
//! [[upstream]]
//! name = "app"
//! servers = ["127.0.0.1:4000"]
//!
//! [[vhost.rule]]
//! match = { path-prefix = "/app/" }
//! [vhost.rule.scgi]
//! upstream = "app"
//! script-name = "/app"
//! ```
//!
//! An asynchronous content handler. Which requests it takes and the CGI
//! variables it sends are those of `fastcgi` ([`crate::gateway`]); the keys
//! are [`ScgiConfig`]'s.
//!
//! - **The request** (`protocol.rs`): a netstring of NUL-separated names and
//!   values, `CONTENT_LENGTH` first and `SCGI=1`, then exactly
//!   `CONTENT_LENGTH` bytes of body. A chunked body is collected first, up
//!   to `max-body-size`.
//! - **The answer**: CGI output, or an HTTP status line and fields
//!   (uWSGI's `--scgi-nph-socket`), read until the application closes the
//!   connection, the body streamed as it comes; an answer that ends before
//!   its declared `Content-Length` makes the client's connection close
//!   without a proper end. One connection per request: the protocol has no
//!   other end of an answer.
//! - **Errors**: refused is 502, a timeout (`connect-timeout`,
//!   `send-timeout`, `read-timeout` of the upstream) 504, a malformed head
//!   502, as for `fastcgi` and `proxy`.

mod protocol;

use bytes::Bytes;

pub use crate::gateway::config::BackendConfig as ScgiConfig;
use crate::gateway::config::Kind;
use crate::socket_app::{Protocol, SocketApp, Vars};

/// The `scgi` module: [`SocketApp`] speaking [`ScgiProtocol`].
pub type Scgi = SocketApp<ScgiProtocol>;

/// The SCGI protocol (Neil Schemenauer, 2006; `scgi/protocol.rs`).
pub struct ScgiProtocol;

impl Protocol for ScgiProtocol {
    const NAME: &'static str = "scgi";
    const KIND: Kind = Kind::Scgi;

    fn encode(vars: &Vars<'_, '_>) -> Result<Bytes, String> {
        // the protocol wants CONTENT_LENGTH, also without a body
        let mut h = protocol::Headers::new(vars.length.unwrap_or(0), 1024);
        vars.write(&mut |k, v| h.push(k, v));
        Ok(h.finish())
    }
}
