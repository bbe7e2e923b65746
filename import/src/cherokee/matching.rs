//! Rule matching: a rule's `match` subtree (directory, extensions, request
//! and header regexes, addresses, binds, `and`/`or`/`not`, …) as a [`Cond`],
//! and the globs of vserver `wildcard` matches as regexes.

use super::tree::Node;
use super::Tr;
use crate::model::{Cond, V};

impl Tr<'_> {
    /// A rule's `match` subtree into a condition.
    pub(super) fn cond(&mut self, m: &Node, what: &str, binds: &[(u64, String)]) -> Cond {
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

/// Glob (`*`, `?`) to an anchored regex.
pub(super) fn glob_regex(g: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cherokee::rules::encoder_state;

    #[test]
    fn globs() {
        assert_eq!(glob_regex("www.*.org"), "^www\\..*\\.org$");
        assert_eq!(encoder_state("1"), Some(true));
        assert_eq!(encoder_state("0"), None);
        assert_eq!(encoder_state("forbid"), Some(false));
    }
}
