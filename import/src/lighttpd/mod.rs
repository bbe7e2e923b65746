//! lighttpd 1.4: parse ([`parser`], [`lexer`]) and translate into the model.
//!
//! Every conditional block becomes a [`Block`] whose condition is the
//! conjunction of its own test (first), the negated tests of the earlier
//! blocks of its `else` chain, and its enclosing blocks' conditions.
//! `$HTTP["host"]` tests become vhosts (one per distinct test, plus the
//! default vhost for the global context); inside each vhost every host test is
//! decided statically where Tessera's vhost selection makes that exact, and
//! checked with a `host` matcher otherwise. The blocks of each vhost are then
//! resolved into ordered rules by [`crate::model::resolve`].
//!
//! This file holds the entry points, the tables of options and modules, and
//! `Tr`'s dispatch of each setting to the mapper of its lighttpd module
//! (`backends`, `listen`, `extforward`, `proxy`, `static_file`,
//! `access`, `headers`, `access_log`, `redirect`, `compress`).
//! Conditions are in `cond`, the translation as a whole in `translate`.
//!
//! [`Block`]: crate::model::Block

mod access;
mod access_log;
mod backends;
mod compress;
mod cond;
mod extforward;
pub(crate) mod glob;
mod headers;
pub(crate) mod lexer;
mod listen;
pub(crate) mod mime;
pub(crate) mod parser;
mod proxy;
mod redirect;
mod static_file;
#[cfg(test)]
mod test_util;
mod translate;
pub(crate) mod value;

use std::collections::HashMap;
use std::path::Path;

use crate::emit::{Listen, Output};
use crate::error::ImportError;
use crate::model::{Cond, Opt, V};
use crate::report::{Report, Src};
use crate::Options;
use access_log::log_format;
pub(crate) use redirect::mentions_query;
use translate::translate;
use value::{Context, ParseOptions, Parsed, Setting, Val};

/// lighttpd's default `accesslog.format`.
pub const DEFAULT_LOG_FORMAT: &str = r#"%h %V %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i""#;

/// Imports the lighttpd configuration `path`.
///
/// # Errors
/// [`ImportError`] when the file cannot be read or parsed.
pub(crate) fn import(
    path: &Path,
    opts: &Options,
    report: &mut Report,
) -> Result<Output, ImportError> {
    let parsed = parser::parse_file(
        path,
        &ParseOptions {
            mime_types: opts.mime_types.clone(),
        },
    )?;
    translate(&parsed, &path.display().to_string(), report)
}

/// Imports lighttpd configuration text (`name` for messages, includes relative
/// to `basedir`).
///
/// # Errors
/// As [`import`].
pub(crate) fn import_text(
    name: &str,
    text: &str,
    basedir: &Path,
    opts: &Options,
    report: &mut Report,
) -> Result<Output, ImportError> {
    let parsed = parser::parse_text(
        name,
        text,
        basedir,
        &ParseOptions {
            mime_types: opts.mime_types.clone(),
        },
    )?;
    translate(&parsed, name, report)
}

/// The lighttpd module an option needs in `server.modules`, for options of
/// modules lighttpd does not load by itself.
fn needs_module(key: &str) -> Option<&'static str> {
    let pairs: &[(&str, &str)] = &[
        ("expire.", "mod_expire"),
        ("setenv.", "mod_setenv"),
        ("accesslog.", "mod_accesslog"),
        ("url.redirect", "mod_redirect"),
        ("url.rewrite", "mod_rewrite"),
        ("url.access-", "mod_access"),
        ("auth.", "mod_auth"),
        ("deflate.", "mod_deflate"),
        ("compress.", "mod_compress"),
        ("proxy.", "mod_proxy"),
        ("extforward.", "mod_extforward"),
        ("fastcgi.", "mod_fastcgi"),
        ("scgi.", "mod_scgi"),
        ("cgi.", "mod_cgi"),
        ("alias.", "mod_alias"),
        ("userdir.", "mod_userdir"),
        ("simple-vhost.", "mod_simple_vhost"),
        ("evhost.", "mod_evhost"),
    ];
    pairs
        .iter()
        .find(|(p, _)| key.starts_with(p))
        .map(|(_, m)| *m)
}

