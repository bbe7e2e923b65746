//! lighttpd 1.4: parse ([`parser`], [`lexer`]) and translate into the model.
//!
//! Every conditional block becomes a [`Block`] whose condition is the
//! conjunction of its own test (first), the negated tests of the earlier
//! blocks of its `else` chain, and its enclosing blocks' conditions.
//! `$HTTP["host"]` tests become vhosts (one per distinct test, plus the
//! default vhost for the global context); inside each vhost every host test is
//! decided statically where Tessera's vhost selection makes that exact, and
//! checked on the `Host` header otherwise. The blocks of each vhost are then
//! resolved into ordered rules by [`crate::model::resolve`].

mod backends;
pub(crate) mod lexer;
pub(crate) mod mime;
pub(crate) mod parser;

use std::collections::HashMap;
use std::path::Path;

use crate::emit::{Listen, Output, VhostOut};
use crate::error::ImportError;
use crate::expire;
use crate::model::{resolve, Block, Cond, HostTest, Opt, V};
use crate::report::{Report, Src};
use crate::tessera::{builtin_mime, normalize_mime, Tessera, MODULE_ORDER};
use crate::Options;
use parser::{CondOp, Context, ParseOptions, Parsed, RawCond, Setting, Val};

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
        "Tessera serves static files only (no request bodies are stored)",
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
        "Tessera serves static files only",
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
    listen: Vec<Listen>,
    /// Wildcard sockets' ports are decided against the listeners.
    /// Context index -> Cond.
    ctx_cond: HashMap<usize, Cond>,
}

fn regex_ok(r: &str) -> Result<(), String> {
    fancy_regex::Regex::new(r)
        .map(|_| ())
        .map_err(|e| e.to_string().replace('\n', " "))
}

/// The test lighttpd (1.4.65+, `configparser_simplify_regex`) makes of a
/// `=~` regex: `^x$` is `==`, `^x` is `=^`, `x$` and `\.x$` are `=$`, only
/// when the rest has none of `\^$.|?*+()[]{}` (so `^www\.a\.com$` stays a
/// regex). For hosts this matters: `==` ignores the port, a regex sees it.
fn simplified_regex(r: &str) -> Option<(CondOp, String)> {
    let b = r.as_bytes();
    let (op, off, end) = if b.last() == Some(&b'$') {
        if r.starts_with("\\.") {
            (CondOp::Suffix, 2, b.len() - 1)
        } else if r.starts_with('^') {
            (CondOp::Eq, 1, b.len() - 1)
        } else {
            (CondOp::Suffix, 0, b.len() - 1)
        }
    } else if r.starts_with('^') {
        (CondOp::Prefix, 1, b.len())
    } else {
        return None;
    };
    if off > end || r[off..end].contains(|c| "\\^$.|?*+()[]{}".contains(c)) {
        return None;
    }
    // lighttpd removes only the first character (`\.ext` keeps its dot).
    let start = usize::from(off > 0);
    Some((op, r[start..end].to_owned()))
}

/// `^literal$`, `^literal` and `literal$` as lighttpd 1.4.65+ simplifies them
/// (only when the rest has no regex metacharacters; `\.` is a literal dot).
fn literal_regex(r: &str) -> Option<(bool, bool, String)> {
    let start = r.starts_with('^');
    let body = r.strip_prefix('^').unwrap_or(r);
    let end = body.ends_with('$') && !body.ends_with("\\$");
    let body = if end { &body[..body.len() - 1] } else { body };
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) if n.is_ascii_punctuation() => out.push(n),
                _ => return None,
            },
            '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' => {
                return None
            }
            c => out.push(c),
        }
    }
    (start || end).then_some((start, end, out))
}

fn header_cond(name: &str, op: CondOp, v: &str) -> Result<Cond, String> {
    let esc = fancy_regex::escape(v);
    let regex = match op {
        CondOp::Eq | CondOp::Ne if v.is_empty() => {
            let present = Cond::Match(V::tab1("header", V::tab1("name", V::s(name))));
            return Ok(if op == CondOp::Eq {
                Cond::invert(present)
            } else {
                present
            });
        }
        CondOp::Eq | CondOp::Ne => format!("^{esc}$"),
        CondOp::Prefix => format!("^{esc}"),
        CondOp::Suffix => format!("{esc}$"),
        CondOp::Re | CondOp::NotRe => {
            regex_ok(v)?;
            v.to_owned()
        }
    };
    let c = Cond::Match(V::tab1(
        "header",
        V::Tab(vec![
            ("name".into(), V::s(name)),
            ("regex".into(), V::s(regex)),
        ]),
    ));
    Ok(if matches!(op, CondOp::Ne | CondOp::NotRe) {
        Cond::invert(c)
    } else {
        c
    })
}

/// A string test decided now (for `$HTTP["scheme"]`: always `http`).
fn const_test(op: CondOp, v: &str, actual: &str) -> Cond {
    let hit = match op {
        CondOp::Eq => actual == v,
        CondOp::Ne => actual != v,
        CondOp::Prefix => actual.starts_with(v),
        CondOp::Suffix => actual.ends_with(v),
        CondOp::Re | CondOp::NotRe => {
            let m = fancy_regex::Regex::new(v)
                .ok()
                .and_then(|r| r.is_match(actual).ok())
                .unwrap_or(false);
            m == (op == CondOp::Re)
        }
    };
    if hit {
        Cond::True
    } else {
        Cond::False
    }
}

/// Turns a regular expression over the client address, as written in real
/// configurations (`^127\.0\.0\.1$|^::1$`, `^192\.168\.`), into addresses and
/// CIDR ranges; `None` when it is anything else.
fn remoteip_regex(r: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for alt in r.split('|') {
        let (start, end, lit) = literal_regex(alt)?;
        if !start {
            return None;
        }
        if end {
            lit.parse::<std::net::IpAddr>().ok()?;
            out.push(lit);
        } else {
            // An IPv4 prefix ending at an octet boundary.
            let octets: Vec<&str> = lit.strip_suffix('.')?.split('.').collect();
            if octets.is_empty()
                || octets.len() > 3
                || octets.iter().any(|o| o.parse::<u8>().is_err())
            {
                return None;
            }
            let mut full: Vec<&str> = octets.clone();
            while full.len() < 4 {
                full.push("0");
            }
            out.push(format!("{}/{}", full.join("."), octets.len() * 8));
        }
    }
    Some(out)
}

