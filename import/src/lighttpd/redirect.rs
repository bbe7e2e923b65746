//! mod_redirect and mod_rewrite: `url.redirect`, `url.redirect-code` and the
//! `url.rewrite*` options as redirect and rewrite rules (`%N` only for the
//! captures of the block's own `$HTTP["url"] =~` regex).

use super::cond::regex_ok;
use super::value::CondOp;
use super::{Arg, Tr};
use crate::model::{Opt, V};
use crate::report::{Report, Src};

impl Tr<'_> {
    /// The options of mod_redirect and mod_rewrite.
    pub(super) fn redirect_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { ctx, key, src, val } = *a;
        let opt = |module, k, v| a.opt(module, k, v);
        Some(match key {
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
                    return Some(Vec::new());
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
            _ => return None,
        })
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
}

/// Whether a lighttpd or Cherokee URL regex looks at the query string (an
/// escaped `?`): those get `match-query = true`. Others match the path, and
/// the request's query is appended to the target, which is what lighttpd's
/// `^/old/(.*)$` => `/new/$1` gives too (its `(.*)` swallows the query).
pub(crate) fn mentions_query(re: &str) -> bool {
    re.contains("\\?") || re.contains("[?]")
}

#[cfg(test)]
mod tests {
    use crate::lighttpd::test_util::*;

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
}
