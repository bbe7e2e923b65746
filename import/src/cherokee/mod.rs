//! Cherokee: parse the `key!path = value` tree ([`tree`]) and translate it into
//! the model.
//!
//! Virtual servers become vhosts, tried in Cherokee's order (highest number
//! first); a `match = wildcard` with domain `*` makes its vserver the default
//! vhost and every lower one unreachable. A vserver's rules, evaluated by
//! Cherokee from the highest priority down with "the first rule that sets a
//! property wins" and `final` (the default) stopping the evaluation, become
//! model blocks in ascending priority: a higher rule comes later and wins, and
//! a final rule resets what it does not set ([`crate::model`]).

mod backends;
pub mod tree;

use std::path::Path;

use crate::emit::{Listen, Output, VhostOut};
use crate::error::ImportError;
use crate::expire::parse_cherokee_time;
use crate::model::{resolve, Block, Cond, Opt, V};
use crate::report::{Report, Src};
use crate::tessera::{builtin_mime, normalize_mime, Tessera, MODULE_ORDER};
use crate::Options;
use tree::Node;

/// `Expires` for `expiration = epoch` (Cherokee's literal).
pub const EPOCH_EXPIRES: &str = "Tue, 01 Jan 1970 00:00:01 GMT";
/// `Expires` for `expiration = max` (Cherokee's literal).
pub const MAX_EXPIRES: &str = "Thu, 31 Dec 2037 23:55:55 GMT";
/// `max-age` for `expiration = max`.
pub const MAX_AGE: u64 = 315_360_000;

/// Build-time placeholders of the `*.conf.sample.pre` files, with the values
/// of Debian's Cherokee package.
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("%prefix%", "/usr"),
    ("%sysconfdir%", "/etc"),
    ("%localstatedir%", "/var"),
    ("%wwwroot%", "/var/www"),
    ("%cgiroot%", "/usr/lib/cgi-bin"),
    ("%datadir%", "/usr/share"),
    ("%docdir%", "/usr/share/doc/cherokee"),
    ("%libdir%", "/usr/lib"),
    ("%bindir%", "/usr/bin"),
    ("%sbindir%", "/usr/sbin"),
];

/// Compressible types written for Cherokee's encoders (Cherokee compresses
/// any type; these are Tessera's defaults).
const COMPRESS_TYPES: &[&str] = &[
    "text/",
    "application/javascript",
    "application/json",
    "application/xml",
    "image/svg+xml",
];

/// Imports the Cherokee configuration `path`.
///
/// # Errors
/// [`ImportError`] when the file cannot be read or parsed, or defines no
/// virtual server.
pub(crate) fn import(
    path: &Path,
    _opts: &Options,
    report: &mut Report,
) -> Result<Output, ImportError> {
    let t = tree::parse_file(path)?;
    translate(&t, &path.display().to_string(), report)
}

/// Imports Cherokee configuration text.
///
/// # Errors
/// As [`import`].
pub(crate) fn import_text(
    name: &str,
    text: &str,
    report: &mut Report,
) -> Result<Output, ImportError> {
    let t = tree::parse_text(name, text)?;
    translate(&t, name, report)
}

struct Tr<'a> {
    report: &'a mut Report,
    main: String,
    /// The `source!*` subtree (back ends of proxy and the gateway handlers).
    sources: Option<Node>,
    /// Sources a `proxy` handler uses (translated as upstream servers).
    used_sources: Vec<String>,
}