/// Normalizes a lighttpd socket (`":80"`, `"0.0.0.0:80"`, `"[::]:80"`,
/// `"localhost:80"`) to `IP:PORT`.
fn socket_addr(s: &str, default_port: u16) -> Option<String> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']')?;
        (format!("[{h}]"), p.strip_prefix(':').unwrap_or(""))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_owned(), p),
            None => (s.to_owned(), ""),
        }
    };
    let port: u16 = if port.is_empty() {
        default_port
    } else {
        port.parse().ok()?
    };
    let host = match host.as_str() {
        "" => "0.0.0.0".to_owned(),
        "localhost" => "127.0.0.1".to_owned(),
        h => h.to_owned(),
    };
    let addr = format!("{host}:{port}");
    addr.parse::<std::net::SocketAddr>().ok()?;
    Some(addr)
}

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

    /// The condition of a raw test, reported once.
    fn raw_cond(&mut self, rc: &RawCond, report: &mut Report) -> Cond {
        let key = (rc.src.clone(), rc.show());
        if let Some(c) = self.cond_cache.get(&key) {
            return c.clone();
        }
        let c = self.translate_cond(rc, report);
        self.cond_cache.insert(key, c.clone());
        c
    }

    fn translate_cond(&mut self, rc: &RawCond, report: &mut Report) -> Cond {
        let what = rc.show();
        let neg = matches!(rc.op, CondOp::Ne | CondOp::NotRe);
        let wrap = |c: Cond| if neg { Cond::invert(c) } else { c };
        let v = rc.value.as_str();
        match (rc.field.as_str(), rc.key.to_ascii_lowercase().as_str()) {
            ("HTTP", "host") => {
                let lower = v.to_ascii_lowercase();
                let test = match rc.op {
                    CondOp::Eq | CondOp::Ne => HostTest::Exact(lower),
                    CondOp::Prefix => HostTest::Prefix(lower),
                    CondOp::Suffix => HostTest::Suffix(lower),
                    // lighttpd simplifies =~ only (not !~).
                    CondOp::Re | CondOp::NotRe => {
                        match simplified_regex(v).filter(|_| rc.op == CondOp::Re) {
                            Some((op, l)) => {
                                let l = l.to_ascii_lowercase();
                                match op {
                                    CondOp::Eq => HostTest::Exact(l),
                                    CondOp::Prefix => HostTest::Prefix(l),
                                    _ => HostTest::Suffix(l),
                                }
                            }
                            None => {
                                if let Err(e) = regex_ok(v) {
                                    report.dropped(
                                        &rc.src,
                                        &what,
                                        format!(
                                        "invalid regular expression ({e}); the block never applies"
                                    ),
                                    );
                                    return Cond::False;
                                }
                                HostTest::Regex(v.to_owned())
                            }
                        }
                    }
                };
                report.translated(
                    &rc.src,
                    &what,
                    format!(
                        "vhost server-names = {:?}{}",
                        test.server_names(),
                        if test.sees_port() {
                            ", names-see-port = true (the test sees the port the client sent, as in lighttpd)"
                        } else {
                            ""
                        }
                    ),
                );
                wrap(Cond::Host(test))
            }
            ("HTTP", "url") => {
                let m = match rc.op {
                    CondOp::Eq | CondOp::Ne => {
                        V::tab1("path-regex", V::s(format!("^{}$", fancy_regex::escape(v))))
                    }
                    CondOp::Prefix if v.starts_with('/') => V::tab1("path-prefix", V::s(v)),
                    CondOp::Prefix => {
                        V::tab1("path-regex", V::s(format!("^{}", fancy_regex::escape(v))))
                    }
                    CondOp::Suffix => {
                        V::tab1("path-regex", V::s(format!("{}$", fancy_regex::escape(v))))
                    }
                    CondOp::Re | CondOp::NotRe => {
                        if let Err(e) = regex_ok(v) {
                            report.dropped(
                                &rc.src,
                                &what,
                                format!(
                                    "invalid regular expression ({e}); the block never applies"
                                ),
                            );
                            return Cond::False;
                        }
                        V::tab1("path-regex", V::s(v))
                    }
                };
                report.translated(
                    &rc.src,
                    &what,
                    format!("rule match = {}", crate::emit::inline(&m)),
                );
                wrap(Cond::Match(m))
            }
            ("HTTP", "querystring" | "query-string") => {
                let r = match rc.op {
                    CondOp::Eq | CondOp::Ne => format!("^{}$", fancy_regex::escape(v)),
                    CondOp::Prefix => format!("^{}", fancy_regex::escape(v)),
                    CondOp::Suffix => format!("{}$", fancy_regex::escape(v)),
                    _ => {
                        if let Err(e) = regex_ok(v) {
                            report.dropped(
                                &rc.src,
                                &what,
                                format!(
                                    "invalid regular expression ({e}); the block never applies"
                                ),
                            );
                            return Cond::False;
                        }
                        v.to_owned()
                    }
                };
                report.translated(&rc.src, &what, "rule match = { query = … }");
                wrap(Cond::Match(V::tab1("query", V::s(r))))
            }
            ("HTTP", "remoteip" | "remote-ip") => {
                let list = match rc.op {
                    CondOp::Eq | CondOp::Ne => Some(vec![v.to_owned()]),
                    CondOp::Re | CondOp::NotRe => remoteip_regex(v),
                    _ => None,
                };
                match list {
                    Some(l) if l.iter().all(|a| parse_net(a)) => {
                        report.translated(
                            &rc.src,
                            &what,
                            format!("rule match = {{ client = {:?} }}", l),
                        );
                        wrap(Cond::Match(V::tab1("client", V::strs(l))))
                    }
                    _ => {
                        report.dropped(
                            &rc.src,
                            &what,
                            "only addresses, CIDR ranges and anchored alternations of them (^127\\.0\\.0\\.1$|^::1$) can be matched; the block never applies",
                        );
                        Cond::False
                    }
                }
            }
            ("HTTP", "useragent" | "user-agent" | "referer" | "cookie" | "language")
            | ("REQUEST_HEADER", _) => {
                let name = match (rc.field.as_str(), rc.key.to_ascii_lowercase().as_str()) {
                    ("HTTP", "useragent" | "user-agent") => "User-Agent".to_owned(),
                    ("HTTP", "referer") => "Referer".to_owned(),
                    ("HTTP", "cookie") => "Cookie".to_owned(),
                    ("HTTP", "language") => "Accept-Language".to_owned(),
                    _ => rc.key.clone(),
                };
                match header_cond(&name, rc.op, v) {
                    Ok(c) => {
                        report.translated(
                            &rc.src,
                            &what,
                            format!("rule match = {{ header = {{ name = \"{name}\", … }} }}"),
                        );
                        c
                    }
                    Err(e) => {
                        report.dropped(
                            &rc.src,
                            &what,
                            format!("invalid regular expression ({e}); the block never applies"),
                        );
                        Cond::False
                    }
                }
            }
            ("HTTP", "scheme") => {
                let c = const_test(rc.op, v, "http");
                report.approximated(
                    &rc.src,
                    &what,
                    format!(
                        "the imported listeners are plain HTTP, so this test is always {}",
                        c == Cond::True
                    ),
                );
                c
            }
            ("HTTP", "request-method") => {
                const METHODS: &[&str] = &[
                    "GET",
                    "HEAD",
                    "POST",
                    "PUT",
                    "DELETE",
                    "OPTIONS",
                    "PATCH",
                    "TRACE",
                    "CONNECT",
                    "PROPFIND",
                    "PROPPATCH",
                    "MKCOL",
                    "COPY",
                    "MOVE",
                    "LOCK",
                    "UNLOCK",
                    "QUERY",
                ];
                let list: Vec<&str> = METHODS
                    .iter()
                    .copied()
                    .filter(|m| {
                        const_test(
                            match rc.op {
                                CondOp::Ne => CondOp::Eq,
                                CondOp::NotRe => CondOp::Re,
                                o => o,
                            },
                            v,
                            m,
                        ) == Cond::True
                    })
                    .collect();
                if list.is_empty() {
                    report.dropped(
                        &rc.src,
                        &what,
                        "matches no known method; the block never applies",
                    );
                    return if neg { Cond::True } else { Cond::False };
                }
                report.translated(
                    &rc.src,
                    &what,
                    format!("rule match = {{ method = {:?} }}", list),
                );
                wrap(Cond::Match(V::tab1("method", V::strs(list))))
            }
            ("SERVER", "socket") => {
                let port = self.port();
                let Some(addr) = socket_addr(v, port) else {
                    report.dropped(
                        &rc.src,
                        &what,
                        "not an IP:PORT socket; the block never applies",
                    );
                    return Cond::False;
                };
                // Tessera's socket matcher compares the address of the
                // listener that accepted the connection, as lighttpd compares
                // its server socket: 0.0.0.0:P matches connections on that
                // listener only, whatever address they were sent to.
                let twin = addr
                    .strip_prefix("0.0.0.0:")
                    .map(|p| format!("[::]:{p}"))
                    .filter(|t| self.listen.iter().any(|l| &l.addr == t));
                let addr = if self.listen.iter().any(|l| l.addr == addr) {
                    addr
                } else if let Some(twin) = twin {
                    report.approximated(
                        &rc.src,
                        &what,
                        format!("{addr} is served by the dual-stack {twin}: the test matches connections there, IPv6 ones too"),
                    );
                    twin
                } else {
                    // A TLS socket that was not imported.
                    return if neg { Cond::True } else { Cond::False };
                };
                if self.listen.len() == 1 {
                    report.translated(
                        &rc.src,
                        &what,
                        format!("listen \"{addr}\" (the only listener)"),
                    );
                    return if neg { Cond::False } else { Cond::True };
                }
                report.translated(
                    &rc.src,
                    &what,
                    format!("rule match = {{ socket = \"{addr}\" }}"),
                );
                wrap(Cond::Match(V::tab1("socket", V::s(addr))))
            }
            _ => {
                report.dropped(
                    &rc.src,
                    &what,
                    "this condition is not supported; the block never applies",
                );
                Cond::False
            }
        }
    }

    /// The listener address of context `ctx` when its own test is
    /// `$SERVER["socket"] == "…"` (not TLS).
    fn socket_block(&self, ctx: usize) -> Option<String> {
        let rc = self.ctx(ctx).cond.as_ref()?;
        if rc.field != "SERVER" || rc.key != "socket" || rc.op != CondOp::Eq {
            return None;
        }
        socket_addr(&rc.value, self.port())
    }

    /// `[server]` keys of `server.max-request-size` and mod_extforward.
    fn proxy_server_keys(&self, server: &mut Vec<(String, V, Src)>, report: &mut Report) {
        if let Some(s) = self.global("server.max-request-size") {
            match s.val.as_string().and_then(|v| v.parse::<i64>().ok()) {
                Some(0) => report.approximated(
                    &s.src,
                    &s.key,
                    "0 (no limit): Tessera always has a limit, the default max-body-size of 1 MiB applies; set [server] max-body-size to the largest body you accept",
                ),
                Some(k) if k > 0 => {
                    let bytes = k.saturating_mul(1024);
                    report.translated(
                        &s.src,
                        &s.key,
                        format!("[server] max-body-size = {bytes} ({k} KiB; lighttpd counts the request head too, Tessera the body only)"),
                    );
                    server.push(("max-body-size".into(), V::Int(bytes), s.src.clone()));
                }
                _ => report.dropped(&s.src, &s.key, format!("{} is not a size in KiB", s.val.show())),
            }
        } else if self.is_loaded("mod_proxy")
            && self
                .parsed
                .contexts
                .iter()
                .any(|c| c.get("proxy.server").is_some())
        {
            report.approximated(
                &Src::new(&self.main, 1),
                "server.max-request-size",
                "not set: lighttpd accepts request bodies of any size, Tessera refuses bodies over max-body-size (default 1 MiB) with 413; set [server] max-body-size for uploads through the proxy",
            );
        }
        if !self.is_loaded("mod_extforward") {
            return;
        }
        if let Some(s) = self.global("extforward.forwarder") {
            let mut nets: Vec<V> = Vec::new();
            let entries: Vec<(String, String)> = match &s.val {
                Val::Arr(items) => items
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Some(k) => Some((k.clone(), v.as_string().unwrap_or_default())),
                        None => Some((v.as_string()?, "trust".to_owned())),
                    })
                    .collect(),
                _ => Vec::new(),
            };
            for (addr, how) in entries {
                if !how.eq_ignore_ascii_case("trust") {
                    report.translated(
                        &s.src,
                        &s.key,
                        format!("\"{addr}\" => \"{how}\": not trusted"),
                    );
                    continue;
                }
                if addr.eq_ignore_ascii_case("all") {
                    report.approximated(&s.src, &s.key, "\"all\" => \"trust\": trusted-proxies = [\"0.0.0.0/0\", \"::/0\"]: every client may set its own address with the header; list your proxies instead");
                    for n in ["0.0.0.0/0", "::/0"] {
                        if !nets.contains(&V::s(n)) {
                            nets.push(V::s(n));
                        }
                    }
                } else if parse_net(&addr) {
                    nets.push(V::s(addr.trim()));
                } else {
                    report.dropped(
                        &s.src,
                        &s.key,
                        format!("\"{addr}\" is not an IP address or CIDR network"),
                    );
                }
            }
            if !nets.is_empty() {
                report.translated(&s.src, &s.key, "[server] trusted-proxies");
                server.push(("trusted-proxies".into(), V::Arr(nets), s.src.clone()));
            }
        }
        if let Some(s) = self.global("extforward.headers") {
            let mut chosen: Option<&str> = None;
            for h in s.val.as_list() {
                let t = match h.to_ascii_lowercase().as_str() {
                    "x-forwarded-for" => Some("x-forwarded-for"),
                    "forwarded" => Some("forwarded"),
                    _ => None,
                };
                match (t, chosen) {
                    (Some(t), None) => chosen = Some(t),
                    (Some(_), Some(c)) => report.approximated(&s.src, &s.key, format!("\"{h}\": Tessera reads one header, \"{c}\" (the first listed)")),
                    (None, _) => report.dropped(&s.src, &s.key, format!("\"{h}\": Tessera reads the client address from X-Forwarded-For or Forwarded only")),
                }
            }
            if let Some(c) = chosen {
                report.translated(&s.src, &s.key, format!("[server] real-ip-header = \"{c}\""));
                server.push(("real-ip-header".into(), V::s(c), s.src.clone()));
            }
        }
        let mut pp: Vec<V> = Vec::new();
        let mut pp_src: Option<Src> = None;
        if let Some(s) = self.global("extforward.hap-PROXY") {
            if s.val.as_bool() == Some(true) {
                for l in &self.listen {
                    pp.push(V::s(l.addr.clone()));
                }
                report.translated(
                    &s.src,
                    &s.key,
                    "[server] listen-proxy-protocol = every listen address",
                );
                pp_src = Some(s.src.clone());
            } else {
                report.translated(&s.src, &s.key, "disabled (the default)");
            }
        }
        for i in 1..self.parsed.contexts.len() {
            let Some(s) = self.ctx(i).get("extforward.hap-PROXY") else {
                continue;
            };
            let Some(addr) = self.socket_block(i) else {
                continue;
            };
            let on = s.val.as_bool() == Some(true);
            if on && !pp.contains(&V::s(addr.clone())) && self.listen.iter().any(|l| l.addr == addr)
            {
                pp.push(V::s(addr.clone()));
            } else if !on {
                pp.retain(|a| a.as_str() != Some(addr.as_str()));
            }
            report.translated(
                &s.src,
                &s.key,
                format!(
                    "[server] listen-proxy-protocol {} \"{addr}\"",
                    if on { "includes" } else { "leaves out" }
                ),
            );
            pp_src.get_or_insert(s.src.clone());
        }
        if let (false, Some(src)) = (pp.is_empty(), pp_src) {
            server.push(("listen-proxy-protocol".into(), V::Arr(pp), src));
        }
    }

    fn port(&self) -> u16 {
        self.global("server.port")
            .and_then(|s| s.val.as_string())
            .and_then(|p| p.parse().ok())
            .unwrap_or(80)
    }

    /// The full condition of context `i`: own test, negated else-chain
    /// predecessors, then the enclosing context's condition.
    fn cond_of(&mut self, i: usize, report: &mut Report) -> Cond {
        if let Some(c) = self.ctx_cond.get(&i) {
            return c.clone();
        }
        let ctx = self.ctx(i).clone();
        let mut parts = Vec::new();
        if let Some(rc) = &ctx.cond {
            parts.push(self.raw_cond(rc, report));
        }
        for n in &ctx.negs {
            let c = self.raw_cond(n, report);
            parts.push(Cond::invert(c));
        }
        if let Some(p) = ctx.parent {
            parts.push(self.cond_of(p, report));
        }
        let c = Cond::All(parts).simplify(&|_| None);
        self.ctx_cond.insert(i, c.clone());
        c
    }

    fn listeners(&mut self, report: &mut Report) {
        let port = self.port();
        let port_src = self
            .global("server.port")
            .map(|s| s.src.clone())
            .unwrap_or_else(|| Src::new(&self.main, 0));
        let bind = self.global("server.bind").cloned();
        let mut addrs: Vec<Listen> = Vec::new();
        match &bind {
            Some(b) => {
                let v = b.val.as_string().unwrap_or_default();
                if v.starts_with('/') {
                    report.dropped(&b.src, "server.bind", "Unix sockets are not supported");
                } else if let Some(a) = socket_addr(&v, port) {
                    report.translated(&b.src, "server.bind", format!("[server] listen \"{a}\""));
                    addrs.push(Listen {
                        addr: a,
                        src: b.src.clone(),
                    });
                } else {
                    report.dropped(
                        &b.src,
                        "server.bind",
                        format!("\"{v}\" is not an IP address (host names are not resolved)"),
                    );
                }
            }
            None => addrs.push(Listen {
                addr: format!("0.0.0.0:{port}"),
                src: port_src.clone(),
            }),
        }
        if let Some(p) = self.global("server.port") {
            report.translated(
                &p.src,
                "server.port",
                format!("[server] listen port {port}"),
            );
        }
        if let Some(u) = self.global("server.use-ipv6") {
            if u.val.as_bool() == Some(true) && bind.is_none() {
                addrs.push(Listen {
                    addr: format!("[::]:{port}"),
                    src: u.src.clone(),
                });
            }
            report.translated(
                &u.src,
                "server.use-ipv6",
                format!("[server] listen \"[::]:{port}\""),
            );
        }
        // $SERVER["socket"] blocks add listeners, except TLS ones.
        for i in 1..self.parsed.contexts.len() {
            let c = self.ctx(i).clone();
            let Some(rc) = &c.cond else { continue };
            if rc.field != "SERVER" || rc.key != "socket" || rc.op != CondOp::Eq {
                continue;
            }
            let Some(addr) = socket_addr(&rc.value, port) else {
                continue;
            };
            let tls = c
                .get("ssl.engine")
                .is_some_and(|s| s.val.as_bool() == Some(true));
            if tls {
                report.dropped(
                    &rc.src,
                    &rc.show(),
                    format!("a TLS listener: TLS is not imported, so {addr} is not listened on (configure TLS in Tessera by hand)"),
                );
                continue;
            }
            if !addrs.iter().any(|l| l.addr == addr) {
                addrs.push(Listen {
                    addr,
                    src: rc.src.clone(),
                });
            }
        }
        // A [::] listener takes IPv4 connections too (Linux's default
        // bindv6only = 0), so it cannot sit beside 0.0.0.0 on the same port.
        let mut i = 0;
        while i < addrs.len() {
            let a = addrs[i].addr.clone();
            let twin = a.strip_prefix("0.0.0.0:").map(|p| format!("[::]:{p}"));
            if let Some(twin) = twin.filter(|t| addrs.iter().any(|l| &l.addr == t)) {
                report.approximated(
                    &addrs[i].src,
                    "server.port",
                    format!("{a} is left out: {twin} also accepts IPv4 connections (Linux, net.ipv6.bindv6only = 0), and both cannot be bound; if your system sets bindv6only = 1, list both"),
                );
                addrs.remove(i);
            } else {
                i += 1;
            }
        }
        self.listen = addrs;
    }

    /// Translates one setting into model options (empty: handled elsewhere or
    /// not carried over; the report says which).
    fn option(&self, ctx: usize, s: &Setting, report: &mut Report) -> Vec<Opt> {
        let key = s.key.as_str();
        let src = &s.src;
        let val = &s.val;
        let in_block = ctx != 0;
        let opt = |module: &'static str, k: &'static str, v: V| Opt {
            module,
            key: k,
            val: v,
            src: src.clone(),
        };
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
        let bool_of = |report: &mut Report| -> Option<bool> {
            let b = val.as_bool();
            if b.is_none() {
                report.dropped(src, key, format!("{} is not a boolean", val.show()));
            }
            b
        };
        match key {
            "server.document-root"
            | "server.port"
            | "server.bind"
            | "server.use-ipv6"
            | "server.modules" => {
                if in_block && key != "server.document-root" {
                    report.dropped(
                        src,
                        key,
                        "only allowed in the global context (lighttpd ignores it here)",
                    );
                }
                Vec::new()
            }
            "server.max-request-size"
            | "extforward.forwarder"
            | "extforward.headers"
            | "extforward.hap-PROXY"
                if !in_block
                    || self.socket_block(ctx).is_some() && key == "extforward.hap-PROXY" =>
            {
                // Handled with [server] below.
                Vec::new()
            }
            "server.max-request-size" => {
                report.dropped(
                    src,
                    key,
                    "Tessera's max-body-size is server-wide ([server]): set it there if this block needs a larger limit",
                );
                Vec::new()
            }
            "extforward.forwarder" | "extforward.headers" | "extforward.hap-PROXY" => {
                report.dropped(
                    src,
                    key,
                    "Tessera's trusted proxies, real-ip-header and PROXY protocol listeners are server-wide ([server]); a conditional one is not imported (trusting more than intended would let clients spoof their address)",
                );
                Vec::new()
            }
            "proxy.server" => {
                let entries = proxy_servers(val, src, report);
                if entries.is_empty() {
                    return Vec::new();
                }
                vec![opt("proxy", "server", V::Arr(entries))]
            }
            "proxy.balance" | "fastcgi.balance" | "scgi.balance" => {
                let v = val.as_string().unwrap_or_default();
                let b = match v.as_str() {
                    "round-robin" => "round-robin",
                    "hash" | "sticky" => "ip-hash",
                    "fair" => "least-conn",
                    _ => {
                        report.dropped(src, key, format!("{}: not a balancing method lighttpd knows (fair, round-robin, hash, sticky)", val.show()));
                        return Vec::new();
                    }
                };
                if v == "hash" {
                    // gw_backend.c: "hash" hashes the request's authority and
                    // path, "sticky" the client address.
                    report.approximated(src, key, "upstream balance = \"ip-hash\": lighttpd's \"hash\" picks the server by a hash of the requested host and path (each URL on one server), Tessera's by the client address (each client on one server)");
                } else {
                    report.translated(src, key, format!("upstream balance = \"{b}\""));
                }
                let mods: &[&'static str] = match key {
                    "proxy.balance" => &["proxy"],
                    "fastcgi.balance" => &["fastcgi"],
                    _ => &["scgi", "uwsgi"],
                };
                mods.iter().map(|m| opt(m, "balance", V::s(b))).collect()
            }
            "proxy.header" => proxy_header(val, src, report)
                .into_iter()
                .map(|(k, v)| opt("proxy", k, v))
                .collect(),
            "proxy.forwarded" => {
                let flags: Vec<(String, bool)> = match val {
                    Val::Arr(items) => items
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone()?.to_ascii_lowercase(), v.as_bool()?)))
                        .collect(),
                    _ => Vec::new(),
                };
                let on: Vec<&str> = flags
                    .iter()
                    .filter(|(_, b)| *b)
                    .map(|(k, _)| k.as_str())
                    .collect();
                if on.is_empty() {
                    report.translated(
                        src,
                        key,
                        "nothing enabled: proxy forwarded = \"x-forwarded\" (the default)",
                    );
                    return Vec::new();
                }
                let extra: Vec<&str> = on
                    .iter()
                    .copied()
                    .filter(|k| !matches!(*k, "for" | "proto" | "host"))
                    .collect();
                if extra.is_empty() && on.len() == 3 {
                    report.translated(src, key, "proxy forwarded = \"both\": lighttpd adds Forwarded (for, proto, host) and still sends X-Forwarded-For, -Proto and -Host");
                } else {
                    report.approximated(src, key, format!("proxy forwarded = \"both\": Tessera's Forwarded carries for, proto and host (lighttpd here: {}); X-Forwarded-For, -Proto and -Host are sent as lighttpd sends them", on.join(", ")));
                }
                vec![opt("proxy", "forwarded", V::s("both"))]
            }
            "extforward.params" | "extforward.hap-PROXY-ssl-client-verify" => {
                report.dropped(src, key, "not supported: Tessera takes only the client address from the header or the PROXY protocol");
                Vec::new()
            }
            "proxy.debug" | "fastcgi.debug" | "scgi.debug" | "simple-vhost.debug"
            | "evhost.debug" => {
                report.not_needed(src, key, "lighttpd's debug logging; use RUST_LOG=debug");
                Vec::new()
            }
            "proxy.replace-http-host" => {
                if val.as_bool() == Some(true) {
                    report.dropped(src, key, "lighttpd sends the back end's name from proxy.server as Host; set host = \"NAME\" in the proxy table by hand");
                } else {
                    report.translated(src, key, "disabled: proxy host = \"client\" (the default)");
                }
                Vec::new()
            }
            "proxy.map-extensions" => {
                report.dropped(
                    src,
                    key,
                    "extension aliases are not supported: add the extensions to proxy.server",
                );
                Vec::new()
            }
            "server.max-keep-alive-idle"
            | "server.max-read-idle"
            | "server.max-connections"
            | "server.max-worker"
            | "server.max-keep-alive-requests"
            | "server.max-write-idle" => {
                // Handled with [server] below.
                Vec::new()
            }
            "index-file.names" | "server.indexfiles" => {
                let mut names = Vec::new();
                for n in val.as_list() {
                    if n.contains('/') || n.is_empty() {
                        report.approximated(
                            src,
                            key,
                            format!(
                                "\"{n}\" is not a plain file name (a front controller); left out"
                            ),
                        );
                    } else if !names.contains(&n) {
                        names.push(n);
                    }
                }
                report.translated(src, key, "static-file index-files");
                let mut out = Vec::new();
                let backends = self.backend_modules();
                if !backends.is_empty() {
                    report.translated(
                        src,
                        key,
                        format!("index-files of {}: the names each back end would run (index.php goes to fastcgi where lighttpd runs it)", backends.join(", ")),
                    );
                    for m in backends {
                        out.push(opt(m, "index-names", V::strs(names.clone())));
                    }
                }
                out.push(opt("static-file", "index-files", V::strs(names)));
                out
            }
            "mimetype.assign" => vec![opt(
                "static-file",
                "mime-types",
                self.mime_types(val, src, report),
            )],
            "static-file.exclude-extensions" => {
                let mut exts = Vec::new();
                for e in val.as_list() {
                    match e.strip_prefix('.') {
                        Some(x) if !x.is_empty() && !x.contains('.') => exts.push(x.to_owned()),
                        _ => report.approximated(
                            src,
                            key,
                            format!("\"{e}\" is not a single extension (\".php\"); left out"),
                        ),
                    }
                }
                report.translated(src, key, "static-file exclude-extensions");
                vec![opt("static-file", "exclude-extensions", V::strs(exts))]
            }
            "static-file.etags" => {
                let Some(b) = bool_of(report) else {
                    return Vec::new();
                };
                report.translated(src, key, "static-file etag");
                vec![opt("static-file", "etag", V::Bool(b))]
            }
            "etag.use-inode" | "etag.use-mtime" | "etag.use-size" => {
                let Some(b) = bool_of(report) else {
                    return Vec::new();
                };
                let all_off = ["etag.use-inode", "etag.use-mtime", "etag.use-size"]
                    .iter()
                    .all(|k| {
                        *k == key && !b
                            || self
                                .ctx(ctx)
                                .get(k)
                                .is_some_and(|x| x.val.as_bool() == Some(false))
                    });
                if all_off {
                    report.translated(
                        src,
                        key,
                        "static-file etag = false (every etag.use-* is disabled)",
                    );
                    return vec![opt("static-file", "etag", V::Bool(false))];
                }
                report.approximated(
                    src,
                    key,
                    "Tessera's ETag is always built from modification time and size",
                );
                Vec::new()
            }
            "server.follow-symlink" => {
                let Some(b) = bool_of(report) else {
                    return Vec::new();
                };
                let p = if b { "always" } else { "never" };
                report.translated(
                    src,
                    key,
                    format!("static-file and dir-listing follow-symlinks = \"{p}\""),
                );
                vec![
                    opt("static-file", "follow-symlinks", V::s(p)),
                    opt("dir-listing", "follow-symlinks", V::s(p)),
                ]
            }
            "server.errorfile-prefix" => {
                let Some(p) = val.as_string() else {
                    return Vec::new();
                };
                report.translated(src, key, "error-pages prefix");
                vec![opt("error-pages", "prefix", V::s(p))]
            }
            "server.error-handler-404" => {
                let Some(p) = val.as_string() else {
                    return Vec::new();
                };
                let ext = p.rsplit('.').next().unwrap_or("");
                if matches!(ext, "html" | "htm" | "txt") && !p.contains('?') {
                    let rel = p.trim_start_matches('/').to_owned();
                    report.approximated(src, key, format!("error-pages pages.404 = \"{rel}\" (the page is sent with status 404; lighttpd would run it as a request)"));
                    vec![opt("error-pages", "pages", V::tab1("404", V::s(rel)))]
                } else {
                    report.dropped(
                        src,
                        key,
                        "a dynamic error handler (a script) is not supported",
                    );
                    Vec::new()
                }
            }
            "dir-listing.activate" | "server.dir-listing" => {
                let Some(b) = bool_of(report) else {
                    return Vec::new();
                };
                report.translated(
                    src,
                    key,
                    format!("dir-listing {}", if b { "on" } else { "off" }),
                );
                vec![opt("dir-listing", "enabled", V::Bool(b))]
            }
            "dir-listing.hide-dotfiles" => {
                let Some(b) = bool_of(report) else {
                    return Vec::new();
                };
                report.translated(src, key, format!("dir-listing hidden-files = {}", !b));
                vec![opt("dir-listing", "hidden-files", V::Bool(!b))]
            }
            "dir-listing.show-readme" | "dir-listing.show-header" => {
                let (k, default) = if key.ends_with("readme") {
                    ("readme-file", "README.txt")
                } else {
                    ("header-file", "HEADER.txt")
                };
                let file = match val.as_bool() {
                    Some(true) => Some(default.to_owned()),
                    Some(false) => None,
                    None => val.as_string(),
                };
                report.translated(src, key, format!("dir-listing {k}"));
                match file {
                    Some(f) => vec![opt("dir-listing", k, V::s(f))],
                    None => vec![opt("dir-listing", k, V::s(""))],
                }
            }
            "url.access-deny" => {
                report.translated(src, key, "access deny-suffixes");
                vec![opt("access", "deny-suffixes", V::strs(val.as_list()))]
            }
            "expire.url" => {
                let mut t = Vec::new();
                for (k, v) in val.as_pairs() {
                    let prefix = if k.is_empty() {
                        "/".to_owned()
                    } else {
                        k.clone()
                    };
                    if !prefix.starts_with('/') {
                        report.dropped(
                            src,
                            key,
                            format!("\"{k}\" does not start with '/', so it never matches a path"),
                        );
                        continue;
                    }
                    if let Some(e) = self.expire_value(&v, src, key, report) {
                        if let Some((earlier, _)) = t
                            .iter()
                            .find(|(p, _): &&(String, V)| prefix.starts_with(p.as_str()))
                        {
                            report.approximated(src, key, format!("\"{k}\" is shadowed by the earlier \"{earlier}\" (first match wins): it never applies"));
                        }
                        t.push((prefix, V::s(e)));
                    }
                }
                report.translated(src, key, "expires url (first match wins, as in lighttpd)");
                vec![
                    opt("expires", "url", V::Tab(t)),
                    opt("expires", "existing-cache-control", V::s("keep")),
                ]
            }
            "expire.mimetypes" => {
                let mut t: Vec<(String, V)> = Vec::new();
                let pairs = val.as_pairs();
                let has_text = pairs
                    .iter()
                    .any(|(k, _)| k == "text/" || k == "text/javascript");
                let mut moved = None;
                for (k, v) in pairs {
                    let Some(e) = self.expire_value(&v, src, key, report) else {
                        continue;
                    };
                    if k == "application/javascript" && !has_text {
                        report.approximated(src, key, "\"application/javascript\" is renamed \"text/javascript\" and moved to the end, as lighttpd 1.4.65 and later do");
                        moved = Some(("text/javascript".to_owned(), V::s(e)));
                        continue;
                    }
                    let k2 = if k.is_empty() || k.contains('/') || k.ends_with('*') {
                        k.clone()
                    } else {
                        format!("{k}*")
                    };
                    if let Some((earlier, _)) = t.iter().find(|(p, _)| p.is_empty()) {
                        report.approximated(
                            src,
                            key,
                            format!(
                                "\"{k}\" comes after the catch-all \"{earlier}\": it never applies"
                            ),
                        );
                    }
                    t.push((k2, V::s(e)));
                }
                t.extend(moved);
                report.translated(
                    src,
                    key,
                    "expires mime-types (tried after url, first match wins)",
                );
                vec![
                    opt("expires", "mime-types", V::Tab(t)),
                    opt("expires", "existing-cache-control", V::s("keep")),
                ]
            }
            "setenv.add-response-header" | "setenv.set-response-header" => {
                let k = if key.ends_with("add-response-header") {
                    "add"
                } else {
                    "set"
                };
                let mut t: Vec<(String, V)> = Vec::new();
                for (name, v) in val.as_pairs() {
                    let clean: String = v
                        .chars()
                        .map(|c| {
                            if matches!(c, '\t' | '\r' | '\n') {
                                ' '
                            } else {
                                c
                            }
                        })
                        .collect();
                    t.push((name, V::s(clean.trim())));
                }
                report.translated(
                    src,
                    key,
                    format!(
                        "headers {k}{}",
                        if k == "set" {
                            " (an empty value removes the field)"
                        } else {
                            ""
                        }
                    ),
                );
                vec![opt("headers", k, V::Tab(t))]
            }
            "accesslog.filename" => {
                let p = val.as_string().unwrap_or_default();
                if p.starts_with('|') {
                    report.dropped(src, key, "piped logs are not supported: log to a file");
                    return vec![opt("access-log", "path", V::s(""))];
                }
                report.translated(
                    src,
                    key,
                    if p.is_empty() {
                        "access-log off here".to_owned()
                    } else {
                        "access-log path".to_owned()
                    },
                );
                vec![opt("access-log", "path", V::s(p))]
            }
            "accesslog.format" => {
                let f = val.as_string().unwrap_or_default();
                let (t, notes) = log_format(&f);
                if notes.is_empty() {
                    report.translated(src, key, "access-log format");
                } else {
                    report.approximated(
                        src,
                        key,
                        format!("access-log format \"{t}\": {}", notes.join("; ")),
                    );
                }
                vec![opt("access-log", "format", V::s(t))]
            }
            "url.redirect" => {
                let own_regex = self.own_url_regex(ctx);
                let mut rules = Vec::new();
                for (re, target) in val.as_pairs() {
                    if let Some(r) = self.url_rule(&re, &target, own_regex, src, key, report) {
                        rules.push(r);
                    }
                }
                report.translated(
                    src,
                    key,
                    "redirect rules (match-query = true where the regex mentions the query)",
                );
                vec![opt("redirect", "rules", V::Arr(rules))]
            }
            "url.redirect-code" => {
                let code = val
                    .as_string()
                    .and_then(|c| c.parse::<i64>().ok())
                    .unwrap_or(301);
                if !matches!(code, 301 | 302 | 303 | 307 | 308) {
                    report.dropped(
                        src,
                        key,
                        format!("{code} is not a redirect status Tessera sends"),
                    );
                    return Vec::new();
                }
                report.translated(src, key, "redirect rules[].status");
                vec![opt("redirect", "status", V::Int(code))]
            }
            "url.rewrite-once"
            | "url.rewrite"
            | "url.rewrite-final"
            | "url.rewrite-repeat"
            | "url.rewrite-if-not-file"
            | "url.rewrite-repeat-if-not-file" => {
                let own_regex = self.own_url_regex(ctx);
                let mut rules = Vec::new();
                for (re, target) in val.as_pairs() {
                    if !target.starts_with('/') {
                        report.dropped(
                            src,
                            key,
                            format!("\"{re}\" => \"{target}\": the target must start with '/'"),
                        );
                        continue;
                    }
                    if let Some(r) = self.url_rule(&re, &target, own_regex, src, key, report) {
                        rules.push(r);
                    }
                }
                if key.contains("repeat") {
                    report.approximated(
                        src,
                        key,
                        "Tessera rewrites each request at most once (as url.rewrite-once)",
                    );
                } else {
                    report.translated(src, key, "rewrite rules");
                }
                let k = if key.ends_with("if-not-file") {
                    "if-not-file"
                } else {
                    "once"
                };
                vec![opt("rewrite", k, V::Arr(rules))]
            }
            "auth.backend" => {
                let b = val.as_string().unwrap_or_default();
                if matches!(b.as_str(), "htpasswd" | "plain") {
                    report.translated(src, key, "auth-basic (user-file)");
                } else {
                    report.dropped(src, key, format!("the \"{b}\" backend is not supported (htpasswd and plain are); the protected paths are NOT protected by the import"));
                }
                vec![opt("auth-basic", "backend", V::s(b))]
            }
            "auth.backend.htpasswd.userfile" | "auth.backend.plain.userfile" => {
                let f = val.as_string().unwrap_or_default();
                if !Path::new(&f).exists() {
                    report.approximated(src, key, format!("{f} does not exist on this machine: create it before starting Tessera (tessera -t fails until then)"));
                } else {
                    report.translated(src, key, "auth-basic user-file");
                }
                let k = if key.contains("htpasswd") {
                    "user-file"
                } else {
                    "plain-file"
                };
                vec![opt("auth-basic", k, V::s(f))]
            }
            "auth.require" => {
                let Val::Arr(items) = val else {
                    return Vec::new();
                };
                let mut list = Vec::new();
                for (prefix, entry) in items {
                    let Some(prefix) = prefix else { continue };
                    let pairs = entry.as_pairs();
                    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                    let method = get("method").unwrap_or_else(|| "basic".into());
                    if method != "basic" {
                        report.approximated(src, key, format!("\"{prefix}\": {method} authentication becomes Basic (the only scheme Tessera has)"));
                    }
                    let require = get("require").unwrap_or_else(|| "valid-user".into());
                    let users: Vec<String> = require
                        .split('|')
                        .filter_map(|p| p.trim().strip_prefix("user=").map(str::to_owned))
                        .collect();
                    let req = if require.split('|').any(|p| p.trim() == "valid-user")
                        || users.is_empty()
                    {
                        if !require.split('|').any(|p| p.trim() == "valid-user") {
                            report.approximated(src, key, format!("\"{prefix}\": require \"{require}\" (groups, hosts) becomes valid-user: any user in the file is let in"));
                        }
                        V::s("valid-user")
                    } else {
                        if require.split('|').any(|p| !p.trim().starts_with("user=")) {
                            report.approximated(
                                src,
                                key,
                                format!(
                                    "\"{prefix}\": only the user= parts of \"{require}\" are kept"
                                ),
                            );
                        }
                        V::strs(users)
                    };
                    let mut t = vec![("prefix".to_owned(), V::s(prefix.clone()))];
                    if let Some(r) = get("realm") {
                        t.push(("realm".to_owned(), V::s(r)));
                    }
                    t.push(("require".to_owned(), req));
                    list.push(V::Tab(t));
                }
                report.translated(src, key, "auth-basic rules (one per path prefix)");
                vec![opt("auth-basic", "require-list", V::Arr(list))]
            }
            "deflate.mimetypes" | "compress.filetype" => {
                report.translated(src, key, "compress mime-types");
                vec![opt("compress", "mime-types", V::strs(val.as_list()))]
            }
            "deflate.allowed-encodings" | "compress.allowed-encodings" => {
                let mut enc = Vec::new();
                let mut dropped = Vec::new();
                let list = val.as_list();
                for want in ["br", "zstd", "gzip"] {
                    if list.iter().any(|e| match e.as_str() {
                        "br" | "brotli" => want == "br",
                        "zstd" => want == "zstd",
                        "gzip" | "x-gzip" => want == "gzip",
                        _ => false,
                    }) {
                        enc.push(want);
                    }
                }
                for e in &list {
                    if !matches!(e.as_str(), "br" | "brotli" | "zstd" | "gzip" | "x-gzip") {
                        dropped.push(e.clone());
                    }
                }
                if dropped.is_empty() {
                    report.translated(src, key, "compress encodings");
                } else {
                    report.approximated(
                        src,
                        key,
                        format!(
                            "compress encodings {enc:?}; {} not produced by Tessera",
                            dropped.join(", ")
                        ),
                    );
                }
                vec![opt("compress", "encodings", V::strs(enc))]
            }
            "deflate.max-compress-size" | "compress.max-filesize" => {
                let kib = val
                    .as_string()
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(0);
                report.translated(src, key, "compress max-size (KiB -> bytes)");
                vec![opt("compress", "max-size", V::Int(kib * 1024))]
            }
            "deflate.min-compress-size" => {
                let b = val
                    .as_string()
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(0);
                report.translated(src, key, "compress min-size");
                vec![opt("compress", "min-size", V::Int(b))]
            }
            "deflate.compression-level" => {
                let l = val
                    .as_string()
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(6);
                report.translated(src, key, "compress gzip-level");
                vec![opt("compress", "gzip-level", V::Int(l.clamp(1, 9)))]
            }
            "deflate.cache-dir" | "compress.cache-dir" => {
                report.approximated(
                    src,
                    key,
                    "Tessera keeps compressed bodies in memory (compress cache-size), not on disk",
                );
                Vec::new()
            }
            _ => {
                if let Some((_, why)) = UNSUPPORTED.iter().find(|(p, _)| key.starts_with(p)) {
                    report.dropped(src, key, *why);
                } else {
                    report.dropped(src, key, "unknown option");
                }
                Vec::new()
            }
        }
    }

    /// Whether context `ctx`'s own test is a `$HTTP["url"] =~` regex (whose
    /// captures `%N` refer to).
    fn own_url_regex(&self, ctx: usize) -> bool {
        self.ctx(ctx)
            .cond
            .as_ref()
            .is_some_and(|c| c.field == "HTTP" && c.key == "url" && c.op == CondOp::Re)
    }

    fn url_rule(
        &self,
        re: &str,
        target: &str,
        own_regex: bool,
        src: &Src,
        key: &str,
        report: &mut Report,
    ) -> Option<V> {
        if let Err(e) = regex_ok(re) {
            report.dropped(
                src,
                key,
                format!("\"{re}\": invalid regular expression ({e})"),
            );
            return None;
        }
        if target.contains("${") {
            report.dropped(
                src,
                key,
                format!("\"{re}\" => \"{target}\": ${{…}} substitutions are not supported"),
            );
            return None;
        }
        let bytes = target.as_bytes();
        let uses_pct = bytes
            .windows(2)
            .any(|w| w[0] == b'%' && w[1].is_ascii_digit());
        if uses_pct && !own_regex {
            report.dropped(
                src,
                key,
                format!("\"{re}\" => \"{target}\": %N refers to captures of a host or other non-URL condition, which Tessera does not keep"),
            );
            return None;
        }
        let mut t = vec![("regex".into(), V::s(re)), ("target".into(), V::s(target))];
        if mentions_query(re) {
            t.push(("match-query".into(), V::Bool(true)));
        }
        Some(V::Tab(t))
    }

    fn expire_value(&self, v: &str, src: &Src, key: &str, report: &mut Report) -> Option<String> {
        match expire::parse_lighttpd(v) {
            Ok(e) => {
                if e.uses_years {
                    report.approximated(src, key, format!("\"{v}\": a year is 365 days (lighttpd 1.4.74 and later; earlier versions counted 360)"));
                }
                Some(e.to_tessera())
            }
            Err(msg) => {
                report.dropped(
                    src,
                    key,
                    format!("{msg} (lighttpd refuses to start with it)"),
                );
                None
            }
        }
    }

    fn mime_types(&self, val: &Val, src: &Src, report: &mut Report) -> V {
        let mut out: Vec<(String, V)> = Vec::new();
        let mut multi = Vec::new();
        let mut base = Vec::new();
        let mut same = 0usize;
        for (k, t) in val.as_pairs() {
            if k.is_empty() {
                if normalize_mime(&t) != "application/octet-stream" {
                    report.approximated(src, "mimetype.assign", format!("the default \"\" => \"{t}\": Tessera sends application/octet-stream for unknown extensions"));
                }
                continue;
            }
            let Some(ext) = k.strip_prefix('.') else {
                base.push(k);
                continue;
            };
            if ext.contains('.') || ext.is_empty() {
                multi.push(k);
                continue;
            }
            let ext = ext.to_ascii_lowercase();
            if out.iter().any(|(e, _)| *e == ext) {
                continue;
            }
            if normalize_mime(&builtin_mime(&ext)) == normalize_mime(&t) {
                same += 1;
                continue;
            }
            out.push((ext, V::s(t)));
        }
        // lighttpd sends its default ("" entry, else application/octet-stream)
        // for every extension the list does not name; Tessera would send its
        // built-in type, which also changes which expires mime-types entries
        // apply. The common web extensions are written with lighttpd's type.
        let default_type = val
            .as_pairs()
            .iter()
            .find(|(k, _)| k.is_empty())
            .map_or_else(|| "application/octet-stream".to_owned(), |(_, t)| t.clone());
        let listed: Vec<String> = val
            .as_pairs()
            .iter()
            .filter_map(|(k, _)| k.strip_prefix('.').map(str::to_ascii_lowercase))
            .collect();
        let unlisted: Vec<&str> = crate::tessera::WEB_EXTENSIONS
            .iter()
            .copied()
            .filter(|e| !listed.iter().any(|l| l == e))
            .filter(|e| normalize_mime(&builtin_mime(e)) != normalize_mime(&default_type))
            .collect();
        if !unlisted.is_empty() {
            out.extend(
                unlisted
                    .iter()
                    .map(|e| ((*e).to_owned(), V::s(&default_type))),
            );
            report.translated(
                src,
                "mimetype.assign",
                format!(
                    "the common extensions it does not list ({}) are written as {default_type}, which lighttpd sends for them (Tessera's built-in types would differ, e.g. .{} is {}); rarer extensions it does not list get Tessera's built-in types",
                    unlisted.join(" "),
                    unlisted[0],
                    builtin_mime(unlisted[0])
                ),
            );
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        report.translated(
            src,
            "mimetype.assign",
            format!(
                "static-file mime-types: {} entries differ from Tessera's built-in types and are written, {same} are the same",
                out.len()
            ),
        );
        if !multi.is_empty() {
            report.approximated(src, "mimetype.assign", format!("keys with several dots ({}) cannot be expressed: Tessera looks at the last extension only", multi.join(", ")));
        }
        if !base.is_empty() {
            report.approximated(
                src,
                "mimetype.assign",
                format!("whole-name keys ({}) are not supported", base.join(", ")),
            );
        }
        V::Tab(out)
    }
}