/// Options lighttpd knows that Tessera does not need (process and OS
/// management, parsing strictness Tessera always has).
const NOT_NEEDED: &[(&str, &str)] = &[
    ("server.errorlog", "Tessera logs diagnostics to stderr"),
    (
        "server.errorlog-use-syslog",
        "Tessera logs diagnostics to stderr",
    ),
    ("server.breakagelog", "Tessera logs diagnostics to stderr"),
    ("server.pid-file", "run Tessera under a service manager"),
    (
        "server.username",
        "start Tessera as the user it should run as",
    ),
    (
        "server.groupname",
        "start Tessera as the user it should run as",
    ),
    (
        "server.chroot",
        "not supported; use the service manager's sandboxing",
    ),
    (
        "server.upload-dirs",
        "Tessera stores no request body in a file: it streams a body to the back end (a chunked body for FastCGI, SCGI, uwsgi or CGI is collected in memory, up to max-body-size)",
    ),
    (
        "server.event-handler",
        "Tessera chooses its event loop itself",
    ),
    (
        "server.network-backend",
        "Tessera chooses how to send files itself",
    ),
    (
        "server.stat-cache-engine",
        "Tessera does its own stat caching",
    ),
    (
        "server.max-fds",
        "set the file limit in the service manager",
    ),
    ("server.feature-flags", "lighttpd-specific tuning"),
    (
        "server.http-parseopts",
        "Tessera always parses strictly and normalizes paths (README, How a request is handled)",
    ),
    (
        "server.compat-module-load",
        "lighttpd-specific module loading",
    ),
    (
        "server.stream-response-body",
        "Tessera streams large files itself",
    ),
    (
        "server.stream-request-body",
        "Tessera streams request bodies to back ends as they arrive (lighttpd's stream-request-body = 2), with backpressure",
    ),
    ("server.core-files", "lighttpd-specific"),
    (
        "server.systemd-socket-activation",
        "not supported; Tessera binds its own listeners",
    ),
    (
        "server.graceful-shutdown-timeout",
        "see [server] shutdown-timeout",
    ),
    (
        "server.name",
        "Tessera names a vhost by its first server name",
    ),
    (
        "server.range-requests",
        "Tessera always supports Range (RFC 9110 §14)",
    ),
    (
        "static-file.disable-pathinfo",
        "Tessera has no path info for static files",
    ),
    ("dir-listing.encoding", "Tessera's listings are UTF-8"),
    ("mimetype.xattr-name", "xattr MIME types are not supported"),
    ("deflate.work-block-size", "lighttpd-specific tuning"),
    ("deflate.output-buffer-size", "lighttpd-specific tuning"),
    ("deflate.sync-flush", "lighttpd-specific tuning"),
];

/// Option prefixes of lighttpd modules Tessera has no equivalent for.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("ssi.", "server-side includes are not supported"),
    ("ssl.", "TLS settings are not imported"),
    (
        "vhostdb.",
        "computed document roots are not supported: write one [[vhost]] per site",
    ),
    ("rrdtool.", "not supported"),
    ("status.", "the status page is not supported"),
    ("webdav.", "WebDAV is not supported"),
    ("magnet.", "Lua scripts are not supported"),
    (
        "secdownload.",
        "use the secure-download plugin (plugins/secure-download), configured by hand",
    ),
    ("usertrack.", "not supported"),
    ("sockproxy.", "not supported"),
    ("wstunnel.", "not supported"),
    ("ajp13.", "not supported"),
    ("maxminddb.", "not supported"),
    ("gnutls.", "TLS settings are not imported"),
    ("mbedtls.", "TLS settings are not imported"),
    ("nss.", "TLS settings are not imported"),
    ("wolfssl.", "TLS settings are not imported"),
    ("openssl.", "TLS settings are not imported"),
    ("trigger-before-download.", "not supported"),
    ("flv-streaming.", "not supported"),
    ("h264-streaming.", "not supported"),
    (
        "auth.backend.htdigest",
        "htdigest files are not supported (use an htpasswd file)",
    ),
    ("auth.backend.ldap", "LDAP authentication is not supported"),
    (
        "auth.backend.mysql",
        "database authentication is not supported",
    ),
    (
        "auth.backend.pgsql",
        "database authentication is not supported",
    ),
    (
        "auth.backend.dbi",
        "database authentication is not supported",
    ),
    (
        "auth.backend.gssapi",
        "Kerberos authentication is not supported",
    ),
    ("auth.backend.sasl", "SASL authentication is not supported"),
    ("auth.cache", "Tessera remembers successful checks itself"),
    (
        "server.error-handler",
        "error handlers run a script: not supported (static pages: server.errorfile-prefix)",
    ),
    (
        "server.kbytes-per-second",
        "bandwidth limits are not supported",
    ),
    (
        "connection.kbytes-per-second",
        "bandwidth limits are not supported",
    ),
    (
        "server.max-request-field-size",
        "Tessera has its own limits",
    ),
    ("server.tag", "the Server header is not configurable"),
    ("mimetype.use-xattr", "xattr MIME types are not supported"),
    (
        "url.access-allow",
        "allow-lists of suffixes are not supported",
    ),
    (
        "setenv.add-request-header",
        "request headers cannot be changed",
    ),
    (
        "setenv.set-request-header",
        "request headers cannot be changed",
    ),
    (
        "accesslog.use-syslog",
        "syslog is not supported: log to a file",
    ),
    ("accesslog.syslog-level", "syslog is not supported"),
    ("accesslog.escaping", "Tessera escapes Apache-style (\\xHH)"),
    ("dir-listing.", "not supported by Tessera's dir-listing"),
    ("debug.", "lighttpd's debug logging; use RUST_LOG=debug"),
];

