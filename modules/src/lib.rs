//! Tessera's built-in modules, one per file or folder named after the module, each
//! behind a Cargo feature of the same name:
//!
//! | module | phases | mirrors |
//! |---|---|---|
//! | `static-file` | content | lighttpd mod_staticfile, nginx static, Cherokee `file` |
//! | `headers` | response | lighttpd `setenv.*-response-header`, nginx `add_header … always` |
//! | `expires` | response | lighttpd mod_expire, nginx `expires` |
//! | `access-log` | log | lighttpd mod_accesslog, nginx `access_log` |
//! | `access` | request | lighttpd mod_access + `$HTTP["remoteip"]`, nginx `allow`/`deny` |
//! | `auth-basic` | request | lighttpd mod_auth (htpasswd), Cherokee htpasswd, nginx `auth_basic` |
//! | `compress` | content, response | lighttpd mod_deflate, Cherokee gzip encoder, nginx `gzip`/`gzip_static` |
//! | `dir-listing` | content | lighttpd mod_dirlisting, Cherokee `dirlist`, nginx `autoindex` |
//! | `redirect` | request | lighttpd `url.redirect`, Cherokee `redir` (shown), nginx `return` |
//! | `rewrite` | request | lighttpd `url.rewrite-once` / `-if-not-file`, Cherokee `redir` (internal) |
//! | `error-pages` | response | lighttpd `server.errorfile-prefix`, Cherokee `error_handler`, nginx `error_page` |
//! | `status` | request | lighttpd mod_status, nginx `stub_status`, Cherokee `server_info` |
//! | `proxy` | content (async) | lighttpd mod_proxy, Cherokee `proxy`, nginx `proxy_pass` |
//! | `fastcgi` | content (async) | lighttpd mod_fastcgi, Cherokee `fcgi`, nginx `fastcgi_pass` |
//! | `alias` | request | lighttpd `alias.url`, Cherokee per-rule `document_root`, nginx `alias` |
//! | `userdir` | request | lighttpd mod_userdir (`/~user/` -> `~user/public_html`) |
//! | `mass-vhost` | request | lighttpd `simple-vhost.*` / `evhost.path-pattern`, Cherokee `evhost` |
//! | `scgi` | content (async) | lighttpd mod_scgi, Cherokee `scgi`, nginx `scgi_pass` |
//! | `uwsgi` | content (async) | lighttpd mod_scgi `"proto" => "uwsgi"`, Cherokee `uwsgi`, nginx `uwsgi_pass` |
//! | `cgi` | content (async) | lighttpd mod_cgi `cgi.assign`, Cherokee `cgi`, Apache mod_cgi |
//!
//! ```
//! let mut reg = tessera_core::Registry::new();
//! tessera_modules::register_all(&mut reg).unwrap();
//! assert!(reg.contains("static-file"));
//! ```

#[cfg(feature = "access")]
pub mod access;
#[cfg(feature = "access-log")]
pub mod access_log;
#[cfg(feature = "alias")]
pub mod alias;
#[cfg(feature = "auth-basic")]
pub mod auth_basic;
#[cfg(feature = "cgi")]
pub mod cgi;
#[cfg(feature = "compress")]
pub mod compress;
#[cfg(feature = "dir-listing")]
pub mod dir_listing;
#[cfg(any(feature = "alias", feature = "userdir", feature = "mass-vhost"))]
pub mod doc_root;
#[cfg(any(feature = "cgi", feature = "scgi", feature = "uwsgi"))]
mod eof_output;
#[cfg(feature = "error-pages")]
pub mod error_pages;
#[cfg(feature = "expires")]
pub mod expires;
#[cfg(feature = "fastcgi")]
pub mod fastcgi;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "gateway")]
pub mod gateway;
#[cfg(feature = "headers")]
pub mod headers;
#[cfg(feature = "mass-vhost")]
pub mod mass_vhost;
#[cfg(feature = "proxy")]
pub mod proxy;
#[cfg(feature = "redirect")]
pub mod redirect;
#[cfg(feature = "rewrite")]
pub mod rewrite;
#[cfg(feature = "scgi")]
pub mod scgi;
pub mod skeleton;
#[cfg(any(feature = "scgi", feature = "uwsgi"))]
pub mod socket_app;
#[cfg(feature = "static-file")]
pub mod static_file;
#[cfg(feature = "status")]
pub mod status;
#[cfg(test)]
mod testing;
#[cfg(any(feature = "redirect", feature = "rewrite"))]
pub mod url_rule;
#[cfg(feature = "userdir")]
pub mod userdir;
#[cfg(feature = "uwsgi")]
pub mod uwsgi;

use tessera_core::registry::{Registry, RegistryError};

/// Registers every built-in module compiled in.
///
/// # Errors
/// [`RegistryError::Duplicate`] when a name is already taken in `reg`.
pub fn register_all(reg: &mut Registry) -> Result<(), RegistryError> {
    #[cfg(feature = "static-file")]
    reg.register::<static_file::StaticFile>()?;
    #[cfg(feature = "headers")]
    reg.register::<headers::Headers>()?;
    #[cfg(feature = "expires")]
    reg.register::<expires::Expires>()?;
    #[cfg(feature = "access-log")]
    reg.register::<access_log::AccessLog>()?;
    #[cfg(feature = "status")]
    reg.register::<status::Status>()?;
    #[cfg(feature = "access")]
    reg.register::<access::Access>()?;
    #[cfg(feature = "proxy")]
    reg.register::<proxy::Proxy>()?;
    #[cfg(feature = "fastcgi")]
    reg.register::<fastcgi::FastCgi>()?;
    #[cfg(feature = "scgi")]
    reg.register::<scgi::Scgi>()?;
    #[cfg(feature = "uwsgi")]
    reg.register::<uwsgi::Uwsgi>()?;
    #[cfg(feature = "cgi")]
    reg.register::<cgi::Cgi>()?;
    #[cfg(feature = "auth-basic")]
    reg.register::<auth_basic::AuthBasic>()?;
    #[cfg(feature = "compress")]
    reg.register::<compress::Compress>()?;
    #[cfg(feature = "dir-listing")]
    reg.register::<dir_listing::DirListing>()?;
    #[cfg(feature = "redirect")]
    reg.register::<redirect::Redirect>()?;
    #[cfg(feature = "rewrite")]
    reg.register::<rewrite::Rewrite>()?;
    #[cfg(feature = "error-pages")]
    reg.register::<error_pages::ErrorPages>()?;
    #[cfg(feature = "alias")]
    reg.register::<alias::Alias>()?;
    #[cfg(feature = "userdir")]
    reg.register::<userdir::Userdir>()?;
    #[cfg(feature = "mass-vhost")]
    reg.register::<mass_vhost::MassVhost>()?;
    Ok(())
}