/// Whether a lighttpd or Cherokee URL regex looks at the query string (an
/// escaped `?`): those get `match-query = true`. Others match the path, and
/// the request's query is appended to the target, which is what lighttpd's
/// `^/old/(.*)$` => `/new/$1` gives too (its `(.*)` swallows the query).
pub(crate) fn mentions_query(re: &str) -> bool {
    re.contains("\\?") || re.contains("[?]")
}

/// A lighttpd back end (`"host"`, `"port"`, `"socket"`) as a Tessera server:
/// `host:port` (`[v6]:port`), or `unix:/path`.
fn backend_addr(pairs: &[(String, Val)]) -> Result<String, String> {
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.as_string())
    };
    if let Some(sock) = get("socket") {
        if !sock.starts_with('/') {
            return Err(format!("socket \"{sock}\" is not an absolute path"));
        }
        return Ok(format!("unix:{sock}"));
    }
    let Some(host) = get("host").filter(|h| !h.is_empty()) else {
        return Err("no \"host\" or \"socket\"".into());
    };
    let port = match get("port") {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("port \"{p}\" is not a port number"))?,
        None => 80,
    };
    if host.contains(':') && !host.starts_with('[') {
        Ok(format!("[{host}]:{port}"))
    } else {
        Ok(format!("{host}:{port}"))
    }
}

