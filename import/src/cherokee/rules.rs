//! A rule's properties into model options: the handler (file, dirlist,
//! redir, proxy, the gateways, …), document root, expiration, headers,
//! encoders, authentication, access and the rest, each reported.

use std::path::Path;

use super::proxy::proxy_handler;
use super::tree::Node;
use super::{backends, Tr, COMPRESS_TYPES, EPOCH_EXPIRES, MAX_AGE, MAX_EXPIRES};
use crate::expire::parse_cherokee_time;
use crate::model::{Cond, Opt, V};
use crate::report::Src;

/// Upgrades of older configuration formats (`admin/config_version.py`):
/// `encoder!X = 1` means allow, `0` means not set.
pub(super) fn encoder_state(v: &str) -> Option<bool> {
    match v.trim() {
        "allow" | "1" => Some(true),
        "forbid" | "deny" => Some(false),
        _ => None,
    }
}

/// A rule's properties into model options.
pub(super) fn rule_options(
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
                    let alias =
                        format!("alias paths = {{ \"{prefix}\" = \"{dir}\" }} in this rule");
                    tr.report.translated(&src, &what, alias);
                    // as for a vhost's document root: translated, and a warning
                    if !Path::new(&dir).is_dir() {
                        tr.report.missing(&src, &what, &dir);
                    }
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
                let supported = matches!(kind, "htpasswd" | "plain");
                if !supported {
                    // kept without a user file: the paths fail closed
                    tr.report.dropped(&src, &what, format!("the \"{kind}\" validator is not supported (htpasswd and plain are): these paths answer 401 to everyone (fail closed) until auth-basic gets a user file"));
                }
                let methods = node.val("methods").unwrap_or("basic");
                if !methods.split(',').any(|m| m.trim() == "basic") {
                    tr.report
                        .approximated(&src, &what, "digest authentication becomes Basic");
                }
                let file = node
                    .val("passwdfile")
                    .filter(|_| supported)
                    .map(|f| tr.path(f, &src, &what))
                    .unwrap_or_default();
                if supported && !Path::new(&file).exists() {
                    tr.report.missing(&src, &what, &file);
                } else if supported {
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
                if supported {
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
                }
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
            "only_secure" => {
                if node.flag("").unwrap_or(false)
                    || node.value.as_ref().is_some_and(|(v, _)| v.trim() != "0")
                {
                    tr.report.weaker(&src, &what, "TLS is not imported, so what this rule serves (Cherokee: over TLS only) is now served over plain HTTP too; put it behind TLS by hand (a TLS front end) or restrict it (access)");
                } else {
                    tr.report.not_needed(&src, &what, "off (the default)");
                }
            }
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
    use crate::cherokee::test_util::imp;

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

    /// `only_secure` cannot be kept (TLS is not imported): the report says
    /// plainly (WEAKER) that the rule's content is served over plain HTTP;
    /// `only_secure = 0` is not a weakening.
    #[test]
    fn only_secure_is_reported_as_a_weakening() {
        let base = "vserver!1!nick = default\nvserver!1!document_root = /srv\nvserver!1!rule!1!match = default\nvserver!1!rule!1!handler = file\nvserver!1!rule!2!match = directory\nvserver!1!rule!2!match!directory = /admin\nvserver!1!rule!2!handler = file\n";
        let (_, r) = imp(&format!("{base}vserver!1!rule!2!only_secure = 1\n"));
        let w: Vec<_> = r.entries.iter().filter(|e| e.is_weaker()).collect();
        assert_eq!(w.len(), 1, "{r}");
        assert_eq!(w[0].outcome, crate::Outcome::Dropped);
        assert_eq!(w[0].what, "vserver!1!rule!2!only_secure");
        assert!(
            w[0].message.starts_with("WEAKER: ") && w[0].message.contains("plain HTTP too"),
            "{r}"
        );
        let (_, r) = imp(&format!("{base}vserver!1!rule!2!only_secure = 0\n"));
        assert!(!r.entries.iter().any(|e| e.is_weaker()), "{r}");
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
}