impl Tr<'_> {
    /// A path value with build placeholders replaced (reported).
    fn path(&mut self, v: &str, src: &Src, what: &str) -> String {
        let mut out = v.to_owned();
        for (p, r) in PLACEHOLDERS {
            if out.contains(p) {
                out = out.replace(p, r);
                self.report.approximated(
                    src,
                    what,
                    format!("the build placeholder {p} becomes {r} (Debian's values); change it if your build differs"),
                );
            }
        }
        if out.contains('%') && out.matches('%').count() >= 2 {
            self.report.approximated(
                src,
                what,
                format!("\"{out}\" still contains a % placeholder"),
            );
        }
        out
    }

    fn src_of(&self, n: &Node) -> Src {
        n.first_src()
            .cloned()
            .unwrap_or_else(|| Src::new(&self.main, 0))
    }

    /// A rule's `match` subtree into a condition.
    fn cond(&mut self, m: &Node, what: &str, binds: &[(u64, String)]) -> Cond {
        let src = self.src_of(m);
        let ty = m.value.as_ref().map(|(v, _)| v.as_str()).unwrap_or("");
        let esc = |s: &str| fancy_regex::escape(s).into_owned();
        let list = |s: &str| -> Vec<String> {
            s.split(',')
                .map(|x| x.trim().to_owned())
                .filter(|x| !x.is_empty())
                .collect()
        };
        match ty {
            "default" => Cond::True,
            "directory" => {
                let d = m.val("directory").unwrap_or("/").trim_end_matches('/');
                if d.is_empty() {
                    return Cond::True;
                }
                self.report.translated(&src, what, format!("match = {{ path-regex = \"^{}(/|$)\" }} (a directory and what is below it)", esc(d)));
                Cond::Match(V::tab1("path-regex", V::s(format!("^{}(/|$)", esc(d)))))
            }
            "extensions" => {
                let exts = list(m.val("extensions").unwrap_or(""));
                if exts.is_empty() {
                    return Cond::False;
                }
                self.report.translated(&src, what, "match = { path-regex = … } (the extension of any path segment, case-sensitive, as Cherokee)");
                let alts: Vec<String> = exts
                    .iter()
                    .map(|e| esc(e.trim_start_matches('.')))
                    .collect();
                Cond::Match(V::tab1(
                    "path-regex",
                    V::s(format!("\\.(?:{})(?:/|$)", alts.join("|"))),
                ))
            }
            "request" => {
                let r = m.val("request").unwrap_or("");
                if let Err(e) = fancy_regex::Regex::new(r) {
                    self.report.dropped(
                        &src,
                        what,
                        format!("invalid regular expression: {e}; the rule never applies"),
                    );
                    return Cond::False;
                }
                if r.contains("\\?") {
                    self.report.approximated(
                        &src,
                        what,
                        "Cherokee matches path?query; Tessera's path-regex sees the path only",
                    );
                } else {
                    self.report
                        .translated(&src, what, "match = { path-regex = … }");
                }
                Cond::Match(V::tab1("path-regex", V::s(r)))
            }
            "fullpath" => {
                let paths: Vec<String> = m
                    .child("fullpath")
                    .map(|f| {
                        let mut v: Vec<(u64, &Node)> = f.numbered();
                        v.reverse();
                        v.iter()
                            .filter_map(|(_, n)| n.value.as_ref().map(|(s, _)| s.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                if paths.is_empty() {
                    return Cond::False;
                }
                self.report.translated(
                    &src,
                    what,
                    "match = { path-regex = \"^(?:…)$\" } (these exact paths)",
                );
                let alts: Vec<String> = paths.iter().map(|p| esc(p)).collect();
                Cond::Match(V::tab1(
                    "path-regex",
                    V::s(format!("^(?:{})$", alts.join("|"))),
                ))
            }
            "header" => {
                let name = m.val("header").unwrap_or("");
                if m.flag("complete") == Some(true) {
                    self.report.dropped(
                        &src,
                        what,
                        "matching the whole header block is not supported; the rule never applies",
                    );
                    return Cond::False;
                }
                let kind = m.val("type").unwrap_or("regex");
                let mut t = vec![("name".to_owned(), V::s(name))];
                if kind != "provided" {
                    t.push(("regex".to_owned(), V::s(m.val("match").unwrap_or(""))));
                }
                self.report.translated(
                    &src,
                    what,
                    format!("match = {{ header = {{ name = \"{name}\", … }} }}"),
                );
                Cond::Match(V::tab1("header", V::Tab(t)))
            }
            "exists" => {
                if m.flag("match_any") == Some(true) {
                    self.report
                        .translated(&src, what, "match = { file-exists = true }");
                    return Cond::Match(V::tab1("file-exists", V::Bool(true)));
                }
                let files = list(m.val("exists").unwrap_or(""));
                if files.is_empty() {
                    return Cond::False;
                }
                self.report.approximated(&src, what, "an existing file among these names (Cherokee's iocache and index options are not kept)");
                let alts: Vec<String> = files
                    .iter()
                    .map(|f| esc(f.trim_start_matches('/')))
                    .collect();
                Cond::All(vec![
                    Cond::Match(V::tab1(
                        "path-regex",
                        V::s(format!("(?:^|/)(?:{})$", alts.join("|"))),
                    )),
                    Cond::Match(V::tab1("file-exists", V::Bool(true))),
                ])
            }
            "method" => {
                let meth = m.val("method").unwrap_or("").to_ascii_uppercase();
                self.report
                    .translated(&src, what, format!("match = {{ method = [\"{meth}\"] }}"));
                Cond::Match(V::tab1("method", V::strs([meth])))
            }
            "from" => {
                let l = list(m.val("from").unwrap_or(""));
                if l.is_empty() {
                    return Cond::False;
                }
                self.report
                    .translated(&src, what, "match = { client = [...] }");
                Cond::Match(V::tab1("client", V::strs(l)))
            }
            "bind" => {
                let ids: Vec<u64> = m
                    .child("bind")
                    .map(|b| {
                        b.numbered()
                            .iter()
                            .filter_map(|(_, n)| n.value.as_ref().and_then(|(v, _)| v.parse().ok()))
                            .collect()
                    })
                    .unwrap_or_default();
                let socks: Vec<&String> = binds
                    .iter()
                    .filter(|(id, _)| ids.contains(id))
                    .map(|(_, a)| a)
                    .collect();
                let specific: Vec<Cond> = socks
                    .iter()
                    .filter(|a| !a.starts_with("0.0.0.0:") && !a.starts_with("[::]:"))
                    .map(|a| Cond::Match(V::tab1("socket", V::s(a.as_str()))))
                    .collect();
                if socks.is_empty() {
                    return Cond::False;
                }
                if specific.len() == socks.len() {
                    self.report.translated(&src, what, "match = { socket = … }");
                    return if specific.len() == 1 {
                        specific.into_iter().next().unwrap_or(Cond::False)
                    } else {
                        Cond::Any(specific)
                    };
                }
                if socks.len() == binds.len() {
                    self.report
                        .translated(&src, what, "every listener: always true");
                    return Cond::True;
                }
                self.report.approximated(&src, what, "a wildcard listener cannot be told apart by Tessera's socket matcher; taken as true");
                Cond::True
            }
            "tls" => {
                self.report.approximated(
                    &src,
                    what,
                    "the imported listeners are plain HTTP: never true",
                );
                Cond::False
            }
            "url_arg" => {
                let re = m.val("match").unwrap_or("");
                let q = match m.val("arg") {
                    Some(a) => {
                        let body = re.trim_start_matches('^');
                        let (body, anchored) = match body.strip_suffix('$') {
                            Some(b) => (b, true),
                            None => (body, false),
                        };
                        format!(
                            "(?:^|&){}=(?:{body}){}",
                            esc(a),
                            if anchored { "(?:&|$)" } else { "" }
                        )
                    }
                    None => re.to_owned(),
                };
                self.report.approximated(
                    &src,
                    what,
                    format!("match = {{ query = \"{q}\" }} (on the raw query string)"),
                );
                Cond::Match(V::tab1("query", V::s(q)))
            }
            "and" | "or" => {
                let (Some(l), Some(r)) = (m.child("left"), m.child("right")) else {
                    self.report.dropped(
                        &src,
                        what,
                        format!("\"{ty}\" needs left and right; the rule never applies"),
                    );
                    return Cond::False;
                };
                let l = self.cond(l, what, binds);
                let r = self.cond(r, what, binds);
                if ty == "and" {
                    Cond::All(vec![l, r])
                } else {
                    Cond::Any(vec![l, r])
                }
            }
            "not" => {
                let Some(r) = m.child("right") else {
                    self.report
                        .dropped(&src, what, "\"not\" needs right; the rule never applies");
                    return Cond::False;
                };
                Cond::invert(self.cond(r, what, binds))
            }
            other => {
                self.report.dropped(
                    &src,
                    what,
                    format!("the rule type \"{other}\" is not supported; the rule never applies"),
                );
                Cond::False
            }
        }
    }
}

fn log_template(t: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut notes = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find(['$', '%']) {
        out.push_str(&rest[..i]);
        if rest[i..].starts_with('%') {
            out.push_str("%%");
            rest = &rest[i + 1..];
            continue;
        }
        if !rest[i..].starts_with("${") {
            out.push('$');
            rest = &rest[i + 1..];
            continue;
        }
        let Some(end) = rest[i..].find('}') else {
            out.push_str(&rest[i..]);
            rest = "";
            break;
        };
        let var = &rest[i + 2..i + end];
        let (d, note): (&str, Option<&str>) = match var {
            "ip_remote" => ("%h", None),
            "ip_local" => (
                "%A",
                Some("${ip_local} becomes %A (0.0.0.0 or :: for a listener on every address, where Cherokee logs \"-\")"),
            ),
            "protocol" => ("%H", None),
            "transport" => (
                "http",
                Some("${transport} is always http (plain HTTP listeners)"),
            ),
            "port_server" => ("%p", None),
            "query_string" => ("%{raw-or-dash}q", None),
            "request_first_line" => ("%r", None),
            "status" => ("%>s", None),
            // Cherokee writes the date without brackets, in local time
            // unless logger!utc_time.
            "now" => (
                "%{%d/%b/%Y:%H:%M:%S %z}t",
                Some("${now} is written in UTC (+0000)"),
            ),
            "time_secs" => ("%{sec}t", None),
            "time_msecs" => ("%{msec}t", None),
            "user_remote" => ("%u", None),
            "request" => ("%U", None),
            "request_original" => (
                "%U",
                Some("${request_original} becomes %U (the path after rewrites)"),
            ),
            "vserver_name" => ("%v", None),
            "vserver_name_req" => ("%{no-port}V", None),
            "response_size" => (
                "%b",
                Some("${response_size} becomes %b (body bytes, without headers)"),
            ),
            "http_host" => ("%{no-port}V", None),
            "http_referrer" => ("%{Referer}i", None),
            "http_user_agent" => ("%{User-Agent}i", None),
            "http_cookie" => ("%{Cookie}i", None),
            _ => ("-", None),
        };
        if d == "-" && note.is_none() {
            notes.push(format!("${{{var}}} is unknown and logs \"-\""));
        }
        if let Some(n) = note {
            notes.push(n.to_owned());
        }
        out.push_str(d);
        rest = &rest[i + end + 1..];
    }
    out.push_str(rest);
    (out, notes)
}

/// Upgrades of older configuration formats (`admin/config_version.py`):
/// `encoder!X = 1` means allow, `0` means not set.
fn encoder_state(v: &str) -> Option<bool> {
    match v.trim() {
        "allow" | "1" => Some(true),
        "forbid" | "deny" => Some(false),
        _ => None,
    }
}

/// Glob (`*`, `?`) to an anchored regex.
fn glob_regex(g: &str) -> String {
    let mut out = String::from("^");
    for c in g.chars() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            c => out.push_str(&fancy_regex::escape(&c.to_string())),
        }
    }
    out.push('$');
    out
}

struct VServer<'a> {
    num: u64,
    node: &'a Node,
    nick: String,
    names: Vec<String>,
    catch_all: bool,
}