/// Per-back-end keys of lighttpd's `proxy.server` that become upstream
/// settings (the same for every back end of one list).
const BACKEND_KEYS: &[(&str, &str)] = &[
    ("connect-timeout", "connect-timeout"),
    ("read-timeout", "read-timeout"),
    ("write-timeout", "send-timeout"),
    ("disable-time", "fail-timeout"),
];

/// `proxy.server` entries: `[{key, servers, connect-timeout?, …}]`, in order.
fn proxy_servers(val: &Val, src: &Src, report: &mut Report) -> Vec<V> {
    const KEY: &str = "proxy.server";
    let mut out = Vec::new();
    for (ext, backends) in backends::keyed_hosts(KEY, val, src, report) {
        let mut servers = Vec::new();
        let mut settings: Vec<(String, V)> = Vec::new();
        for b in &backends {
            match backend_addr(b) {
                Ok(a) => servers.push(V::s(a)),
                Err(e) => {
                    report.dropped(src, KEY, format!("\"{ext}\": a back end is left out: {e}"));
                    continue;
                }
            }
            for (k, v) in b {
                if matches!(k.as_str(), "host" | "port" | "socket") {
                    continue;
                }
                if let Some((_, t)) = BACKEND_KEYS.iter().find(|(l, _)| l == k) {
                    match v.as_string().and_then(|n| n.parse::<i64>().ok()) {
                        Some(n) if !settings.iter().any(|(x, _)| x == t) => {
                            report.translated(
                                src,
                                &format!("{KEY} \"{k}\""),
                                format!("upstream {t} = {n}"),
                            );
                            settings.push(((*t).to_owned(), V::Int(n)));
                        }
                        Some(n) if settings.iter().any(|(x, w)| x == t && *w != V::Int(n)) => {
                            report.approximated(src, &format!("{KEY} \"{k}\""), format!("\"{ext}\": back ends differ; Tessera has one {t} per upstream, the first back end's is used"));
                        }
                        Some(_) => {}
                        None => report.dropped(
                            src,
                            &format!("{KEY} \"{k}\""),
                            format!("{} is not a number of seconds", v.show()),
                        ),
                    }
                    continue;
                }
                let why = match k.as_str() {
                    "bin-path"
                    | "bin-environment"
                    | "bin-copy-environment"
                    | "min-procs"
                    | "max-procs"
                    | "max-load-per-proc"
                    | "kill-signal"
                    | "listen-backlog" => "Tessera does not start back ends: start it yourself",
                    "check-local"
                    | "docroot"
                    | "fix-root-scriptname"
                    | "strip-request-uri"
                    | "mode"
                    | "broken-scriptfilename" => {
                        "a FastCGI/SCGI setting with no meaning for an HTTP back end"
                    }
                    "x-sendfile" | "x-sendfile-docroot" | "allow-x-send-file" => {
                        "X-Sendfile from HTTP back ends is not supported"
                    }
                    _ => "not supported for HTTP back ends",
                };
                report.dropped(src, &format!("{KEY} \"{k}\""), format!("\"{ext}\": {why}"));
            }
        }
        if servers.is_empty() {
            continue;
        }
        let n = servers.len();
        report.translated(
            src,
            KEY,
            format!(
                "\"{ext}\": an [[upstream]] with {n} server{} and proxy upstream = its name {}",
                if n == 1 { "" } else { "s" },
                match ext.as_str() {
                    "" | "/" => "for every request of the block".to_owned(),
                    p if p.starts_with('/') => format!("in a rule matching path-prefix \"{p}\""),
                    x => format!("in a rule matching paths ending in \"{x}\""),
                }
            ),
        );
        let mut t = vec![
            ("key".to_owned(), V::s(ext.clone())),
            ("prefix".to_owned(), V::s(ext.clone())),
            ("servers".to_owned(), V::Arr(servers)),
        ];
        t.extend(settings);
        out.push(V::Tab(t));
    }
    out
}

