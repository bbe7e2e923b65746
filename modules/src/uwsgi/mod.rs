//! `uwsgi`: applications under uWSGI, over its binary protocol (Cherokee's
//! `uwsgi` handler, nginx `uwsgi_pass`, lighttpd mod_scgi with
//! `"proto" => "uwsgi"`).
//!
//! ```toml
//! [[upstream]]
//! name = "py"
//! servers = ["unix:/run/uwsgi/app/site/socket"]
//!
//! [[vhost.rule]]
//! match = { path-prefix = "/app/" }
//! [vhost.rule.uwsgi]
//! upstream = "py"
//! script-name = "/app"
//! ```
//!
//! An asynchronous content handler. Which requests it takes and the CGI
//! variables it sends are those of `fastcgi` ([`crate::gateway`]); the keys
//! are [`UwsgiConfig`]'s, with `modifier1`.
//!
//! - **The request** (`protocol.rs`): the uwsgi packet — `modifier1`
//!   (default 0, Python WSGI), the variables' size (16-bit little-endian),
//!   `modifier2` = 0, then each variable as 16-bit little-endian lengths and
//!   bytes — then the body. The variables may take at most 65535 bytes
//!   (more is 431); uWSGI's own `buffer-size` (default 4096) is usually
//!   lower, as with nginx.
//! - **The answer**: an HTTP status line and fields (uWSGI's Python plugin
//!   sends `HTTP/1.1 200 OK`) or CGI output, both accepted, read until uWSGI
//!   closes the connection; errors and timeouts as for `scgi`.

mod protocol;

use bytes::Bytes;

pub use crate::gateway::config::BackendConfig as UwsgiConfig;
use crate::gateway::config::Kind;
use crate::socket_app::{Protocol, SocketApp, Vars};
pub use protocol::PacketError;

/// The `uwsgi` module: [`SocketApp`] speaking [`UwsgiProtocol`].
pub type Uwsgi = SocketApp<UwsgiProtocol>;

/// The uwsgi protocol (`uwsgi/protocol.rs`).
pub struct UwsgiProtocol;

impl Protocol for UwsgiProtocol {
    const NAME: &'static str = "uwsgi";
    const KIND: Kind = Kind::Uwsgi;

    fn encode(vars: &Vars<'_, '_>) -> Result<Bytes, String> {
        let mut p = protocol::Packet::new(1024);
        vars.write(&mut |k, v| p.push(k, v));
        p.finish(vars.modifier1).map_err(|e| e.to_string())
    }
}