fn translate(t: &Node, main: &str, report: &mut Report) -> Result<Output, ImportError> {
    let mut tr = Tr {
        report,
        main: main.to_owned(),
        sources: t.get("source").cloned(),
        used_sources: Vec::new(),
    };
    if let Some(s) = t.src("config!version") {
        let v = t.val("config!version").unwrap_or("");
        tr.report.not_needed(
            s,
            "config!version",
            format!("format {v}; older keys are upgraded as cherokee-admin does"),
        );
    }
    // Listeners.
    let mut listen: Vec<Listen> = Vec::new();
    let mut binds: Vec<(u64, String)> = Vec::new();
    if let Some(b) = t.get("server!bind") {
        let mut nums = b.numbered();
        nums.reverse();
        for (id, n) in nums {
            let src = tr.src_of(n);
            let port = n
                .val("port")
                .and_then(|p| p.parse::<u16>().ok())
                .unwrap_or(80);
            if n.flag("tls") == Some(true) {
                tr.report.dropped(
                    &src,
                    &format!("server!bind!{id}"),
                    format!("a TLS listener on port {port}: TLS is not imported"),
                );
                continue;
            }
            let ip = n.val("interface").unwrap_or("0.0.0.0");
            let addr = if ip.contains(':') && !ip.starts_with('[') {
                format!("[{ip}]:{port}")
            } else {
                format!("{ip}:{port}")
            };
            if addr.parse::<std::net::SocketAddr>().is_err() {
                tr.report.dropped(
                    &src,
                    &format!("server!bind!{id}"),
                    format!("\"{ip}\" is not an IP address"),
                );
                continue;
            }
            tr.report.translated(
                &src,
                &format!("server!bind!{id}"),
                format!("[server] listen \"{addr}\""),
            );
            binds.push((id, addr.clone()));
            if !listen.iter().any(|l| l.addr == addr) {
                listen.push(Listen { addr, src });
            }
        }
    }
    if let Some(p) = t.val("server!port") {
        let src = t
            .src("server!port")
            .cloned()
            .unwrap_or_else(|| Src::new(main, 0));
        if let Ok(port) = p.parse::<u16>() {
            let addr = format!("0.0.0.0:{port}");
            tr.report
                .translated(&src, "server!port", format!("[server] listen \"{addr}\""));
            binds.push((0, addr.clone()));
            listen.push(Listen { addr, src });
        }
    }
    if listen.is_empty() {
        listen.push(Listen {
            addr: "0.0.0.0:80".into(),
            src: Src::new(main, 0),
        });
        binds.push((0, "0.0.0.0:80".into()));
    }
    if t.val("server!ipv6") != Some("0") {
        tr.report.approximated(
            &t.src("server!ipv6").cloned().unwrap_or_else(|| Src::new(main, 1)),
            "server!ipv6",
            "Cherokee also listens on IPv6 by default; add \"[::]:PORT\" to [server] listen if you need it",
        );
    }
    let mut server: Vec<(String, V, Src)> = Vec::new();
    if let Some(s) = t.get("server") {
        for (path, v, src) in s.leaves() {
            let key = format!("server!{path}");
            if path.starts_with("bind") || path == "port" || path == "ipv6" {
                continue;
            }
            match path.as_str() {
                "keepalive" if v.trim() == "0" => {
                    tr.report.translated(src, &key, "[server] keep-alive = 0");
                    server.retain(|(k, _, _)| k != "keep-alive");
                    server.push(("keep-alive".into(), V::Int(0), src.clone()));
                }
                "timeout" => {
                    let n = v.trim().parse::<i64>().unwrap_or(15);
                    if t.val("server!keepalive").map(str::trim) != Some("0") {
                        tr.report.approximated(src, &key, "[server] keep-alive (Tessera's idle timeout of a kept-alive connection)");
                        server.push(("keep-alive".into(), V::Int(n), src.clone()));
                    }
                }
                "keepalive"
                | "user"
                | "group"
                | "pid_file"
                | "panic_action"
                | "fdlimit"
                | "thread_number"
                | "thread_policy"
                | "chunked_encoding"
                | "iocache"
                | "collector"
                | "post_track"
                | "server_tokens"
                | "keepalive_max_requests"
                | "listen_queue"
                | "sendfile_min"
                | "sendfile_max"
                | "max_fds"
                | "chroot"
                | "log_flush_lapse"
                | "nonces_cleanup_lapse"
                | "poll_method"
                | "max_connection_reuse" => {
                    tr.report.not_needed(
                        src,
                        &key,
                        "Tessera manages this itself (or the service manager does)",
                    );
                }
                _ if path.starts_with("iocache!")
                    || path.starts_with("tls!")
                    || path.starts_with("collector!") =>
                {
                    tr.report.not_needed(src, &key, "not needed by Tessera");
                }
                _ => tr.report.dropped(src, &key, "not supported"),
            }
        }
    }
    for top in ["icons", "admin"] {
        if let Some(n) = t.get(top) {
            let src = tr.src_of(n);
            match top {
                "icons" => tr.report.not_needed(
                    &src,
                    "icons!*",
                    "Tessera's directory listings have no icons",
                ),
                _ => tr
                    .report
                    .not_needed(&src, "admin!*", "cherokee-admin settings"),
            }
        }
    }
    // MIME types (global): static-file overrides and per-type max-age.
    let mut mime_over: Vec<(String, V)> = Vec::new();
    let mut mime_age: Vec<(String, V)> = Vec::new();
    let mut same = 0;
    let mut mime_src = None;
    if let Some(m) = t.get("mime") {
        // mime!TYPE!… where TYPE itself contains '/', stored as mime!text/css!…
        for (ty, n) in &m.children {
            let src = tr.src_of(n);
            mime_src.get_or_insert(src.clone());
            if let Some(exts) = n.val("extensions") {
                for e in exts.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                    let e = e.to_ascii_lowercase();
                    if !e
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_'))
                    {
                        tr.report.approximated(&src, &format!("mime!{ty}!extensions"), format!("\"{e}\" is not a plain extension: Tessera looks at the last extension only"));
                        continue;
                    }
                    if normalize_mime(&builtin_mime(&e)) == normalize_mime(ty) {
                        same += 1;
                    } else if !mime_over.iter().any(|(x, _)| *x == e) {
                        mime_over.push((e, V::s(ty.clone())));
                    }
                }
            }
            if let Some(age) = n.val("max-age") {
                if let Ok(s) = age.trim().parse::<u64>() {
                    mime_age.push((ty.clone(), V::s(format!("access plus {s} seconds"))));
                }
            }
        }
        mime_over.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(s) = &mime_src {
            tr.report.translated(s, "mime!*", format!("static-file mime-types: {} entries differ from Tessera's built-in types and are written, {same} are the same", mime_over.len()));
            if !mime_age.is_empty() {
                tr.report.translated(
                    s,
                    "mime!*!max-age",
                    "expires mime-types in each vhost (used when a rule sets no expiration)",
                );
            }
        }
    }
    // Virtual servers in Cherokee's order (highest number first).
    let Some(vs_root) = t.get("vserver") else {
        return Err(ImportError::Empty {
            file: main.to_owned(),
            message: "no vserver!N is defined".into(),
        });
    };
    let all = vs_root.numbered();
    if all.is_empty() {
        return Err(ImportError::Empty {
            file: main.to_owned(),
            message: "no vserver!N is defined".into(),
        });
    }
    let lowest = all.last().map(|(n, _)| *n).unwrap_or(1);
    let mut vservers: Vec<VServer<'_>> = Vec::new();
    let mut seen_names: Vec<String> = Vec::new();
    let mut catch_all_seen = false;
    for (num, n) in &all {
        let nick = n.val("nick").unwrap_or("").to_owned();
        let vsrc = tr.src_of(n);
        if catch_all_seen {
            tr.report.dropped(
                &vsrc,
                &format!("vserver!{num} (\"{nick}\")"),
                "unreachable: a higher-numbered vserver matches every host first",
            );
            continue;
        }
        let mut names = Vec::new();
        let mut catch_all = false;
        let mut push_name = |tr: &mut Tr<'_>, name: String, src: &Src, names: &mut Vec<String>| {
            if seen_names.contains(&name) {
                tr.report.approximated(
                    src,
                    &format!("vserver!{num}!match"),
                    format!("\"{name}\" is already claimed by a higher-numbered vserver"),
                );
            } else {
                seen_names.push(name.clone());
                names.push(name);
            }
        };
        fn collect(
            tr: &mut Tr<'_>,
            m: &Node,
            num: u64,
            out: &mut Vec<(String, Src)>,
            catch_all: &mut bool,
        ) {
            let ty = m.value.as_ref().map(|(v, _)| v.as_str()).unwrap_or("");
            let src = tr.src_of(m);
            match ty {
                "wildcard" => {
                    if let Some(d) = m.child("domain") {
                        let mut ds = d.numbered();
                        ds.reverse();
                        for (_, dn) in ds {
                            let Some((dom, dsrc)) = &dn.value else {
                                continue;
                            };
                            let dom = dom.trim().to_ascii_lowercase();
                            if dom == "*" {
                                *catch_all = true;
                            } else if dom.starts_with("*.") && !dom[2..].contains(['*', '?']) {
                                out.push((dom, dsrc.clone()));
                            } else if dom.contains(['*', '?']) {
                                out.push((format!("~{}", glob_regex(&dom)), dsrc.clone()));
                            } else {
                                out.push((dom, dsrc.clone()));
                            }
                        }
                    }
                }
                "rehost" => {
                    if let Some(r) = m.child("regex") {
                        let mut rs = r.numbered();
                        rs.reverse();
                        for (_, rn) in rs {
                            let Some((re, rsrc)) = &rn.value else {
                                continue;
                            };
                            if fancy_regex::Regex::new(re).is_err() {
                                tr.report.dropped(
                                    rsrc,
                                    &format!("vserver!{num}!match!regex"),
                                    format!("\"{re}\": invalid regular expression"),
                                );
                                continue;
                            }
                            out.push((format!("~{re}"), rsrc.clone()));
                        }
                    }
                }
                "or" => {
                    for side in ["left", "right"] {
                        if let Some(s) = m.child(side) {
                            collect(tr, s, num, out, catch_all);
                        }
                    }
                }
                "" => {}
                other => tr.report.dropped(
                    &src,
                    &format!("vserver!{num}!match"),
                    format!(
                        "\"{other}\" (by local address or other) cannot select a vhost in Tessera"
                    ),
                ),
            }
        }
        if let Some(m) = n.child("match") {
            let mut found = Vec::new();
            collect(&mut tr, m, *num, &mut found, &mut catch_all);
            for (name, src) in found {
                tr.report.translated(
                    &src,
                    &format!("vserver!{num}!match"),
                    format!("server-names \"{name}\""),
                );
                push_name(&mut tr, name, &src, &mut names);
            }
            if let Some(s) = m.src("nick") {
                tr.report.not_needed(
                    s,
                    &format!("vserver!{num}!match!nick"),
                    "Cherokee never reads it (nick matching is always on)",
                );
            }
        }
        // The nick also selects the vserver (after every match), when it looks
        // like a host name.
        if nick.contains('.') && !catch_all {
            let lower = nick.to_ascii_lowercase();
            if !seen_names.contains(&lower) {
                tr.report.translated(
                    &vsrc,
                    &format!("vserver!{num}!nick"),
                    format!(
                        "server-names \"{lower}\" (Cherokee matches the nick against the host)"
                    ),
                );
                seen_names.push(lower.clone());
                names.push(lower);
            }
        }
        if catch_all {
            catch_all_seen = true;
        }
        vservers.push(VServer {
            num: *num,
            node: n,
            nick,
            names,
            catch_all,
        });
    }
    let default_num = vservers
        .iter()
        .find(|v| v.catch_all)
        .map_or(lowest, |v| v.num);
    let mut out = Output {
        header: Vec::new(),
        listen,
        server,
        upstreams: Vec::new(),
        vhosts: Vec::new(),
    };
    // Cherokee writes Expires and `Cache-Control: max-age=N` first, then its
    // caching directives into the same line, then the header operations
    // (an `add` replaces a field): expires runs before headers, whose `add`
    // merges the directives into expires' line and whose `set` replaces it.
    let mut order: Vec<&'static str> = MODULE_ORDER.to_vec();
    if let (Some(h), Some(e)) = (
        order.iter().position(|m| *m == "headers"),
        order.iter().position(|m| *m == "expires"),
    ) {
        if h < e {
            order.swap(h, e);
        }
    }
    for vs in &vservers {
        let n = vs.node;
        let vsrc = tr.src_of(n);
        let label = format!("vserver!{} (\"{}\")", vs.num, vs.nick);
        let p = |k: &str| format!("vserver!{}!{k}", vs.num);
        let dsrc = Src::new("<cherokee default>", 0);
        let d = |module, key, val| Opt {
            module,
            key,
            val,
            src: dsrc.clone(),
        };
        let mut defaults = vec![
            d("static-file", "enabled", V::Bool(false)),
            d("static-file", "hidden-files", V::Bool(true)),
            d("static-file", "follow-symlinks", V::s("always")),
            d("dir-listing", "enabled", V::Bool(false)),
            d("dir-listing", "hidden-files", V::Bool(false)),
            d("dir-listing", "follow-symlinks", V::s("always")),
        ];
        if !mime_over.is_empty() {
            defaults.push(Opt {
                module: "static-file",
                key: "mime-types",
                val: V::Tab(mime_over.clone()),
                src: mime_src.clone().unwrap_or_else(|| dsrc.clone()),
            });
        }
        let mut vopts: Vec<Opt> = Vec::new();
        // Document root.
        let (root, root_src) = match (n.val("document_root"), n.src("document_root")) {
            (Some(r), Some(s)) => {
                let s = s.clone();
                let r = tr.path(r, &s, &p("document_root"));
                tr.report
                    .translated(&s, &p("document_root"), "document-root");
                (r, Some(s))
            }
            _ => {
                tr.report.approximated(
                    &vsrc,
                    &p("document_root"),
                    "not set; /var/www is written, change it",
                );
                ("/var/www".to_owned(), None)
            }
        };
        if !Path::new(&root).is_dir() {
            tr.report.approximated(
                root_src.as_ref().unwrap_or(&vsrc),
                &p("document_root"),
                format!("{root} does not exist on this machine: create it before starting Tessera"),
            );
        }
        // Index files.
        let mut index: Vec<String> = Vec::new();
        if let (Some(di), Some(s)) = (n.val("directory_index"), n.src("directory_index")) {
            let s = s.clone();
            for f in di.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                if f.contains('/') {
                    tr.report.approximated(
                        &s,
                        &p("directory_index"),
                        format!("\"{f}\" is a path, not a file name; left out"),
                    );
                } else {
                    index.push(f.to_owned());
                }
            }
            tr.report
                .translated(&s, &p("directory_index"), "static-file index-files");
            vopts.push(Opt {
                module: "static-file",
                key: "index-files",
                val: V::strs(index.clone()),
                src: s,
            });
        } else {
            defaults.push(d("static-file", "index-files", V::Arr(Vec::new())));
        }
        // Logger.
        if let Some(kind) = n.val("logger") {
            let s = n.src("logger").cloned().unwrap_or_else(|| vsrc.clone());
            let format = match kind {
                "combined" => {
                    tr.report.approximated(&s, &p("logger"), "access-log format \"combined\" (Cherokee logs the original request and counts header bytes)");
                    Some("combined".to_owned())
                }
                "ncsa" => {
                    tr.report.approximated(&s, &p("logger"), "access-log format \"common\" (Cherokee logs the original request and counts header bytes)");
                    Some("common".to_owned())
                }
                "custom" => {
                    let tpl = n.val("logger!access_template").unwrap_or("");
                    let (f, notes) = log_template(tpl);
                    if notes.is_empty() {
                        tr.report.translated(
                            &s,
                            &p("logger!access_template"),
                            format!("access-log format \"{f}\""),
                        );
                    } else {
                        tr.report.approximated(
                            &s,
                            &p("logger!access_template"),
                            format!("access-log format \"{f}\": {}", notes.join("; ")),
                        );
                    }
                    Some(f)
                }
                other => {
                    tr.report.dropped(
                        &s,
                        &p("logger"),
                        format!("the \"{other}\" logger is not supported"),
                    );
                    None
                }
            };
            let wtype = n.val("logger!access!type").unwrap_or("");
            let wsrc = n
                .src("logger!access!type")
                .cloned()
                .unwrap_or_else(|| s.clone());
            let path = match wtype {
                "file" => n
                    .val("logger!access!filename")
                    .map(|f| tr.path(f, &wsrc, &p("logger!access!filename"))),
                "stderr" => Some("/dev/stderr".to_owned()),
                other => {
                    tr.report.dropped(
                        &wsrc,
                        &p("logger!access!type"),
                        format!("\"{other}\" log writers are not supported: log to a file"),
                    );
                    None
                }
            };
            if let (Some(f), Some(path)) = (format, path) {
                tr.report.translated(
                    &wsrc,
                    &p("logger!access"),
                    format!("access-log path \"{path}\""),
                );
                if let Some(parent) = Path::new(&path).parent() {
                    if !parent.as_os_str().is_empty() && !parent.is_dir() {
                        tr.report.approximated(&wsrc, &p("logger!access!filename"), format!("{} does not exist on this machine: Tessera creates it when it starts (it needs the permission)", parent.display()));
                    }
                }
                vopts.push(Opt {
                    module: "access-log",
                    key: "path",
                    val: V::s(path),
                    src: wsrc.clone(),
                });
                vopts.push(Opt {
                    module: "access-log",
                    key: "format",
                    val: V::s(f),
                    src: s.clone(),
                });
            }
            for extra in [
                "logger!access!buffsize",
                "logger!access!bufsize",
                "logger!utc_time",
                "logger!x_real_ip_enabled",
                "logger!x_real_ip_access_all",
                "logger!x_real_ip_access",
            ] {
                if let Some(es) = n.src(extra) {
                    if extra.ends_with("buffsize") {
                        tr.report.not_needed(es, &p(extra), "a misspelling Cherokee ignores (bufsize); Tessera batches log lines itself");
                    } else if extra.ends_with("bufsize") {
                        tr.report
                            .not_needed(es, &p(extra), "Tessera batches log lines itself");
                    } else if extra.ends_with("utc_time") {
                        tr.report
                            .not_needed(es, &p(extra), "Tessera logs times in UTC");
                    } else if n.flag(extra) == Some(true) {
                        tr.report
                            .dropped(es, &p(extra), "X-Real-IP is not consulted");
                    } else {
                        tr.report.not_needed(es, &p(extra), "off");
                    }
                }
            }
        }
        for (k, why) in [
            ("error_writer", "Tessera logs diagnostics to stderr"),
            ("collector", "statistics collection is not supported"),
            (
                "collect_statistics",
                "statistics collection is not supported",
            ),
            ("keepalive", "see [server] keep-alive"),
        ] {
            if let Some(c) = n.child(k) {
                let s = tr.src_of(c);
                tr.report.not_needed(&s, &p(k), why);
            }
        }
        for (k, why) in [
            (
                "hsts",
                "HSTS only makes sense over TLS, which is not imported",
            ),
            ("ssl_certificate_file", "TLS is not imported"),
            ("ssl_certificate_key_file", "TLS is not imported"),
            ("user_dir", "user directories are not supported"),
            ("post_max_len", "Tessera serves static files only"),
            ("flcache", "the front-line cache is not supported"),
        ] {
            if let Some(c) = n.child(k) {
                let s = tr.src_of(c);
                tr.report.dropped(&s, &p(k), why);
            }
        }
        if let Some(ev) = n.child("evhost") {
            let s = tr.src_of(ev);
            match ev.val("tpl_document_root").map(backends::evhost_pattern) {
                Some(Ok(pat)) => {
                    tr.report.translated(&s, &p("evhost!tpl_document_root"), format!("mass-vhost path-pattern = \"{pat}\" (a host whose directory is missing gets the vserver's document root)"));
                    vopts.push(Opt {
                        module: "mass-vhost",
                        key: "path-pattern",
                        val: V::s(pat),
                        src: s.clone(),
                    });
                }
                Some(Err(bad)) => tr.report.dropped(&s, &p("evhost!tpl_document_root"), format!("{bad} has no mass-vhost equivalent (${{domain}}, ${{root_domain}}, ${{tld}}, ${{domain_no_tld}}, ${{subdomain1}} to ${{subdomain7}} have): every host gets the vserver's document root")),
                None => tr.report.dropped(&s, &p("evhost"), "no tpl_document_root: nothing to compute"),
            }
            for (k, c) in &ev.children {
                let cs = tr.src_of(c);
                match k.as_str() {
                    "tpl_document_root" => {}
                    "check_document_root" if ev.flag("check_document_root") != Some(false) => {
                        tr.report.translated(
                            &cs,
                            &p("evhost!check_document_root"),
                            "mass-vhost checks that the directory exists",
                        )
                    }
                    _ => tr.report.dropped(
                        &cs,
                        &p(&format!("evhost!{k}")),
                        "not supported by mass-vhost",
                    ),
                }
            }
        }
        // Error pages.
        if n.val("error_handler") == Some("error_redir") {
            let mut pages = Vec::new();
            if let Some(eh) = n.child("error_handler") {
                for (code, en) in &eh.children {
                    if let (Ok(c), Some(url)) = (code.parse::<u16>(), en.val("url")) {
                        let s = tr.src_of(en);
                        if url.contains("://") {
                            tr.report.dropped(
                                &s,
                                &p(&format!("error_handler!{code}")),
                                "an error page on another site is not supported",
                            );
                            continue;
                        }
                        tr.report.approximated(&s, &p(&format!("error_handler!{code}")), format!("error-pages pages.{c} = \"{}\" (the file is sent with the error status; Cherokee {} it)", url.trim_start_matches('/'), if en.flag("show") == Some(true) { "redirects to" } else { "serves" }));
                        pages.push((c.to_string(), V::s(url.trim_start_matches('/'))));
                    }
                }
            }
            if !pages.is_empty() {
                let s = n
                    .src("error_handler")
                    .cloned()
                    .unwrap_or_else(|| vsrc.clone());
                vopts.push(Opt {
                    module: "error-pages",
                    key: "pages",
                    val: V::Tab(pages),
                    src: s,
                });
            }
        } else if let Some(e) = n.val("error_handler") {
            let s = n
                .src("error_handler")
                .cloned()
                .unwrap_or_else(|| vsrc.clone());
            tr.report.dropped(
                &s,
                &p("error_handler"),
                format!("the \"{e}\" error handler is not supported"),
            );
        }
        if !mime_age.is_empty() {
            vopts.push(Opt {
                module: "expires",
                key: "mime-types",
                val: V::Tab(mime_age.clone()),
                src: mime_src.clone().unwrap_or_else(|| vsrc.clone()),
            });
        }
        let mut blocks = vec![
            Block {
                cond: Cond::True,
                opts: defaults,
                reset: false,
                base: true,
                label: "Cherokee's defaults".into(),
            },
            Block {
                cond: Cond::True,
                opts: vopts,
                reset: false,
                base: true,
                label: format!("{vsrc} {label}"),
            },
        ];
        // Rules, lowest priority first (the last block wins).
        let mut rules: Vec<(u64, &Node)> = n.get("rule").map(|r| r.numbered()).unwrap_or_default();
        rules.reverse();
        for (prio, r) in rules {
            let rp = |k: &str| {
                format!(
                    "vserver!{}!rule!{prio}{}{k}",
                    vs.num,
                    if k.is_empty() { "" } else { "!" }
                )
            };
            let rsrc = tr.src_of(r);
            if r.flag("disabled") == Some(true) {
                tr.report.not_needed(&rsrc, &rp(""), "disabled");
                continue;
            }
            let cond = match r.child("match") {
                Some(m) => {
                    let c = tr.cond(m, &rp("match"), &binds);
                    c.simplify(&|_| None)
                }
                None => {
                    tr.report
                        .dropped(&rsrc, &rp(""), "no match; the rule never applies");
                    Cond::False
                }
            };
            let is_final = r.flag("match!final").unwrap_or(true);
            let mut opts: Vec<Opt> = Vec::new();
            rule_options(&mut tr, r, &rp, &cond, &root, &mut opts);
            blocks.push(Block {
                cond,
                opts,
                reset: is_final,
                base: false,
                label: format!(
                    "{rsrc} {} (priority {prio}{})",
                    rp(""),
                    if is_final { ", final" } else { "" }
                ),
            });
        }
        let vname = vs.names.first().cloned().unwrap_or_else(|| vs.nick.clone());
        let resolved = resolve(&blocks, &order, &Tessera, &vname, tr.report);
        let mut comment = vec![format!("{label}, from {vsrc}.")];
        if vs.catch_all {
            comment.push("Its match covers every host (domain *): it is the default vhost.".into());
        }
        out.vhosts.push(VhostOut {
            comment,
            names: vs.names.clone(),
            default: vs.num == default_num,
            listen: Vec::new(),
            names_see_port: false,
            document_root: root,
            document_root_src: root_src,
            resolved,
        });
    }
    // Information sources: those of proxy handlers are upstream servers;
    // the others serve handlers Tessera does not have.
    if let Some(srcs) = t.get("source") {
        for (id, n) in srcs.numbered() {
            let src = tr.src_of(n);
            let what = format!("source!{id}");
            if tr.used_sources.contains(&id.to_string()) {
                tr.report.translated(
                    &src,
                    &what,
                    "a server of the [[upstream]] of the rules using it",
                );
            } else {
                let kind = n.val("type").unwrap_or("");
                tr.report.dropped(
                    &src,
                    &what,
                    format!("a back end ({kind}) no imported rule uses"),
                );
            }
        }
    }
    Ok(out)
}