/// `proxy.header` options into model keys (`map-path`, `host`), with the
/// others reported.
fn proxy_header(val: &Val, src: &Src, report: &mut Report) -> Vec<(&'static str, V)> {
    let mut out = Vec::new();
    let Val::Arr(items) = val else {
        report.dropped(src, "proxy.header", format!("{}: not a list", val.show()));
        return out;
    };
    for (k, v) in items {
        let Some(k) = k else { continue };
        let what = format!("proxy.header \"{k}\"");
        match k.to_ascii_lowercase().as_str() {
            "map-urlpath" => {
                let pairs = v.as_pairs();
                if pairs.is_empty() {
                    continue;
                }
                report.approximated(src, &what, "proxy map-path (the request path's longest matching prefix is replaced); lighttpd also maps the paths back in the response's Location, Content-Location and Set-Cookie, which Tessera does not");
                out.push(("map-path", V::Tab(pairs.into_iter().map(|(a, b)| (a, V::s(b))).collect())));
            }
            "map-host-request" => {
                let pairs = v.as_pairs();
                match pairs.as_slice() {
                    [(any, to)] if any == "-" && to == "-" => {
                        report.translated(src, &what, "proxy host = \"upstream\" (the server's host:port)");
                        out.push(("host", V::s("upstream")));
                    }
                    [(any, to)] if any == "-" && !to.is_empty() => {
                        report.translated(src, &what, format!("proxy host = \"{to}\""));
                        out.push(("host", V::s(to.clone())));
                    }
                    _ => report.dropped(src, &what, "only ( \"-\" => \"HOST\" ) is translated: Tessera sets one Host for every request, it cannot map each client host to another"),
                }
            }
            "map-host-response" => report.dropped(src, &what, "Tessera does not rewrite host names in the upstream's response headers (Location, Set-Cookie)"),
            "map-urlpath-response" => report.dropped(src, &what, "Tessera does not rewrite paths in the upstream's response headers"),
            "https-remap" => report.dropped(src, &what, "Tessera does not rewrite https:// back to http:// in the upstream's response headers"),
            "upgrade" => {
                if v.as_bool() == Some(true) {
                    report.translated(src, &what, "Tessera's proxy always passes Upgrade (WebSocket) through");
                } else {
                    report.approximated(src, &what, "disabled here, but Tessera's proxy always passes Upgrade (WebSocket) through");
                }
            }
            "connect" => {
                if v.as_bool() == Some(true) {
                    report.dropped(src, &what, "CONNECT tunnels are not supported by Tessera's proxy");
                }
            }
            "force-http10" => report.not_needed(src, &what, "Tessera speaks HTTP/1.1 to upstreams"),
            _ => report.dropped(src, &what, "unknown proxy.header option"),
        }
    }
    out
}

fn parse_net(a: &str) -> bool {
    let a = a.trim();
    if let Some((ip, bits)) = a.split_once('/') {
        let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
            return false;
        };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        bits.parse::<u8>().is_ok_and(|b| b <= max)
    } else {
        a.parse::<std::net::IpAddr>().is_ok()
    }
}

/// Translates a lighttpd `accesslog.format` into Tessera's directives; the
/// notes say what changed.
pub(crate) fn log_format(f: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut notes: Vec<String> = Vec::new();
    let chars: Vec<char> = f.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let e = chars[i + 1];
            match e {
                'n' | 'r' | 'a' | 'b' | 'f' | 'v' => notes.push(format!(
                    "the escape \\{e} is left out (one line per request)"
                )),
                't' => out.push('\t'),
                other => out.push(other),
            }
            i += 2;
            continue;
        }
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let mut arg: Option<String> = None;
        if chars.get(i) == Some(&'{') {
            let close = chars[i..].iter().position(|&x| x == '}').map(|p| p + i);
            let Some(close) = close else {
                notes.push("an unterminated %{ is left out".into());
                break;
            };
            arg = Some(chars[i + 1..close].iter().collect());
            i = close + 1;
        }
        let mut modifier = String::new();
        while matches!(chars.get(i), Some('<' | '>')) {
            modifier.push(chars[i]);
            i += 1;
        }
        let Some(&d) = chars.get(i) else {
            notes.push("a trailing % is left out".into());
            break;
        };
        i += 1;
        let directive = format!(
            "%{}{modifier}{d}",
            arg.as_ref().map(|a| format!("{{{a}}}")).unwrap_or_default()
        );
        match (d, arg.as_deref()) {
            ('%', None) => out.push_str("%%"),
            ('h' | 'a' | 'l' | 'u' | 'r' | 'D' | 'v' | 'V' | 'U' | 'm' | 'H' | 'A', None) => {
                out.push('%');
                out.push(d);
            }
            // lighttpd logs 0 for an empty body (HEAD, 304) once a response
            // was sent: Tessera's %B (its %b writes "-" as Apache does).
            ('b' | 'B', None) => out.push_str("%B"),
            ('p', None | Some("local" | "canonical")) => out.push_str("%p"),
            ('p', Some("remote")) => out.push_str("%{remote}p"),
            ('s', None) => out.push_str("%>s"),
            ('t', None) => {
                out.push_str("%t");
            }
            ('t', Some(a)) => {
                let (begin, a) = match a.split_once(':') {
                    Some(("begin", rest)) => (true, rest),
                    Some(("end", rest)) => (false, rest),
                    _ => (false, a),
                };
                let bare = |p: &str| matches!(p, "%d/%b/%Y:%H:%M:%S %z" | "%d/%b/%Y:%T %z");
                match a {
                    "sec" | "msec" | "usec" => out.push_str(&format!("%{{{a}}}t")),
                    p if bare(p) => out.push_str(&format!("%{{{p}}}t")),
                    p if p
                        .strip_prefix('[')
                        .and_then(|p| p.strip_suffix(']'))
                        .is_some_and(bare) =>
                    {
                        out.push_str("%t")
                    }
                    _ => {
                        out.push_str("%t");
                        notes.push(format!(
                            "{directive} becomes %t ([10/Oct/2000:13:55:36 +0000], UTC)"
                        ));
                    }
                }
                if begin {
                    notes.push(format!(
                        "{directive}: Tessera writes the time at the end of the request"
                    ));
                }
            }
            ('T', None | Some("s" | "sec")) => out.push_str("%T"),
            ('T', Some("ms" | "msec")) => out.push_str("%{ms}T"),
            ('T', Some("us" | "usec")) => out.push_str("%{us}T"),
            ('T', Some(_)) => {
                out.push_str("%D");
                notes.push(format!("{directive} becomes %D (microseconds)"));
            }
            ('i', Some(h)) => {
                out.push_str(&format!("%{{{h}}}i"));
            }
            ('q', None) => out.push_str("%{raw}q"),
            ('O', None) => {
                out.push_str("%b");
                notes.push("%O (bytes with headers) becomes %b (body bytes)".into());
            }
            _ => {
                out.push('-');
                notes.push(format!("{directive} is not supported and logs \"-\""));
            }
        }
    }
    (out, notes)
}