/// lighttpd modules Tessera has equivalents for (or needs no equivalent of).
const KNOWN_MODULES: &[&str] = &[
    "mod_indexfile",
    "mod_staticfile",
    "mod_dirlisting",
    "mod_access",
    "mod_accesslog",
    "mod_expire",
    "mod_setenv",
    "mod_redirect",
    "mod_rewrite",
    "mod_auth",
    "mod_authn_file",
    "mod_deflate",
    "mod_compress",
    "mod_proxy",
    "mod_extforward",
    "mod_fastcgi",
    "mod_scgi",
    "mod_cgi",
    "mod_alias",
    "mod_userdir",
    "mod_simple_vhost",
    "mod_evhost",
];

struct Tr<'a> {
    parsed: &'a Parsed,
    main: String,
    loaded: Vec<String>,
    cond_cache: HashMap<(Src, String), Cond>,
    /// Tests that could not be imported (reported dropped; decided as never
    /// holding), by source and text, as `cond_cache` keys them.
    unimported: std::collections::HashSet<(Src, String)>,
    listen: Vec<Listen>,
    /// Wildcard sockets' ports are decided against the listeners.
    /// Context index -> Cond.
    ctx_cond: HashMap<usize, Cond>,
}

/// The setting a mapper translates, in context `ctx` (0: the global one).
#[derive(Clone, Copy)]
struct Arg<'s> {
    ctx: usize,
    key: &'s str,
    src: &'s Src,
    val: &'s Val,
}

impl Arg<'_> {
    /// The model option `module`.`key` = `val`, set where this setting is.
    fn opt(&self, module: &'static str, key: &'static str, val: V) -> Opt {
        Opt {
            module,
            key,
            val,
            src: self.src.clone(),
        }
    }
}

/// A module's mapper: the options of one setting, `None` when the key is not
/// that module's.
type Mapper<'a> = fn(&Tr<'a>, &Arg<'_>, &mut Report) -> Option<Vec<Opt>>;

impl Tr<'_> {
    fn ctx(&self, i: usize) -> &Context {
        &self.parsed.contexts[i]
    }

    fn global(&self, key: &str) -> Option<&Setting> {
        self.ctx(0).get(key)
    }

    fn is_loaded(&self, m: &str) -> bool {
        matches!(m, "mod_indexfile" | "mod_staticfile" | "mod_dirlisting")
            || self.loaded.iter().any(|l| l == m)
            || (m == "mod_deflate" && self.loaded.iter().any(|l| l == "mod_compress"))
            || (m == "mod_compress" && self.loaded.iter().any(|l| l == "mod_deflate"))
    }

    /// Translates one setting into model options (empty: handled elsewhere or
    /// not carried over; the report says which).
    fn option(&self, ctx: usize, s: &Setting, report: &mut Report) -> Vec<Opt> {
        let key = s.key.as_str();
        let src = &s.src;
        if key.starts_with("var.") {
            return Vec::new();
        }
        if let Some((_, why)) = NOT_NEEDED.iter().find(|(k, _)| *k == key) {
            report.not_needed(src, key, *why);
            return Vec::new();
        }
        if let Some(m) = needs_module(key) {
            if !self.is_loaded(m) {
                report.dropped(
                    src,
                    key,
                    format!("{m} is not in server.modules, so lighttpd ignores this option"),
                );
                return Vec::new();
            }
        }
        if let Some(opts) = self.backend_option(ctx, s, report) {
            return opts;
        }
        let arg = Arg {
            ctx,
            key,
            src,
            val: &s.val,
        };
        let mappers: [Mapper<'_>; 9] = [
            Tr::server_option,
            Tr::extforward_option,
            Tr::proxy_option,
            Tr::static_file_option,
            Tr::access_option,
            Tr::headers_option,
            Tr::access_log_option,
            Tr::redirect_option,
            Tr::compress_option,
        ];
        for map in mappers {
            if let Some(opts) = map(self, &arg, report) {
                return opts;
            }
        }
        if let Some((_, why)) = UNSUPPORTED.iter().find(|(p, _)| key.starts_with(p)) {
            report.dropped(src, key, *why);
        } else {
            report.dropped(src, key, "unknown option");
        }
        Vec::new()
    }
}