/// Cherokee's `handler = proxy`: an upstream of its balancer's sources,
/// with the options of the handler; the report says what is not carried
/// over. `None` when no source can be used.
fn proxy_handler(
    tr: &mut Tr<'_>,
    node: &Node,
    what: &str,
    key: &str,
) -> Option<Vec<(&'static str, V)>> {
    let hsrc = tr.src_of(node);
    let backends::Balanced {
        servers, balance, ..
    } = backends::balanced(tr, node, what, false);
    if servers.is_empty() {
        tr.report.dropped(
            &hsrc,
            what,
            "a proxy without a usable source: these requests get 404",
        );
        return None;
    }
    let n = servers.len();
    tr.report.translated(
        &hsrc,
        what,
        format!(
            "proxy: an [[upstream]] with {n} server{} (balance \"{balance}\")",
            if n == 1 { "" } else { "s" }
        ),
    );
    let entry = V::Tab(vec![
        ("key".into(), V::s(key)),
        ("servers".into(), V::Arr(servers)),
        ("balance".into(), V::s(balance)),
    ]);
    let mut opts: Vec<(&'static str, V)> = vec![("server", V::Arr(vec![entry]))];
    // Cherokee sends the source's host as Host unless in_preserve_host.
    if node.flag("in_preserve_host") == Some(true) {
        tr.report.translated(
            &hsrc,
            &format!("{what}!in_preserve_host"),
            "proxy host = \"client\" (the default)",
        );
    } else {
        opts.push(("host", V::s("upstream")));
    }
    for (hk, hn) in &node.children {
        let hs = tr.src_of(hn);
        let w = format!("{what}!{hk}");
        match hk.as_str() {
            "balancer" | "in_preserve_host" => {}
            "in_allow_keepalive" => tr.report.not_needed(&hs, &w, "Tessera keeps connections to upstreams alive (upstream keepalive-timeout)"),
            "in_header_hide" => tr.report.dropped(&hs, &w, "Tessera's proxy cannot remove request headers before passing them on (hop-by-hop ones are always removed)"),
            "in_header_add" => tr.report.dropped(&hs, &w, "Tessera's proxy cannot add request headers"),
            "out_header_hide" => tr.report.dropped(&hs, &w, "not translated: remove these response headers with a headers table (remove = [...]) in this rule"),
            "out_header_add" => tr.report.dropped(&hs, &w, "not translated: add these response headers with a headers table in this rule"),
            "in_rewrite_request" => tr.report.dropped(&hs, &w, "regular-expression rewrites of the upstream request are not supported (map-path replaces a prefix only)"),
            "out_rewrite_request" => tr.report.dropped(&hs, &w, "rewrites of the upstream's response are not supported"),
            "out_preserve_server" => tr.report.dropped(&hs, &w, "the Server header is Tessera's"),
            "vary" | "out_flush" | "iocache" => tr.report.not_needed(&hs, &w, "Tessera streams upstream responses itself"),
            _ => tr.report.dropped(&hs, &w, "not supported by Tessera's proxy"),
        }
    }
    Some(opts)
}

/// A rule's properties into model options.
fn rule_options(
    tr: &mut Tr<'_>,
    r: &Node,
    rp: &dyn Fn(&str) -> String,
    cond: &Cond,
    vhost_root: &str,
    opts: &mut Vec<Opt>,
) {
    let push = |opts: &mut Vec<Opt>, module: &'static str, key: &'static str, val: V, src: &Src| {
        opts.push(Opt {
            module,
            key,
            val,
            src: src.clone(),
        });
    };
    for (k, node) in &r.children {
        let src = tr.src_of(node);
        let what = rp(k);
        match k.as_str() {
            "match" | "disabled" => {}
            "handler" => {
                let h = node.value.as_ref().map(|(v, _)| v.as_str()).unwrap_or("");
                let mut static_on = false;
                let mut list_on = false;
                let mut redirect: Vec<V> = Vec::new();
                let mut rewrite: Vec<V> = Vec::new();
                match h {
                    "file" => {
                        static_on = true;
                        tr.report
                            .translated(&src, &what, "static-file (no directory listing)");
                    }
                    "common" => {
                        static_on = true;
                        list_on = node.flag("allow_dirlist") != Some(false);
                        tr.report.translated(
                            &src,
                            &what,
                            if list_on {
                                "static-file, then dir-listing"
                            } else {
                                "static-file (allow_dirlist = 0: no listing)"
                            },
                        );
                    }
                    "dirlist" => {
                        list_on = true;
                        tr.report
                            .translated(&src, &what, "dir-listing (files are not served)");
                    }
                    "redir" => {
                        if let Some(url) = node.val("url") {
                            let prefix = match cond {
                                Cond::Match(V::Tab(t)) => t
                                    .iter()
                                    .find(|(k, _)| k == "path-regex")
                                    .and_then(|(_, v)| v.as_str())
                                    .and_then(|r| r.strip_suffix("(/|$)"))
                                    .map(str::to_owned),
                                _ => None,
                            };
                            let re = match prefix {
                                Some(p) => format!("{p}(.*)$"),
                                None => "^(.*)$".to_owned(),
                            };
                            redirect.push(V::Tab(vec![
                                ("regex".into(), V::s(re)),
                                (
                                    "target".into(),
                                    V::s(format!("{}$1", url.trim_end_matches('/'))),
                                ),
                            ]));
                        }
                        if let Some(rw) = node.child("rewrite") {
                            let mut items = rw.numbered();
                            items.reverse();
                            for (_, it) in items {
                                let re = it.val("regex").unwrap_or("");
                                let sub = it.val("substring").unwrap_or("");
                                let isrc = tr.src_of(it);
                                if sub.contains('^')
                                    && sub
                                        .chars()
                                        .zip(sub.chars().skip(1))
                                        .any(|(a, b)| a == '^' && b.is_ascii_digit())
                                    || sub.contains("${")
                                {
                                    tr.report.dropped(&isrc, &what, format!("\"{re}\" => \"{sub}\": ^N host captures and ${{host}} are not supported"));
                                    continue;
                                }
                                if fancy_regex::Regex::new(re).is_err() {
                                    tr.report.dropped(
                                        &isrc,
                                        &what,
                                        format!("\"{re}\": invalid regular expression"),
                                    );
                                    continue;
                                }
                                let mut t =
                                    vec![("regex".into(), V::s(re)), ("target".into(), V::s(sub))];
                                if crate::lighttpd::mentions_query(re) {
                                    t.push(("match-query".into(), V::Bool(true)));
                                }
                                let rule = V::Tab(t);
                                if it.flag("show") == Some(true) {
                                    redirect.push(rule);
                                } else if sub.starts_with('/') {
                                    rewrite.push(rule);
                                } else {
                                    tr.report.dropped(&isrc, &what, format!("\"{sub}\": an internal rewrite target must start with '/'"));
                                }
                            }
                        }
                        tr.report.translated(
                            &src,
                            &what,
                            "redirect (show = 1) and rewrite (show = 0) rules",
                        );
                        if matches!(cond, Cond::Match(V::Tab(t)) if t.iter().any(|(k, v)| k == "path-regex" && v.as_str().is_some_and(|r| r.ends_with("(/|$)"))))
                        {
                            tr.report.approximated(&src, &what, "Cherokee strips the rule's directory before matching; Tessera matches the whole path");
                        }
                    }
                    "custom_error" => {
                        let code = node.val("error").unwrap_or("");
                        if code == "403" {
                            push(
                                opts,
                                "access",
                                "rules",
                                V::Arr(vec![V::tab1("deny", V::s("all"))]),
                                &src,
                            );
                            tr.report.translated(
                                &src,
                                &what,
                                "access rules = [{ deny = \"all\" }] (403)",
                            );
                        } else {
                            tr.report.approximated(
                                &src,
                                &what,
                                format!("a fixed {code} is not supported: these requests get 404"),
                            );
                        }
                    }
                    "proxy" => {
                        let key = format!("rule{}", what.rsplit('!').nth(1).unwrap_or(""));
                        if let Some(p) = proxy_handler(tr, node, &what, &key) {
                            for (k, v) in p {
                                push(opts, "proxy", k, v, &src);
                            }
                        }
                    }
                    "fcgi" | "scgi" | "uwsgi" | "cgi" => {
                        let key = format!("rule{}", what.rsplit('!').nth(1).unwrap_or(""));
                        if let Some((m, p)) = backends::gateway_handler(tr, node, h, r, &what, &key)
                        {
                            for (k, v) in p {
                                push(opts, m, k, v, &src);
                            }
                        }
                    }
                    other => {
                        tr.report.dropped(
                            &src,
                            &what,
                            format!(
                                "the \"{other}\" handler is not supported: these requests get 404"
                            ),
                        );
                    }
                }
                push(opts, "static-file", "enabled", V::Bool(static_on), &src);
                push(opts, "dir-listing", "enabled", V::Bool(list_on), &src);
                push(opts, "redirect", "rules", V::Arr(redirect), &src);
                push(opts, "rewrite", "once", V::Arr(rewrite), &src);
                if list_on {
                    if let Some(h) = node.flag("hidden") {
                        push(opts, "dir-listing", "hidden-files", V::Bool(h), &src);
                    }
                }
                if node.flag("symlinks") == Some(false) {
                    tr.report.approximated(&src, &format!("{what}!symlinks"), "follow-symlinks = \"never\" (Tessera refuses a link anywhere in the path; Cherokee only checks the last one)");
                    push(opts, "static-file", "follow-symlinks", V::s("never"), &src);
                    push(opts, "dir-listing", "follow-symlinks", V::s("never"), &src);
                }
                for (hk, hn) in &node.children {
                    let hs = tr.src_of(hn);
                    match hk.as_str() {
                        "iocache" | "allow_dirlist" | "allow_pathinfo" | "hidden" | "symlinks"
                        | "rewrite" | "url" | "error" => {}
                        "notice_files" | "theme" | "icon_dir" | "size" | "date" | "user"
                        | "group" | "redir_symlinks" | "backup" | "hidden_files" => {
                            tr.report.not_needed(
                                &hs,
                                &format!("{what}!{hk}"),
                                "Tessera's listing has a fixed layout",
                            );
                        }
                        _ => {
                            if matches!(h, "file" | "common" | "dirlist" | "redir") {
                                tr.report
                                    .dropped(&hs, &format!("{what}!{hk}"), "not supported");
                            }
                        }
                    }
                }
            }
            "document_root" => {
                let v = node.value.as_ref().map(|(v, _)| v.as_str()).unwrap_or("");
                let v = tr.path(v, &src, &what);
                if v.trim_end_matches('/') == vhost_root.trim_end_matches('/') {
                    tr.report
                        .translated(&src, &what, "the vhost's document root");
                } else {
                    // Cherokee maps the path below a directory rule's prefix
                    // (the "web directory") onto the root; any other rule's
                    // whole path.
                    let prefix = match backends::mount(r) {
                        backends::Mount::Prefix(p) if r.val("match") == Some("directory") => {
                            format!("{p}/")
                        }
                        _ => "/".to_owned(),
                    };
                    let dir = format!("{}/", v.trim_end_matches('/'));
                    tr.report.translated(
                        &src,
                        &what,
                        format!("alias paths = {{ \"{prefix}\" = \"{dir}\" }} in this rule"),
                    );
                    push(
                        opts,
                        "alias",
                        "paths",
                        V::Tab(vec![(prefix, V::s(dir))]),
                        &src,
                    );
                }
            }
            "expiration" => {
                let kind = node.value.as_ref().map(|(v, _)| v.as_str()).unwrap_or("");
                let mut cc: Vec<String> = Vec::new();
                if let Some(c) = node.val("caching") {
                    if matches!(c, "public" | "private" | "no-cache") {
                        cc.push(c.to_owned());
                    }
                }
                for f in [
                    "no-store",
                    "no-transform",
                    "must-revalidate",
                    "proxy-revalidate",
                ] {
                    if node.flag(&format!("caching!{f}")) == Some(true) {
                        cc.push(f.to_owned());
                    }
                }
                let mut hdrs: Vec<(String, V)> = Vec::new();
                // Merged into the line expires writes (`max-age=N, public`).
                let mut adds: Vec<(String, V)> = Vec::new();
                match kind {
                    "none" => {
                        tr.report.translated(&src, &what, "no expiry headers");
                        push(opts, "expires", "url", V::Tab(Vec::new()), &src);
                    }
                    "epoch" => {
                        hdrs.push(("Expires".into(), V::s(EPOCH_EXPIRES)));
                        if !cc.is_empty() {
                            hdrs.push(("Cache-Control".into(), V::s(cc.join(", "))));
                        }
                        tr.report.translated(
                            &src,
                            &what,
                            format!(
                                "headers set Expires: {EPOCH_EXPIRES}{}",
                                if cc.is_empty() {
                                    String::new()
                                } else {
                                    format!(", Cache-Control: {}", cc.join(", "))
                                }
                            ),
                        );
                        push(opts, "expires", "url", V::Tab(Vec::new()), &src);
                    }
                    "max" => {
                        let mut c = vec![format!("max-age={MAX_AGE}")];
                        c.extend(cc.iter().cloned());
                        hdrs.push(("Expires".into(), V::s(MAX_EXPIRES)));
                        hdrs.push(("Cache-Control".into(), V::s(c.join(", "))));
                        tr.report.translated(
                            &src,
                            &what,
                            format!(
                                "headers set Expires: {MAX_EXPIRES}, Cache-Control: {}",
                                c.join(", ")
                            ),
                        );
                        push(opts, "expires", "url", V::Tab(Vec::new()), &src);
                    }
                    "time" => {
                        let t = node.val("time").unwrap_or("0");
                        match parse_cherokee_time(t) {
                            Ok(secs) => {
                                let e = crate::expire::Expire {
                                    base: crate::expire::Base::Access,
                                    seconds: secs,
                                    uses_years: false,
                                }
                                .to_tessera();
                                tr.report.translated(&src, &what, format!("expires url \"/\" = \"{e}\"{}", if cc.is_empty() { String::new() } else { format!(" with Cache-Control: max-age, {} (headers add, merged into the line expires writes, as Cherokee writes one line)", cc.join(", ")) }));
                                push(
                                    opts,
                                    "expires",
                                    "url",
                                    V::Tab(vec![("/".into(), V::s(e))]),
                                    &src,
                                );
                                if !cc.is_empty() {
                                    adds.push(("Cache-Control".into(), V::s(cc.join(", "))));
                                }
                            }
                            Err(e) => {
                                tr.report.dropped(&src, &what, e);
                                continue;
                            }
                        }
                    }
                    other => {
                        tr.report
                            .dropped(&src, &what, format!("unknown expiration \"{other}\""));
                        continue;
                    }
                }
                // Both keys together, so that a rule's expiration is one unit.
                push(opts, "headers", "expiration", V::Tab(hdrs), &src);
                push(opts, "headers", "expiration-add", V::Tab(adds), &src);
            }
            "header_op" => {
                let mut ops: Vec<(String, V)> = Vec::new();
                let mut items = node.numbered();
                items.reverse();
                for (_, it) in items {
                    let name = it.val("header").unwrap_or("").to_owned();
                    match it.val("type").unwrap_or("add") {
                        "add" => ops.push((name, V::s(it.val("value").unwrap_or("")))),
                        "del" => ops.push((name, V::s(""))),
                        other => {
                            tr.report
                                .dropped(&src, &what, format!("header operation \"{other}\""))
                        }
                    }
                }
                tr.report.translated(
                    &src,
                    &what,
                    "headers set / remove (Cherokee's add replaces the field)",
                );
                push(opts, "headers", "set", V::Tab(ops), &src);
            }
            "encoder" => {
                let gzip = node.val("gzip").and_then(encoder_state);
                let deflate = node.val("deflate").and_then(encoder_state);
                match (gzip, deflate) {
                    (None, None) => {}
                    (Some(false), Some(false)) | (Some(false), None) | (None, Some(false)) => {
                        tr.report.translated(&src, &what, "compress off");
                        push(opts, "compress", "enabled", V::Bool(false), &src);
                    }
                    (g, dfl) => {
                        if g != Some(true) && dfl == Some(true) {
                            tr.report.approximated(
                                &src,
                                &what,
                                "Tessera does not produce deflate: gzip is offered instead",
                            );
                        } else if dfl == Some(true) {
                            tr.report.approximated(
                                &src,
                                &what,
                                "compress encodings [\"gzip\"] (Tessera does not produce deflate)",
                            );
                        } else {
                            tr.report
                                .translated(&src, &what, "compress encodings [\"gzip\"]");
                        }
                        push(opts, "compress", "enabled", V::Bool(true), &src);
                        push(opts, "compress", "encodings", V::strs(["gzip"]), &src);
                        push(
                            opts,
                            "compress",
                            "mime-types",
                            V::strs(COMPRESS_TYPES.iter().copied()),
                            &src,
                        );
                    }
                }
            }
            "auth" => {
                let kind = node.value.as_ref().map(|(v, _)| v.as_str()).unwrap_or("");
                if !matches!(kind, "htpasswd" | "plain") {
                    tr.report.dropped(&src, &what, format!("the \"{kind}\" validator is not supported (htpasswd and plain are): these paths are NOT protected by the import"));
                    continue;
                }
                let methods = node.val("methods").unwrap_or("basic");
                if !methods.split(',').any(|m| m.trim() == "basic") {
                    tr.report
                        .approximated(&src, &what, "digest authentication becomes Basic");
                }
                let file = node
                    .val("passwdfile")
                    .map(|f| tr.path(f, &src, &what))
                    .unwrap_or_default();
                if !Path::new(&file).exists() {
                    tr.report.approximated(&src, &what, format!("{file} does not exist on this machine: create it before starting Tessera"));
                } else {
                    tr.report.translated(&src, &what, "auth-basic");
                }
                let users: Vec<String> = node
                    .val("users")
                    .map(|u| {
                        u.split(',')
                            .map(|x| x.trim().to_owned())
                            .filter(|x| !x.is_empty())
                            .collect()
                    })
                    .unwrap_or_default();
                let mut e = vec![("prefix".to_owned(), V::s(""))];
                if let Some(r) = node.val("realm") {
                    e.push(("realm".into(), V::s(r)));
                }
                e.push((
                    "require".into(),
                    if users.is_empty() {
                        V::s("valid-user")
                    } else {
                        V::strs(users)
                    },
                ));
                push(opts, "auth-basic", "backend", V::s(kind), &src);
                push(
                    opts,
                    "auth-basic",
                    if kind == "plain" {
                        "plain-file"
                    } else {
                        "user-file"
                    },
                    V::s(file),
                    &src,
                );
                push(
                    opts,
                    "auth-basic",
                    "require-list",
                    V::Arr(vec![V::Tab(e)]),
                    &src,
                );
            }
            "allow_from" => {
                let v = node.value.as_ref().map(|(v, _)| v.as_str()).unwrap_or("");
                let mut rules: Vec<V> = v
                    .split(',')
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(|a| V::tab1("allow", V::s(a)))
                    .collect();
                rules.push(V::tab1("deny", V::s("all")));
                tr.report
                    .translated(&src, &what, "access rules (allow these, deny the rest)");
                push(opts, "access", "rules", V::Arr(rules), &src);
            }
            "no_log" => {
                if node.flag("").unwrap_or(false)
                    || node.value.as_ref().is_some_and(|(v, _)| v.trim() != "0")
                {
                    tr.report
                        .translated(&src, &what, "access-log off for these requests");
                    push(opts, "access-log", "path", V::s(""), &src);
                }
            }
            "only_secure" => tr.report.dropped(&src, &what, "TLS is not imported"),
            "rate" => tr
                .report
                .dropped(&src, &what, "bandwidth limits are not supported"),
            "timeout" => tr
                .report
                .dropped(&src, &what, "per-rule timeouts are not supported"),
            "flcache" => tr
                .report
                .dropped(&src, &what, "the front-line cache is not supported"),
            other => tr.report.dropped(
                &src,
                &what,
                format!("unknown rule property \"{other}\" (Cherokee refuses it)"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates() {
        let (f, notes) = log_template("${ip_remote} - ${user_remote} [${now}] \"${request_first_line}\" ${status} ${response_size} \"${http_referrer}\" 100%");
        // Issue 11 #5: [${now}] has one pair of brackets.
        assert_eq!(
            f,
            "%h - %u [%{%d/%b/%Y:%H:%M:%S %z}t] \"%r\" %>s %b \"%{Referer}i\" 100%%"
        );
        assert_eq!(notes.len(), 2);
        // ${time_msecs} is milliseconds since the epoch, not a date; the
        // socket, query and host variables have directives of their own.
        let (f, notes) = log_template(
            "${time_secs} ${time_msecs} ${port_server} ${query_string} ${http_host} ${vserver_name_req}",
        );
        assert_eq!(
            f,
            "%{sec}t %{msec}t %p %{raw-or-dash}q %{no-port}V %{no-port}V"
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    fn imp(text: &str) -> (String, Report) {
        let mut r = Report::default();
        let out = import_text("c.conf", text, &mut r).unwrap();
        (crate::emit::write(&out), r)
    }

    #[test]
    fn proxy_handler_balancers_and_sources() {
        let text = concat!(
            "vserver!1!nick = default\n",
            "vserver!1!document_root = /srv\n",
            "vserver!1!rule!1!match = default\n",
            "vserver!1!rule!1!handler = file\n",
            "vserver!1!rule!100!match = directory\n",
            "vserver!1!rule!100!match!directory = /app\n",
            "vserver!1!rule!100!handler = proxy\n",
            "vserver!1!rule!100!handler!balancer = ip_hash\n",
            "vserver!1!rule!100!handler!balancer!source!1 = 1\n",
            "vserver!1!rule!100!handler!balancer!source!2 = 2\n",
            "vserver!1!rule!100!handler!in_allow_keepalive = 1\n",
            "vserver!1!rule!100!handler!in_header_hide!1 = X-Secret\n",
            "vserver!1!rule!200!match = extensions\n",
            "vserver!1!rule!200!match!extensions = php\n",
            "vserver!1!rule!200!handler = proxy\n",
            "vserver!1!rule!200!handler!balancer = failover\n",
            "vserver!1!rule!200!handler!balancer!source!1 = 3\n",
            "vserver!1!rule!200!handler!in_preserve_host = 1\n",
            "vserver!1!rule!300!match = fullpath\n",
            "vserver!1!rule!300!match!fullpath!1 = /rr\n",
            "vserver!1!rule!300!handler = proxy\n",
            "vserver!1!rule!300!handler!balancer = round_robin\n",
            "vserver!1!rule!300!handler!balancer!source!1 = 1\n",
            "vserver!1!rule!300!handler!balancer!source!2 = 2\n",
            "source!1!type = host\n",
            "source!1!host = 127.0.0.1:8081\n",
            "source!2!type = host\n",
            "source!2!host = localhost:8082\n",
            "source!3!type = interpreter\n",
            "source!3!host = /run/php.sock\n",
            "source!3!interpreter = php-cgi -b /run/php.sock\n",
            "source!4!type = interpreter\n",
            "source!4!host = 127.0.0.1:9000\n",
        );
        let out = crate::import_text(
            crate::Source::Cherokee,
            "c.conf",
            text,
            Path::new("/nonexistent"),
            &Options::default(),
        )
        .unwrap();
        let t: toml::Table = toml::from_str(&out.toml).unwrap();
        let ups = t["upstream"].as_array().unwrap();
        let up = |name: &str| {
            ups.iter()
                .find(|u| u["name"].as_str() == Some(name))
                .unwrap_or_else(|| panic!("{name}: {}", out.toml))
        };
        assert_eq!(up("default-rule100")["balance"].as_str(), Some("ip-hash"));
        assert_eq!(
            up("default-rule100")["servers"].as_array().unwrap(),
            &vec![
                toml::Value::from("127.0.0.1:8081"),
                toml::Value::from("localhost:8082")
            ]
        );
        assert_eq!(
            up("default-rule200")["servers"][0].as_str(),
            Some("unix:/run/php.sock")
        );
        // Same sources, another balancer: another upstream.
        assert_eq!(
            up("default-rule300")["balance"].as_str(),
            Some("round-robin")
        );
        assert_eq!(ups.len(), 3);
        let rules = t["vhost"][0]["rule"].as_array().unwrap();
        let proxy = |i: usize| rules[i]["proxy"].as_table().unwrap();
        // Highest priority first.
        assert_eq!(proxy(0)["upstream"].as_str(), Some("default-rule300"));
        assert_eq!(proxy(1)["upstream"].as_str(), Some("default-rule200"));
        assert!(
            proxy(1).get("host").is_none(),
            "in_preserve_host: the client's Host"
        );
        assert_eq!(proxy(2)["upstream"].as_str(), Some("default-rule100"));
        assert_eq!(proxy(2)["host"].as_str(), Some("upstream"));
        let r = &out.report;
        use crate::Outcome::*;
        let outcome = |what: &str| r.entries.iter().find(|e| e.what == what).map(|e| e.outcome);
        assert_eq!(outcome("vserver!1!rule!100!handler"), Some(Translated));
        assert_eq!(
            outcome("vserver!1!rule!100!handler!in_header_hide"),
            Some(Dropped)
        );
        assert_eq!(
            outcome("vserver!1!rule!100!handler!in_allow_keepalive"),
            Some(NotNeeded)
        );
        assert_eq!(outcome("source!1"), Some(Translated));
        assert_eq!(outcome("source!3"), Some(Approximated));
        assert_eq!(outcome("source!4"), Some(Dropped));
    }

    #[test]
    fn priorities_and_final() {
        // Written in file order 1, 20, 10; evaluated 20, 10, 1.
        let (toml, _) = imp(concat!(
            "vserver!1!nick = default\n",
            "vserver!1!document_root = /srv\n",
            "vserver!1!rule!1!match = default\n",
            "vserver!1!rule!1!handler = common\n",
            "vserver!1!rule!20!match = directory\n",
            "vserver!1!rule!20!match!directory = /a/b\n",
            "vserver!1!rule!20!handler = file\n",
            "vserver!1!rule!20!header_op!1!type = add\n",
            "vserver!1!rule!20!header_op!1!header = X-B\n",
            "vserver!1!rule!20!header_op!1!value = b\n",
            "vserver!1!rule!10!match = directory\n",
            "vserver!1!rule!10!match!directory = /a\n",
            "vserver!1!rule!10!match!final = 0\n",
            "vserver!1!rule!10!expiration = time\n",
            "vserver!1!rule!10!expiration!time = 1h\n",
        ));
        let b = toml
            .find(r#"match = { path-regex = "^/a/b(/|$)" }"#)
            .unwrap();
        let a = toml.find(r#"match = { path-regex = "^/a(/|$)" }"#).unwrap();
        assert!(b < a, "{toml}");
        // Rule 20 is final: /a/b gets no expiry from rule 10 (an empty table
        // switches expires off there), and rule 10 (not final) adds its
        // expiry to what the default rule serves.
        let b_rule = &toml[b..a];
        assert!(b_rule.contains("[vhost.rule.expires]\n"), "{toml}");
        assert!(!b_rule.contains("access plus 1 hours"), "{toml}");
        assert!(b_rule.contains("X-B = \"b\""), "{toml}");
        assert!(
            toml[a..].contains("url = { \"/\" = \"access plus 1 hours\" }"),
            "{toml}"
        );
        // The default rule lists directories, except where rule 20 serves files.
        assert!(
            toml.contains(r#"match = { not = { path-regex = "^/a/b(/|$)" } }"#),
            "{toml}"
        );
    }

    #[test]
    fn expiration_forms() {
        let base = "vserver!1!nick = default\nvserver!1!document_root = /srv\nvserver!1!rule!1!match = default\nvserver!1!rule!1!handler = file\n";
        let (t, _) = imp(&format!("{base}vserver!1!rule!1!expiration = max\n"));
        assert!(
            t.contains(MAX_EXPIRES) && t.contains("max-age=315360000"),
            "{t}"
        );
        let (t, _) = imp(&format!("{base}vserver!1!rule!1!expiration = epoch\nvserver!1!rule!1!expiration!caching = no-cache\n"));
        assert!(
            t.contains(EPOCH_EXPIRES) && t.contains("Cache-Control = \"no-cache\""),
            "{t}"
        );
        let (t, _) = imp(&format!(
            "{base}vserver!1!rule!1!expiration = time\nvserver!1!rule!1!expiration!time = 30m\n"
        ));
        assert!(t.contains("\"access plus 30 minutes\""), "{t}");
    }

    #[test]
    fn vserver_matching() {
        let (t, r) = imp(concat!(
            "vserver!1!nick = default\nvserver!1!document_root = /srv/a\n",
            "vserver!1!rule!1!match = default\nvserver!1!rule!1!handler = file\n",
            "vserver!5!nick = www.example.org\nvserver!5!document_root = /srv/b\n",
            "vserver!5!match = wildcard\nvserver!5!match!domain!1 = *.example.org\n",
            "vserver!5!match!domain!2 = example.*\n",
            "vserver!5!rule!1!match = default\nvserver!5!rule!1!handler = file\n",
        ));
        assert!(
            t.contains(r#"server-names = ["*.example.org", '~^example\..*$', "www.example.org"]"#),
            "{t}"
        );
        assert!(
            t.contains("default = true\ndocument-root = \"/srv/a\""),
            "{t}"
        );
        assert!(r.summary().contains("translated"));
    }

    #[test]
    fn globs() {
        assert_eq!(glob_regex("www.*.org"), "^www\\..*\\.org$");
        assert_eq!(encoder_state("1"), Some(true));
        assert_eq!(encoder_state("0"), None);
        assert_eq!(encoder_state("forbid"), Some(false));
    }
}