fn translate(parsed: &Parsed, main: &str, report: &mut Report) -> Result<Output, ImportError> {
    for n in &parsed.notes {
        report.push(&n.src, n.outcome, &n.what, n.message.clone());
    }
    let mut tr = Tr {
        parsed,
        main: main.to_owned(),
        loaded: Vec::new(),
        cond_cache: HashMap::new(),
        listen: Vec::new(),
        ctx_cond: HashMap::new(),
    };
    // server.modules
    if let Some(m) = tr.global("server.modules").cloned() {
        let list = m.val.as_list();
        for name in &list {
            if !KNOWN_MODULES.contains(&name.as_str()) {
                report.dropped(
                    &m.src,
                    "server.modules",
                    format!("{name}: not supported, its options are dropped"),
                );
            }
        }
        report.translated(
            &m.src,
            "server.modules",
            "the vhost modules lists (pipelines)",
        );
        tr.loaded = list;
    }
    for (m, src) in backends::debian_depends(&parsed.files) {
        if !tr.is_loaded(&m) {
            report.approximated(
                &src,
                "-*- depends -*-",
                format!("Debian's lighty-enable-mod enables the configuration loading {m} with this file: imported as if {m} were in server.modules"),
            );
            tr.loaded.push(m);
        }
    }
    for (i, c) in parsed.contexts.iter().enumerate().skip(1) {
        if let Some(s) = c.get("server.modules") {
            report.dropped(
                &s.src,
                "server.modules",
                "only allowed in the global context",
            );
        }
        let _ = i;
    }
    tr.listeners(report);
    // [server] keys.
    let mut server: Vec<(String, V, Src)> = Vec::new();
    let g = tr.ctx(0).clone();
    for s in &g.settings {
        let n = s.val.as_string().and_then(|v| v.parse::<i64>().ok());
        match (s.key.as_str(), n) {
            ("server.max-keep-alive-idle", Some(n)) => {
                report.translated(&s.src, &s.key, "[server] keep-alive");
                server.push(("keep-alive".into(), V::Int(n), s.src.clone()));
            }
            ("server.max-keep-alive-requests", Some(0)) => {
                report.translated(&s.src, &s.key, "[server] keep-alive = 0");
                server.retain(|(k, _, _)| k != "keep-alive");
                server.push(("keep-alive".into(), V::Int(0), s.src.clone()));
            }
            ("server.max-keep-alive-requests", _) => {
                report.approximated(
                    &s.src,
                    &s.key,
                    "Tessera does not limit requests per connection",
                );
            }
            ("server.max-read-idle", Some(n)) => {
                report.approximated(
                    &s.src,
                    &s.key,
                    "[server] client-header-timeout (the time to send the request head)",
                );
                server.push(("client-header-timeout".into(), V::Int(n), s.src.clone()));
            }
            ("server.max-write-idle", Some(n)) => {
                report.translated(&s.src, &s.key, "[server] send-timeout");
                server.push(("send-timeout".into(), V::Int(n), s.src.clone()));
            }
            ("server.max-connections", Some(n)) => {
                report.approximated(
                    &s.src,
                    &s.key,
                    "[server] max-connections is per worker in Tessera",
                );
                server.push(("max-connections".into(), V::Int(n.max(1)), s.src.clone()));
            }
            ("server.max-worker", _) => {
                report.not_needed(
                    &s.src,
                    &s.key,
                    "Tessera uses one worker thread per core ([server] workers)",
                );
            }
            _ => {}
        }
    }
    tr.proxy_server_keys(&mut server, report);
    // Blocks: lighttpd's defaults, then every context in file order.
    let dsrc = Src::new("<lighttpd default>", 0);
    let d = |module, key, val| Opt {
        module,
        key,
        val,
        src: dsrc.clone(),
    };
    let mut blocks = vec![Block {
        cond: Cond::True,
        opts: vec![
            d("static-file", "index-files", V::Arr(Vec::new())),
            d("static-file", "hidden-files", V::Bool(true)),
            d("static-file", "follow-symlinks", V::s("always")),
            d("dir-listing", "enabled", V::Bool(false)),
            d("dir-listing", "hidden-files", V::Bool(false)),
            d("dir-listing", "follow-symlinks", V::s("always")),
            d(
                "access-log",
                "format",
                V::s(log_format(DEFAULT_LOG_FORMAT).0),
            ),
        ],
        reset: false,
        base: true,
        label: "lighttpd's defaults".into(),
    }];
    // Written explicitly, so Tessera behaves as lighttpd does: not a warning.
    report.translated(
        &Src::new(main, 1),
        "static-file",
        "hidden-files = true and follow-symlinks = \"always\", as lighttpd serves dot-files and follows every symbolic link (set hidden-files = false and follow-symlinks = \"inside-root\" to harden)",
    );
    if !parsed
        .contexts
        .iter()
        .any(|c| c.get("mimetype.assign").is_some())
    {
        report.approximated(
            &Src::new(main, 1),
            "mimetype.assign",
            "not set: lighttpd sends application/octet-stream for every file, Tessera its built-in types",
        );
    }
    let mut docroots: Vec<(usize, String, Src)> = Vec::new();
    for i in 0..parsed.contexts.len() {
        let ctx = tr.ctx(i).clone();
        let cond = tr.cond_of(i, report);
        let mut opts = Vec::new();
        for s in &ctx.settings {
            if s.key == "server.document-root" {
                if let Some(p) = s.val.as_string() {
                    if p.is_empty() {
                        // Tessera would serve the configuration's directory.
                        return Err(ImportError::Parse {
                            file: s.src.file.clone(),
                            line: s.src.line,
                            message: "server.document-root is empty: set the directory of the files to serve".into(),
                        });
                    }
                    docroots.push((i, p, s.src.clone()));
                }
                continue;
            }
            opts.extend(tr.option(i, s, report));
        }
        let label = match &ctx.cond {
            _ if i == 0 => format!("{} (global)", main),
            Some(c) => format!("{}-{} {}", c.src, ctx.end_line, c.show()),
            None => format!("{}-{} else", ctx.src, ctx.end_line),
        };
        blocks.push(Block {
            cond,
            opts,
            reset: false,
            base: false,
            label,
        });
    }
    let sets = |m: &str, k: &str| {
        blocks
            .iter()
            .flat_map(|b| b.opts.iter())
            .find(|o| o.module == m && o.key == k)
            .map(|o| o.src.clone())
    };
    if let (Some(s), None) = (
        sets("compress", "mime-types"),
        sets("compress", "encodings"),
    ) {
        report.approximated(
            &s,
            "deflate.allowed-encodings",
            "not set: Tessera offers br, zstd and gzip (lighttpd's default depends on its build)",
        );
    }
    // Module order: lighttpd's server.modules decides redirect vs rewrite and
    // setenv vs expire.
    let pos = |m: &str| tr.loaded.iter().position(|l| l == m).unwrap_or(usize::MAX);
    let mut order: Vec<&'static str> = MODULE_ORDER.to_vec();
    if pos("mod_rewrite") < pos("mod_redirect") {
        swap(&mut order, "redirect", "rewrite");
    }
    if pos("mod_setenv") < pos("mod_expire") {
        // setenv first: headers before expires (expires then sees the
        // Cache-Control setenv added and, like lighttpd, keeps it).
    } else {
        swap(&mut order, "headers", "expires");
    }
    // Vhosts: the default (global) one, then one per host test.
    let mut tests: Vec<HostTest> = Vec::new();
    for b in &blocks {
        b.cond.host_tests(&mut tests);
    }
    let mut names_seen: Vec<String> = Vec::new();
    tests.retain(|t| {
        let n = t.server_name();
        if names_seen.contains(&n) {
            false
        } else {
            names_seen.push(n);
            true
        }
    });
    // A host test met only inside $SERVER["socket"] blocks is a vhost for
    // those listeners (vhost `listen`); elsewhere its host goes to the other
    // vhosts, as in lighttpd. Where the sockets cannot be told (a socket
    // test under `!=` or an `else`), the vhost is not written rather than
    // served on every port.
    let mut vhost_listen: HashMap<HostTest, Vec<String>> = HashMap::new();
    tests.retain(|t| {
        let with: Vec<usize> = (0..parsed.contexts.len())
            .filter(|&i| {
                let mut ts = Vec::new();
                blocks[i + 1].cond.host_tests(&mut ts);
                ts.contains(t)
            })
            .collect();
        if !with.iter().all(|&i| blocks[i + 1].cond.has_matcher("socket")) {
            return true;
        }
        let mut addrs: Vec<String> = Vec::new();
        let mut told = true;
        for &i in &with {
            match blocks[i + 1].cond.required_matchers("socket") {
                Some(v) if !v.is_empty() => {
                    for a in v.iter().filter_map(V::as_str) {
                        if !addrs.iter().any(|x| x == a) {
                            addrs.push(a.to_owned());
                        }
                    }
                }
                _ => told = false,
            }
        }
        for &i in &with {
            let Some(rc) = &parsed.contexts[i].cond else {
                continue;
            };
            if told {
                report.translated(
                    &rc.src,
                    &rc.show(),
                    format!("vhost \"{}\" listen = {addrs:?} (only on those listeners)", t.server_name()),
                );
            } else {
                report.dropped(
                    &rc.src,
                    &rc.show(),
                    format!(
                        "a vhost for \"{}\" on some listeners only, which a $SERVER[\"socket\"] test under != or else does not name: not imported (nor served on any port), rather than served on every one",
                        t.server_name()
                    ),
                );
            }
        }
        if told {
            vhost_listen.insert(t.clone(), addrs);
        }
        told
    });
    let regex_index = |t: &HostTest| tests.iter().position(|x| x == t);
    let mut out = Output {
        header: vec![format!("Files read: {}.", parsed.files.join(", "))],
        listen: tr.listen.clone(),
        server,
        upstreams: Vec::new(),
        vhosts: Vec::new(),
    };
    let mut vhosts: Vec<(Option<HostTest>, VhostOut)> = Vec::new();
    for own in std::iter::once(None).chain(tests.iter().cloned().map(Some)) {
        let eval = |t: &HostTest| -> Option<bool> {
            match &own {
                None => Some(false),
                // The authorities this vhost gets: the name without port or
                // with any port (with one port for `== "h:8080"`): the test
                // is decided when it gives all of them the same answer.
                Some(HostTest::Exact(h)) => {
                    let name = crate::strip_port(h);
                    let ported: Vec<String> = if name.len() == h.len() {
                        vec![format!("{h}:1"), format!("{h}:80"), format!("{h}:65535")]
                    } else {
                        vec![h.clone()]
                    };
                    let first = t.eval_authority(name);
                    ported
                        .iter()
                        .all(|a| t.eval_authority(a) == first)
                        .then_some(first)
                }
                Some(v) => {
                    if t == v {
                        return Some(true);
                    }
                    let v_wild = v.is_wildcard();
                    match t {
                        HostTest::Exact(_) => Some(false),
                        _ if t.is_wildcard() => {
                            let ts = t.server_name()[1..].to_owned();
                            if v_wild {
                                let vs = v.server_name()[1..].to_owned();
                                Some(vs.ends_with(&ts))
                            } else {
                                Some(false)
                            }
                        }
                        _ => {
                            if v_wild {
                                None
                            } else if regex_index(t) < regex_index(v) {
                                Some(false)
                            } else {
                                None
                            }
                        }
                    }
                }
            }
        };
        let listen = own
            .as_ref()
            .and_then(|t| vhost_listen.get(t))
            .cloned()
            .unwrap_or_default();
        let vblocks: Vec<Block> = blocks
            .iter()
            .map(|b| {
                // A vhost on one listener knows its socket tests' answers.
                let cond = match listen.as_slice() {
                    [one] => b.cond.decide_matcher("socket", &V::s(one.clone())),
                    _ => b.cond.clone(),
                };
                Block {
                    cond: cond.simplify(&eval),
                    ..b.clone()
                }
            })
            .collect();
        let vname = own
            .as_ref()
            .map_or_else(|| "default".to_owned(), HostTest::server_name);
        // Document root: the last one set where the vhost's condition holds.
        let mut root: Option<(String, Src)> = None;
        for (ci, p, s) in &docroots {
            let c = vblocks[ci + 1].cond.clone();
            match c {
                Cond::True => root = Some((p.clone(), s.clone())),
                Cond::False => {}
                _ => report.approximated(
                    s,
                    "server.document-root",
                    format!("vhost \"{vname}\": Tessera has one document root per vhost; this conditional one is not used"),
                ),
            }
        }
        if root.is_none() {
            if let Some((_, p, s)) = docroots.first() {
                report.approximated(s, "server.document-root", format!("vhost \"{vname}\": no unconditional document root; this one is used for every request"));
                root = Some((p.clone(), s.clone()));
            }
        }
        let (root, root_src) = match root {
            Some((p, s)) => {
                report.translated(
                    &s,
                    "server.document-root",
                    format!("vhost \"{vname}\" document-root"),
                );
                (p, Some(s))
            }
            None => {
                report.approximated(
                    &Src::new(main, 1),
                    "server.document-root",
                    format!("vhost \"{vname}\": not set anywhere; /var/www is written, change it"),
                );
                ("/var/www".to_owned(), None)
            }
        };
        if !Path::new(&root).is_dir() {
            report.approximated(
                root_src.as_ref().unwrap_or(&Src::new(main, 1)),
                "server.document-root",
                format!("{root} does not exist on this machine: create it before starting Tessera"),
            );
        }
        let resolved = resolve(&vblocks, &order, &Tessera, &vname, report);
        let mut comment = Vec::new();
        match &own {
            None => comment.push(format!(
                "The global context of {main}: every host no other vhost claims."
            )),
            Some(t) => {
                let from: Vec<String> = blocks
                    .iter()
                    .filter(|b| {
                        let mut ts = Vec::new();
                        b.cond.host_tests(&mut ts);
                        ts.contains(t)
                    })
                    .map(|b| b.label.clone())
                    .collect();
                comment.push(format!(
                    "Hosts passing $HTTP[\"host\"] {}, from:",
                    show_test(t)
                ));
                comment.extend(from.into_iter().map(|f| format!("  {f}")));
            }
        }
        vhosts.push((
            own.clone(),
            VhostOut {
                comment,
                // `== "h:8080"` also claims `h`, unless a `== "h"` vhost does.
                names: own
                    .iter()
                    .flat_map(HostTest::server_names)
                    .filter(|n| {
                        own.as_ref().is_some_and(|o| &o.server_name() == n)
                            || !tests.iter().any(|t| &t.server_name() == n)
                    })
                    .collect(),
                default: own.is_none(),
                listen,
                names_see_port: own.as_ref().is_some_and(HostTest::sees_port),
                document_root: root,
                document_root_src: root_src,
                resolved,
            },
        ));
    }
    // An exact-name vhost identical to the default one, whose name no other
    // vhost would claim, is left out.
    let default = vhosts[0].1.clone();
    let others: Vec<HostTest> = vhosts.iter().filter_map(|(t, _)| t.clone()).collect();
    for (t, v) in vhosts {
        if let Some(HostTest::Exact(h)) = &t {
            let claimed = others
                .iter()
                .any(|o| o != t.as_ref().unwrap_or(o) && o.eval(h));
            if !claimed
                && v.document_root == default.document_root
                && v.resolved == default.resolved
            {
                report.not_needed(
                    &Src::new(main, 1),
                    &format!("$HTTP[\"host\"] == \"{h}\""),
                    "the host gets the same configuration as the default vhost; no vhost is written for it",
                );
                continue;
            }
        }
        out.vhosts.push(v);
    }
    if out.vhosts.is_empty() {
        return Err(ImportError::Empty {
            file: main.to_owned(),
            message: "nothing to serve".into(),
        });
    }
    Ok(out)
}

