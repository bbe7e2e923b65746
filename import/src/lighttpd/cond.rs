//! lighttpd's conditionals: each `$HTTP[…]`, `$SERVER[…]` or `$REQUEST_HEADER[…]`
//! test as a [`Cond`] (host tests as [`HostTest`]s, regexes simplified as
//! lighttpd 1.4.65+ does, client-address regexes as CIDR ranges), and the
//! full condition of a context: its own test, the negated tests of the
//! earlier blocks of its `else` chain, then its enclosing context's.

use super::extforward::parse_net;
use super::listen::socket_addr;
use super::value::{CondOp, RawCond};
use super::Tr;
use crate::model::{Cond, HostTest, V};
use crate::report::Report;

pub(super) fn regex_ok(r: &str) -> Result<(), String> {
    fancy_regex::Regex::new(r)
        .map(|_| ())
        .map_err(|e| e.to_string().replace('\n', " "))
}

/// Whether `r` compiles; when it does not, the condition is reported as
/// dropped under `what` (its block never applies) and false comes back.
fn regex_usable(r: &str, report: &mut Report, src: &crate::report::Src, what: &str) -> bool {
    match regex_ok(r) {
        Ok(()) => true,
        Err(e) => {
            report.dropped(
                src,
                what,
                format!("invalid regular expression ({e}); the block never applies"),
            );
            false
        }
    }
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
/// configurations (`^127\.0\.0\.1$|^::1$`, `^192\.168\.`, and the grouped
/// `^(127\.0\.0\.1|10\.0\.0\.5)$`), into addresses and CIDR ranges; `None`
/// when it is anything else.
fn remoteip_regex(r: &str) -> Option<Vec<String>> {
    // `^(a|b)$` is `^a$|^b$`, `^(a|b)` is `^a|^b` (one group, nothing nested)
    let grouped = r.strip_prefix("^(").and_then(|rest| {
        let (inner, end) = match rest.strip_suffix(")$") {
            Some(i) => (i, "$"),
            None => (rest.strip_suffix(')')?, ""),
        };
        (!inner.contains(['(', ')'])).then(|| {
            inner
                .split('|')
                .map(|a| format!("^{a}{end}"))
                .collect::<Vec<_>>()
                .join("|")
        })
    });
    let r = grouped.as_deref().unwrap_or(r);
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

impl Tr<'_> {
    /// The condition of a raw test, reported once.
    fn raw_cond(&mut self, rc: &RawCond, report: &mut Report) -> Cond {
        let key = (rc.src.clone(), rc.show());
        if let Some(c) = self.cond_cache.get(&key) {
            return c.clone();
        }
        let c = self.translate_cond(rc, report);
        // a test reported dropped: decided by what it could not be (the
        // whole report is searched: an identical entry is not repeated)
        if report
            .entries
            .iter()
            .any(|e| e.outcome == crate::Outcome::Dropped && e.src == rc.src && e.what == key.1)
        {
            self.unimported.insert(key.clone());
        }
        self.cond_cache.insert(key, c.clone());
        c
    }

    /// Where the test that keeps context `i` (or an enclosing one) from
    /// ever applying was written, when one of them could not be imported.
    pub(super) fn unimported_test(&self, i: usize) -> Option<crate::report::Src> {
        let mut at = Some(i);
        while let Some(j) = at {
            let ctx = self.ctx(j);
            if let Some(rc) = &ctx.cond {
                if self.unimported.contains(&(rc.src.clone(), rc.show())) {
                    return Some(rc.src.clone());
                }
            }
            at = ctx.parent;
        }
        None
    }

    fn translate_cond(&mut self, rc: &RawCond, report: &mut Report) -> Cond {
        let what = rc.show();
        let neg = matches!(rc.op, CondOp::Ne | CondOp::NotRe);
        let wrap = |c: Cond| if neg { Cond::invert(c) } else { c };
        let v = rc.value.as_str();
        match (rc.field.as_str(), rc.key.to_ascii_lowercase().as_str()) {
            ("HTTP", "host") => {
                // no host at all (HTTP/1.0 without Host): no vhost has that
                // name, so the test is checked per request
                let empty = match rc.op {
                    CondOp::Eq | CondOp::Ne => v.is_empty(),
                    CondOp::Re => {
                        simplified_regex(v).is_some_and(|(op, l)| op == CondOp::Eq && l.is_empty())
                    }
                    _ => false,
                };
                if empty {
                    report.translated(
                        &rc.src,
                        &what,
                        "rule match = { host = \"^$\" } (a request without a host)",
                    );
                    return wrap(Cond::Match(V::tab1("host", V::s("^$"))));
                }
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
                                if !regex_usable(v, report, &rc.src, &what) {
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
                        if !regex_usable(v, report, &rc.src, &what) {
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
                        if !regex_usable(v, report, &rc.src, &what) {
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
                    // any other test: on the address's text, as lighttpd
                    // makes it (`^10\.0\.0\.[5-9]$`, `=^ "10.0."`)
                    _ => {
                        let r = match rc.op {
                            CondOp::Eq | CondOp::Ne => format!("^{}$", fancy_regex::escape(v)),
                            CondOp::Prefix => format!("^{}", fancy_regex::escape(v)),
                            CondOp::Suffix => format!("{}$", fancy_regex::escape(v)),
                            CondOp::Re | CondOp::NotRe => {
                                if !regex_usable(v, report, &rc.src, &what) {
                                    return Cond::False;
                                }
                                v.to_owned()
                            }
                        };
                        report.translated(
                            &rc.src,
                            &what,
                            format!("rule match = {{ client-regex = {r:?} }} (the address as text, as lighttpd tests it)"),
                        );
                        wrap(Cond::Match(V::tab1("client-regex", V::s(r))))
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
                // (a restriction in its block is reported lifted: translate)
                report.dropped(
                    &rc.src,
                    &what,
                    "this condition is not supported; the block never applies",
                );
                Cond::False
            }
        }
    }

    /// The full condition of context `i`: own test, negated else-chain
    /// predecessors, then the enclosing context's condition.
    pub(super) fn cond_of(&mut self, i: usize, report: &mut Report) -> Cond {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lighttpd::test_util::*;

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
        // the grouped form, common in real configurations
        assert_eq!(
            remoteip_regex(r"^(127\.0\.0\.1|10\.0\.0\.5)$"),
            Some(vec!["127.0.0.1".to_owned(), "10.0.0.5".to_owned()])
        );
        assert_eq!(
            remoteip_regex(r"^(10\.|192\.168\.)"),
            Some(vec!["10.0.0.0/8".to_owned(), "192.168.0.0/16".to_owned()])
        );
        assert_eq!(remoteip_regex(r"^(10\.(1|2)\.)$"), None);
    }

    /// A test for no host at all is a `host` match on the empty host, not a
    /// vhost named `""` (which `-t` refuses).
    #[test]
    fn an_empty_host_test_is_a_host_match() {
        let (t, _) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.modules = ( \"mod_access\" )\n",
            "$HTTP[\"host\"] == \"\" { url.access-deny = ( \".a\" ) }\n",
            "$HTTP[\"host\"] =~ \"^$\" { url.access-deny = ( \".b\" ) }\n",
        ));
        assert!(!t.contains("server-names = [\"\"]"), "{t}");
        assert_eq!(t.matches("host = \"^$\"").count(), 2, "{t}");
    }

    /// A remoteip test that is no list of ranges tests the address's text,
    /// as lighttpd does, instead of being dropped.
    #[test]
    fn other_remote_ip_tests_match_the_address_text() {
        let (t, r) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.modules = ( \"mod_access\" )\n",
            "$HTTP[\"remoteip\"] =~ \"^10\\.0\\.0\\.[5-9]$\" { url.access-deny = ( \".a\" ) }\n",
            "$HTTP[\"remoteip\"] !~ \"^10\\.(1|2)\\.\" { url.access-deny = ( \".b\" ) }\n",
            "$HTTP[\"remoteip\"] =^ \"10.0.\" { url.access-deny = ( \".c\" ) }\n",
        ));
        assert!(t.contains(r#"client-regex = '^10\.0\.0\.[5-9]$'"#), "{t}");
        assert!(
            t.contains(r#"not = { client-regex = '^10\.(1|2)\.' }"#),
            "{t}"
        );
        assert!(t.contains(r#"client-regex = '^10\.0\.'"#), "{t}");
        assert!(!r.entries.iter().any(|e| e.is_weaker()), "{r}");
    }

    /// A restriction under a test that cannot be imported (negated or not,
    /// in the block or an enclosing one) is reported as lifted, `WEAKER`;
    /// other settings under such a test are not.
    #[test]
    fn a_restriction_under_a_test_not_imported_is_reported_lifted() {
        let (_, r) = imp(concat!(
            "server.document-root = \"/srv\"\n",
            "server.modules = ( \"mod_access\", \"mod_auth\", \"mod_setenv\" )\n",
            "$HTTP[\"remoteip\"] !~ \"^10\\.\\Z\" { url.access-deny = ( \"\" ) }\n",
            "$SERVER[\"socket\"] =~ \":8080$\" { url.access-deny = ( \"\" ) }\n",
            "$HTTP[\"url\"] !~ \"^/public/\\Z\" {\n",
            "  $HTTP[\"url\"] =^ \"/admin/\" { auth.require = ( \"\" => ( \"method\" => \"basic\", \"realm\" => \"x\", \"require\" => \"valid-user\" ) ) }\n",
            "}\n",
            "$SERVER[\"socket\"] =~ \":8081$\" { setenv.add-response-header = ( \"X-A\" => \"1\" ) }\n",
        ));
        let weaker: Vec<_> = r.entries.iter().filter(|e| e.is_weaker()).collect();
        assert_eq!(weaker.len(), 3, "{r}");
        assert!(weaker.iter().any(|e| e.what == "auth.require"), "{r}");
        assert!(
            weaker
                .iter()
                .all(|e| e.message.contains("restriction is lifted")),
            "{r}"
        );
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
}