fn show_test(t: &HostTest) -> String {
    match t {
        HostTest::Exact(h) => format!("== \"{h}\""),
        HostTest::Suffix(s) => format!("=$ \"{s}\""),
        HostTest::Prefix(p) => format!("=^ \"{p}\""),
        HostTest::Regex(r) => format!("=~ \"{r}\""),
    }
}

fn swap(order: &mut [&'static str], a: &str, b: &str) {
    let (Some(i), Some(j)) = (
        order.iter().position(|m| *m == a),
        order.iter().position(|m| *m == b),
    ) else {
        return;
    };
    order.swap(i, j);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imp(text: &str) -> (String, Report) {
        let mut r = Report::default();
        let out = import_text(
            "t.conf",
            text,
            Path::new("/nonexistent"),
            &Options::default(),
            &mut r,
        )
        .unwrap();
        (crate::emit::write(&out), r)
    }

    /// The whole import (with `[[upstream]]` names assigned), parsed.
    fn imp_toml(text: &str) -> (toml::Table, crate::Report) {
        let out = crate::import_text(
            crate::Source::Lighttpd,
            "t.conf",
            text,
            Path::new("/nonexistent"),
            &Options::default(),
        )
        .unwrap();
        let t: toml::Table =
            toml::from_str(&out.toml).unwrap_or_else(|e| panic!("{e}\n{}", out.toml));
        (t, out.report)
    }

    fn upstreams(t: &toml::Table) -> Vec<&toml::Table> {
        t.get("upstream")
            .and_then(|u| u.as_array())
            .map(|a| a.iter().filter_map(|u| u.as_table()).collect())
            .unwrap_or_default()
    }

    fn upstream<'a>(t: &'a toml::Table, name: &str) -> &'a toml::Table {
        upstreams(t)
            .into_iter()
            .find(|u| u["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("no upstream {name}: {t:#?}"))
    }

    fn vhost(t: &toml::Table, i: usize) -> &toml::Table {
        t["vhost"].as_array().unwrap()[i].as_table().unwrap()
    }

    fn rules(v: &toml::Table) -> Vec<&toml::Table> {
        v.get("rule")
            .and_then(|r| r.as_array())
            .map(|a| a.iter().filter_map(|r| r.as_table()).collect())
            .unwrap_or_default()
    }

    fn no_drops(r: &crate::Report, needles: &[&str]) {
        for e in &r.entries {
            if e.outcome == crate::Outcome::Dropped {
                assert!(
                    !needles
                        .iter()
                        .any(|n| e.what.contains(n) || e.message.contains(n)),
                    "dropped: {e:?}"
                );
            }
        }
    }

    const PROXY_HEAD: &str =
        "server.document-root = \"/srv\"\nserver.modules = ( \"mod_proxy\", \"mod_extforward\" )\n";

    #[test]
    fn proxy_server_prefixes_extensions_and_back_end_forms() {
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}proxy.server = ( \"/api/\" => ( ( \"host\" => \"127.0.0.1\", \"port\" => 8080 ), ( \"host\" => \"10.0.0.2\", \"port\" => 8080 ) ),\n\
             \".jsp\" => ( \"tomcat\" => ( \"host\" => \"192.168.0.101\", \"port\" => 80 ) ),\n\
             \"/sock/\" => ( ( \"socket\" => \"/run/app.sock\" ) ),\n\
             \"/v6/\" => ( \"host\" => \"::1\", \"port\" => 9000, \"connect-timeout\" => 3, \"read-timeout\" => 30, \"write-timeout\" => 20, \"disable-time\" => 5 ),\n\
             \"/same/\" => ( ( \"host\" => \"192.168.0.101\" ) ) )\n"
        ));
        no_drops(&r, &["proxy"]);
        let api = upstream(&t, "default-api");
        assert_eq!(api["servers"].as_array().unwrap().len(), 2);
        // lighttpd's default balance is "fair".
        assert_eq!(api["balance"].as_str(), Some("least-conn"));
        assert_eq!(
            upstream(&t, "default-jsp")["servers"][0].as_str(),
            Some("192.168.0.101:80")
        );
        assert_eq!(
            upstream(&t, "default-sock")["servers"][0].as_str(),
            Some("unix:/run/app.sock")
        );
        let v6 = upstream(&t, "default-v6");
        assert_eq!(v6["servers"][0].as_str(), Some("[::1]:9000"));
        assert_eq!(v6["connect-timeout"].as_integer(), Some(3));
        assert_eq!(v6["read-timeout"].as_integer(), Some(30));
        assert_eq!(v6["send-timeout"].as_integer(), Some(20));
        assert_eq!(v6["fail-timeout"].as_integer(), Some(5));
        assert!(v6.get("balance").is_none(), "one server: no balance");
        // The same back end (port 80 by default) is one upstream.
        assert_eq!(upstreams(&t).len(), 4);
        let v = vhost(&t, 0);
        let rs = rules(v);
        let m =
            |i: usize| toml::Value::Table(rs[i]["match"].as_table().unwrap().clone()).to_string();
        assert!(m(0).contains("path-prefix = \"/api/\""), "{}", m(0));
        assert!(m(1).contains(r#"path-regex = '\.jsp$'"#), "{}", m(1));
        assert_eq!(rs[1]["proxy"]["upstream"].as_str(), Some("default-jsp"));
        // Rules of proxy.server's own prefixes are named after them.
        assert_eq!(
            rs[0]["name"].as_str(),
            Some("1: { path-prefix = \"/api/\" }")
        );
        assert_eq!(rs[4]["proxy"]["upstream"].as_str(), Some("default-jsp"));
        assert_eq!(rs.len(), 5);
    }

    #[test]
    fn proxy_balance_header_and_forwarded() {
        let two = "proxy.server = ( \"\" => ( ( \"host\" => \"10.0.0.10\" ), ( \"host\" => \"10.0.0.11\" ) ) )\n";
        for (lighttpd, tessera, warns) in [
            ("round-robin", "round-robin", false),
            ("fair", "least-conn", false),
            ("sticky", "ip-hash", false),
            ("hash", "ip-hash", true),
        ] {
            let (t, r) = imp_toml(&format!(
                "{PROXY_HEAD}proxy.balance = \"{lighttpd}\"\n{two}"
            ));
            let u = upstream(&t, "default-root");
            assert_eq!(u["balance"].as_str(), Some(tessera), "{lighttpd}");
            assert_eq!(
                r.find("proxy.balance").any(|e| e.outcome.is_warning()),
                warns,
                "{lighttpd}"
            );
            // "" is the whole vhost: the vhost's own table, before static-file.
            let v = vhost(&t, 0);
            assert_eq!(v["proxy"]["upstream"].as_str(), Some("default-root"));
            assert_eq!(v["modules"][0].as_str(), Some("proxy"));
        }
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}{two}proxy.header = ( \"map-urlpath\" => ( \"/api/\" => \"/\", \"/a\" => \"/b\" ), \"map-host-request\" => ( \"-\" => \"app.internal\" ),\n\
             \"upgrade\" => \"enable\", \"https-remap\" => \"enable\", \"connect\" => \"enable\" )\n\
             proxy.forwarded = ( \"for\" => 1, \"proto\" => 1, \"host\" => 1 )\n"
        ));
        let p = &vhost(&t, 0)["proxy"];
        assert_eq!(p["map-path"]["/api/"].as_str(), Some("/"));
        assert_eq!(p["map-path"]["/a"].as_str(), Some("/b"));
        assert_eq!(p["host"].as_str(), Some("app.internal"));
        assert_eq!(p["forwarded"].as_str(), Some("both"));
        let dropped: Vec<&str> = r
            .entries
            .iter()
            .filter(|e| e.outcome == crate::Outcome::Dropped)
            .map(|e| e.what.as_str())
            .collect();
        assert_eq!(
            dropped,
            vec!["proxy.header \"https-remap\"", "proxy.header \"connect\""]
        );
        assert!(r
            .find("proxy.header \"upgrade\"")
            .all(|e| e.outcome == crate::Outcome::Translated));
        // "-" => "-": the server's own host:port; a per-host map is not translated.
        let (t, _) = imp_toml(&format!(
            "{PROXY_HEAD}{two}proxy.header = ( \"map-host-request\" => ( \"-\" => \"-\" ) )\n"
        ));
        assert_eq!(vhost(&t, 0)["proxy"]["host"].as_str(), Some("upstream"));
        let (t, r) = imp_toml(&format!("{PROXY_HEAD}{two}proxy.header = ( \"map-host-request\" => ( \"a.example\" => \"b.internal\" ) )\n"));
        assert!(vhost(&t, 0)["proxy"].get("host").is_none());
        assert!(r
            .find("map-host-request")
            .any(|e| e.outcome == crate::Outcome::Dropped));
        // Only some Forwarded parameters: approximated.
        let (_, r) = imp_toml(&format!(
            "{PROXY_HEAD}{two}proxy.forwarded = ( \"for\" => 1, \"by\" => 1 )\n"
        ));
        assert!(r
            .find("proxy.forwarded")
            .any(|e| e.outcome == crate::Outcome::Approximated));
    }

    #[test]
    fn proxy_in_host_and_url_blocks() {
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}$HTTP[\"host\"] == \"www.example.com\" {{\n\
               proxy.balance = \"round-robin\"\n\
               proxy.server = ( \"\" => ( ( \"host\" => \"10.0.0.10\" ), ( \"host\" => \"10.0.0.11\" ) ) )\n\
             }}\n\
             $HTTP[\"url\"] =~ \"^/legacy/\" {{\n\
               proxy.server = ( \"/\" => ( ( \"host\" => \"127.0.0.1\", \"port\" => 9000 ) ) )\n\
             }}\n"
        ));
        no_drops(&r, &["proxy"]);
        assert_eq!(
            upstream(&t, "www.example.com-root")["balance"].as_str(),
            Some("round-robin")
        );
        // The default vhost: only the URL block proxies.
        let d = vhost(&t, 0);
        assert!(d.get("proxy").is_none());
        let rs = rules(d);
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0]["match"]["path-regex"].as_str(), Some("^/legacy/"));
        assert_eq!(rs[0]["proxy"]["upstream"].as_str(), Some("default-root"));
        // The host: everything goes to its pool, except /legacy/ (the later block).
        let h = vhost(&t, 1);
        assert_eq!(
            h["proxy"]["upstream"].as_str(),
            Some("www.example.com-root")
        );
        assert_eq!(
            rules(h)[0]["proxy"]["upstream"].as_str(),
            Some("default-root")
        );
        // mod_proxy not loaded: lighttpd ignores proxy.*.
        let (t, r) = imp_toml("server.document-root = \"/srv\"\nproxy.server = ( \"\" => ( ( \"host\" => \"10.0.0.10\" ) ) )\n");
        assert!(upstreams(&t).is_empty());
        assert!(r
            .find("mod_proxy is not in server.modules")
            .any(|e| e.outcome == crate::Outcome::Dropped));
    }

    #[test]
    fn extforward_and_max_request_size() {
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}server.port = 8080\nserver.max-request-size = 8192\n\
             extforward.forwarder = ( \"10.0.0.1\" => \"trust\", \"192.168.0.0/16\" => \"trust\", \"10.9.9.9\" => \"untrusted\" )\n\
             extforward.headers = ( \"Forwarded\" )\n\
             extforward.hap-PROXY = \"enable\"\n\
             $SERVER[\"socket\"] == \":8443\" {{ extforward.hap-PROXY = \"disable\" }}\n\
             $SERVER[\"socket\"] == \":9000\" {{ }}\n"
        ));
        no_drops(&r, &["extforward", "max-request-size"]);
        let s = t["server"].as_table().unwrap();
        assert_eq!(s["max-body-size"].as_integer(), Some(8_388_608));
        assert_eq!(
            s["trusted-proxies"].as_array().unwrap(),
            &vec![
                toml::Value::from("10.0.0.1"),
                toml::Value::from("192.168.0.0/16")
            ]
        );
        assert_eq!(s["real-ip-header"].as_str(), Some("forwarded"));
        assert_eq!(
            s["listen-proxy-protocol"].as_array().unwrap(),
            &vec![
                toml::Value::from("0.0.0.0:8080"),
                toml::Value::from("0.0.0.0:9000")
            ]
        );
        // "all", unknown headers, 0 KiB, per-block values.
        let (t, r) = imp_toml(&format!(
            "{PROXY_HEAD}server.max-request-size = 0\n\
             extforward.forwarder = ( \"all\" => \"trust\" )\n\
             extforward.headers = ( \"X-Real-IP\", \"X-Forwarded-For\", \"Forwarded\" )\n\
             $HTTP[\"url\"] =^ \"/upload/\" {{ server.max-request-size = 102400 }}\n\
             $HTTP[\"remoteip\"] == \"10.0.0.0/8\" {{ extforward.forwarder = ( \"10.0.0.1\" => \"trust\" ) }}\n"
        ));
        let s = t["server"].as_table().unwrap();
        assert!(s.get("max-body-size").is_none());
        assert_eq!(
            s["trusted-proxies"].as_array().unwrap(),
            &vec![toml::Value::from("0.0.0.0/0"), toml::Value::from("::/0")]
        );
        assert_eq!(s["real-ip-header"].as_str(), Some("x-forwarded-for"));
        let outcome = |what: &str, msg: &str| {
            r.entries
                .iter()
                .find(|e| e.what == what && e.message.contains(msg))
                .map(|e| e.outcome)
        };
        use crate::Outcome::*;
        assert_eq!(
            outcome("server.max-request-size", "no limit"),
            Some(Approximated)
        );
        assert_eq!(
            outcome("server.max-request-size", "server-wide"),
            Some(Dropped)
        );
        assert_eq!(
            outcome("extforward.forwarder", "\"all\""),
            Some(Approximated)
        );
        assert_eq!(
            outcome("extforward.forwarder", "server-wide"),
            Some(Dropped)
        );
        assert_eq!(outcome("extforward.headers", "X-Real-IP"), Some(Dropped));
        assert_eq!(
            outcome("extforward.headers", "\"Forwarded\""),
            Some(Approximated)
        );
    }

    /// A `mimetype.assign` naming every common extension, with Tessera's types.
    fn full_mime_assign() -> String {
        let mut m = String::from("mimetype.assign = (\n");
        for e in crate::tessera::WEB_EXTENSIONS {
            m.push_str(&format!("  \".{e}\" => \"{}\",\n", builtin_mime(e)));
        }
        m.push_str(")\n");
        m
    }

    /// Issue 11 #8: the note about dot-files and symbolic links is not a
    /// warning (the values written are lighttpd's), so a clean import has none.
    #[test]
    fn clean_import_has_no_warnings() {
        let (t, r) = imp(&format!(
            "server.document-root = \"/\"\nserver.port = 8080\n{}",
            full_mime_assign()
        ));
        assert!(!r.has_warnings(), "{r}");
        assert!(t.contains("hidden-files = true"), "{t}");
        assert!(t.contains("follow-symlinks = \"always\""), "{t}");
        assert!(r.find("hidden-files = true").count() == 1, "{r}");
    }

    /// Issue 11 #7: the common extensions a `mimetype.assign` leaves out get
    /// lighttpd's type for them (its "" default, else
    /// application/octet-stream), and the report names them.
    #[test]
    fn partial_mimetype_assign_keeps_lighttpds_default() {
        // The default vhost's static-file mime-types for a mimetype.assign.
        let mimes = |assign: &str| {
            let (t, r) = imp(&format!(
                "server.document-root = \"/\"\nmimetype.assign = ( {assign} )\n"
            ));
            let v: toml::Table = toml::from_str(&t).unwrap();
            let m = v["vhost"][0]["static-file"]["mime-types"].clone();
            (m.as_table().unwrap().clone(), r)
        };
        let (m, r) = mimes(r#"".html" => "text/html", ".css" => "text/css""#);
        assert_eq!(
            m["json"].as_str(),
            Some("application/octet-stream"),
            "{m:?}"
        );
        assert_eq!(m["png"].as_str(), Some("application/octet-stream"), "{m:?}");
        assert_eq!(m["css"].as_str(), Some("text/css"), "{m:?}");
        let e: Vec<_> = r.find("which lighttpd sends for them").collect();
        assert_eq!(e.len(), 1, "{r}");
        assert!(
            e[0].message.contains(" json ") && !e[0].message.contains(" css "),
            "{r}"
        );
        assert_eq!(e[0].src.line, 2, "{r}");
        // With a "" default, that type.
        let (m, _) = mimes(r#"".html" => "text/html", "" => "text/plain""#);
        assert_eq!(m["json"].as_str(), Some("text/plain"), "{m:?}");
    }

    /// Issue 11 #3: what a `$SERVER["socket"]` block holds applies on that
    /// listener only: a host block becomes a vhost with `listen`, other
    /// options rules matching the socket (a wildcard one too).
    #[test]
    fn socket_blocks_apply_to_their_listener_only() {
        let (t, r) = imp(concat!(
            "server.document-root = \"/\"\n",
            "server.port = 8080\n",
            "server.modules = ( \"mod_setenv\" )\n",
            "$SERVER[\"socket\"] == \":8443\" {\n",
            "  setenv.add-response-header = ( \"X-Port\" => \"admin\" )\n",
            "  $HTTP[\"host\"] == \"admin.example\" {\n",
            "    server.document-root = \"/tmp\"\n",
            "  }\n",
            "}\n",
            "$SERVER[\"socket\"] != \":8443\" {\n",
            "  $HTTP[\"host\"] == \"other.example\" { server.document-root = \"/tmp\" }\n",
            "}\n",
        ));
        let v: toml::Table = toml::from_str(&t).unwrap();
        let vh = v["vhost"].as_array().unwrap();
        let admin = vh
            .iter()
            .find(|x| {
                x["server-names"]
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(|n| n.as_str())
                    == Some("admin.example")
            })
            .unwrap_or_else(|| panic!("{t}"));
        assert_eq!(
            admin["listen"].as_array().unwrap()[0].as_str(),
            Some("0.0.0.0:8443")
        );
        assert_eq!(admin["document-root"].as_str(), Some("/tmp"), "{t}");
        // In the default vhost the header is a rule on the wildcard socket.
        assert!(t.contains(r#"match = { socket = "0.0.0.0:8443" }"#), "{t}");
        assert!(!t.contains("server-names = [\"other.example\"]"), "{t}");
        assert!(
            r.find("other.example")
                .any(|e| e.outcome == crate::Outcome::Dropped),
            "{r}"
        );
    }

    /// lighttpd 1.4.65+ turns a `=~` into `==`, `=^` or `=$` only when the
    /// rest has no regex character, a leading `\.` excepted.
    #[test]
    fn regexes_simplified_as_lighttpd_does() {
        let s = |r: &str| simplified_regex(r).map(|(op, v)| (format!("{op:?}"), v));
        assert_eq!(s("^localhost$"), Some(("Eq".into(), "localhost".into())));
        assert_eq!(s("^/img/"), Some(("Prefix".into(), "/img/".into())));
        assert_eq!(s("\\.png$"), Some(("Suffix".into(), ".png".into())));
        assert_eq!(s("example$"), Some(("Suffix".into(), "example".into())));
        assert_eq!(s("^www\\.a\\.com$"), None);
        assert_eq!(s("^a.com$"), None);
        assert_eq!(s("^(www\\.)?a$"), None);
        assert_eq!(s("a"), None);
    }

    #[test]
    fn idle_timeouts_become_server_timeouts() {
        let (t, _) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.max-read-idle = 30\n",
            "server.max-write-idle = 120\n",
            "server.max-keep-alive-idle = 7\n",
        ));
        assert!(t.contains("client-header-timeout = 30"), "{t}");
        assert!(t.contains("send-timeout = 120"), "{t}");
        assert!(t.contains("keep-alive = 7"), "{t}");
    }

    #[test]
    fn captures_of_the_block_regex_are_kept() {
        let (t, r) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.modules = ( \"mod_redirect\" )\n",
            "$HTTP[\"host\"] =~ \"example\" {\n",
            "  $HTTP[\"url\"] =~ \"^/blog/([0-9]+)/\" {\n",
            "    url.redirect = ( \"^/blog/[0-9]+/(.*)$\" => \"/posts/%1/$1\" )\n",
            "  }\n",
            "}\n",
        ));
        // The block's own regex comes first in the match: its captures are %N.
        assert!(
            t.contains(r#"match = { path-regex = "^/blog/([0-9]+)/" }"#),
            "{t}"
        );
        assert!(t.contains(r#"target = "/posts/%1/$1""#), "{t}");
        assert!(t.contains(r#"server-names = ["~example"]"#), "{t}");
        assert!(!r.has_warnings() || r.find("%N").count() == 0);
    }

    #[test]
    fn else_chains_and_overlapping_blocks() {
        let (t, _) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.modules = ( \"mod_setenv\" )\n",
            "$HTTP[\"url\"] =^ \"/a/\" { setenv.add-response-header = ( \"X-A\" => \"1\" ) }\n",
            "else $HTTP[\"url\"] =^ \"/b/\" { setenv.add-response-header = ( \"X-B\" => \"1\" ) }\n",
            "else { setenv.add-response-header = ( \"X-Else\" => \"1\" ) }\n",
            "$HTTP[\"url\"] =$ \".png\" { setenv.add-response-header = ( \"X-Png\" => \"1\" ) }\n",
        ));
        // The last block first; each else branch excludes the earlier tests.
        let png = t.find(r#"match = { path-regex = '\.png$' }"#).unwrap();
        let b = t
            .find(
                r#"match = { all = [{ path-prefix = "/b/" }, { not = { path-prefix = "/a/" } }] }"#,
            )
            .unwrap();
        let els = t
            .find(r#"match = { all = [{ not = { path-prefix = "/a/" } }, { not = { path-prefix = "/b/" } }] }"#)
            .unwrap();
        let a = t.find(r#"match = { path-prefix = "/a/" }"#).unwrap();
        assert!(png < b && png < els && png < a, "{t}");
    }

    #[test]
    fn log_formats() {
        assert_eq!(
            log_format(DEFAULT_LOG_FORMAT).0,
            r#"%h %V %u %t "%r" %>s %B "%{Referer}i" "%{User-Agent}i""#
        );
        assert!(log_format(DEFAULT_LOG_FORMAT).1.is_empty());
        let (f, notes) = log_format("%{%s}t|%V|%r|%s|%b");
        assert_eq!(f, "%t|%V|%r|%>s|%B");
        assert_eq!(notes.len(), 1);
        let (f, notes) = log_format("%h %O %{X}o %X");
        assert_eq!(f, "%h %b - -");
        assert_eq!(notes.len(), 3);
        // Issue 11 #5: lighttpd's time, duration, socket and query directives.
        let (f, notes) = log_format(
            "%{ms}T %{msec}T %{us}T %T %{sec}t %{msec}t %{end:usec}t %{%d/%b/%Y:%H:%M:%S %z}t %{[%d/%b/%Y:%T %z]}t %A %p %{remote}p %q",
        );
        assert_eq!(
            f,
            "%{ms}T %{ms}T %{us}T %T %{sec}t %{msec}t %{usec}t %{%d/%b/%Y:%H:%M:%S %z}t %t %A %p %{remote}p %{raw}q"
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn remote_ip_regexes() {
        assert_eq!(
            remoteip_regex(r"^127\.0\.0\.1$|^::1$"),
            Some(vec!["127.0.0.1".to_owned(), "::1".to_owned()])
        );
        assert_eq!(
            remoteip_regex(r"^192\.168\."),
            Some(vec!["192.168.0.0/16".to_owned()])
        );
        assert_eq!(remoteip_regex(r"^10\.(1|2)\."), None);
    }

    #[test]
    fn literal_regexes() {
        assert_eq!(
            literal_regex(r"^www\.example\.com$"),
            Some((true, true, "www.example.com".into()))
        );
        assert_eq!(literal_regex(r"\.css$"), Some((false, true, ".css".into())));
        assert_eq!(literal_regex(r"^(www\.)?a$"), None);
        assert_eq!(literal_regex("abc"), None);
    }

    #[test]
    fn sockets() {
        assert_eq!(socket_addr(":8080", 80).as_deref(), Some("0.0.0.0:8080"));
        assert_eq!(socket_addr("[::]:80", 80).as_deref(), Some("[::]:80"));
        assert_eq!(
            socket_addr("127.0.0.1", 81).as_deref(),
            Some("127.0.0.1:81")
        );
        assert_eq!(
            socket_addr("localhost:81", 80).as_deref(),
            Some("127.0.0.1:81")
        );
        assert_eq!(socket_addr("/run/x.sock", 80), None);
    }
}
