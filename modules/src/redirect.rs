//! `redirect`: answers matching requests with a redirection (lighttpd mod_redirect
//! `url.redirect` + `url.redirect-code`, Cherokee's `redir` handler with
//! `show = 1`, nginx `return 301 …` / `rewrite … permanent`).
//!
//! ```toml
//! [vhost.redirect]
//! rules = [
//!   { regex = "^/old/(.*)$", target = "/new/$1" },                      # 301
//!   { regex = "^/blog/(.*)$", target = "https://blog.example.org/$1", status = 308 },
//!   { regex = "^/search\\?q=(.*)$", target = "/find/$1", match-query = true, status = 302 },
//! ]
//! ```
//!
//! Rules are tried in order; the first whose `regex` matches answers with its
//! `status` and a `Location` built from its `target` (captures: see
//! [`crate::url_rule`]'s syntax, `$N` from the rule's regex, `%N` from the
//! enclosing `[[vhost.rule]]`'s `path-regex`). No rule matches: the request passes
//! on. Request phase, so a redirect is answered before any content handler.
//!
//! # Location
//! - An absolute target (`https://example.org/$1`) is used as it is after
//!   substitution; its scheme and host are fixed in the configuration (captures
//!   there are a build error).
//! - A host-relative target (`/new/$1`) is made absolute with the request's own
//!   host (`Host` or the absolute-form authority, port included; `https` when the
//!   connection is TLS), like static-file's slash redirect; without a host (an
//!   HTTP/1.0 request) it stays relative. Leading `/` and `\` of the substituted
//!   path are collapsed to one `/`, so a capture can never produce
//!   `//evil.example` or `/\evil.example`.
//! - Captures are percent-encoded (see [`crate::url_rule`]): no CR/LF, no new
//!   query or fragment can be injected.
//! - Query: with `match-query = false` (default) the regex sees the decoded path
//!   only, and the request's query is appended unless the target has its own `?`
//!   (nginx `rewrite`; an empty query adds nothing). With `match-query = true` the
//!   regex sees `path?query` (the raw query, only when it is not empty) and the
//!   target decides the whole query (lighttpd `url.redirect`).
//!
//! The body is the small HTML page of [`error_response`] for the status.

use fancy_regex::Regex;
use serde::Deserialize;
use tessera_core::actix_web::http::header::{self, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::response::error_response;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl, Outcome};

use crate::url_rule::{collapse_leading_slashes, push_query, UrlRule};

/// Options of `[vhost.redirect]` (or of a rule's `redirect` table).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RedirectConfig {
    /// The redirect rules, tried in order; the first match answers (lighttpd
    /// `url.redirect`, first match wins). Required: an empty list is a build
    /// error.
    #[serde(default)]
    pub rules: Vec<RedirectRule>,
}

/// One entry of `rules`: `{ regex = "^/old/(.*)$", target = "/new/$1", status = 301 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RedirectRule {
    /// Regular expression (fancy-regex: PCRE-like, look-around allowed), tested
    /// against the decoded, normalized path, or `path?query` with `match-query`.
    /// Unanchored unless it anchors itself.
    pub regex: String,
    /// Where to send the client: `/path…` (made absolute with the request's
    /// host) or `scheme://host/…`; `$N`, `%N`, `$$`, `%%` as in
    /// [`crate::url_rule`].
    pub target: String,
    /// 301, 302, 303, 307 or 308 (RFC 9110 §15.4). Default 301 (Cherokee `redir`,
    /// lighttpd for GET). Anything else is a build error.
    #[serde(default = "default_status")]
    pub status: u16,
    /// Match against `path?query` instead of the path, and do not append the
    /// request's query to the target. Default `false`.
    #[serde(default)]
    pub match_query: bool,
}

fn default_status() -> u16 {
    301
}

/// The `redirect` module instance of one vhost or rule.
pub struct Redirect {
    rules: Box<[(UrlRule, StatusCode)]>,
    /// The enclosing rule's `path-regex`, for `%N`.
    rule_regex: Option<Regex>,
}

impl ModuleDecl for Redirect {
    const NAME: &'static str = "redirect";
    type Config = RedirectConfig;

    /// Compiles every rule.
    ///
    /// # Errors
    /// One line naming the key: `rules: the list is empty`, `rules[N].regex`
    /// (invalid regular expression), `rules[N].target` (see
    /// [`crate::url_rule`]), `rules[N].status` (not a redirect status).
    fn build(cfg: RedirectConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        if cfg.rules.is_empty() {
            return Err("rules: the list is empty".into());
        }
        let rule_regex = cx.rule_match.and_then(|m| m.path_regex()).cloned();
        let mut rules = Vec::with_capacity(cfg.rules.len());
        for (i, r) in cfg.rules.iter().enumerate() {
            if !matches!(r.status, 301 | 302 | 303 | 307 | 308) {
                return Err(format!(
                    "rules[{i}].status: {} is not a redirect status (301, 302, 303, 307, 308)",
                    r.status
                ));
            }
            let status = StatusCode::from_u16(r.status).expect("checked above");
            let rule = UrlRule::new(
                i,
                &r.regex,
                &r.target,
                r.match_query,
                rule_regex.as_ref(),
                true,
            )?;
            rules.push((rule, status));
        }
        Ok(Redirect {
            rules: rules.into(),
            rule_regex,
        })
    }
}

impl Module for Redirect {
    fn hooks(&self) -> Hooks {
        Hooks::REQUEST
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        let mut target = String::new();
        for (rule, status) in self.rules.iter() {
            if !rule.apply(cx.path(), cx.query(), self.rule_regex.as_ref(), &mut target) {
                continue;
            }
            let loc = location(cx, rule, &target);
            let mut r = error_response(*status);
            match HeaderValue::from_str(&loc) {
                Ok(v) => {
                    r.headers_mut().insert(header::LOCATION, v);
                }
                Err(_) => {
                    // Unreachable by construction (everything is percent-encoded).
                    tracing::warn!(location = %loc.escape_default(), "redirect: invalid Location");
                    r = error_response(StatusCode::INTERNAL_SERVER_ERROR);
                }
            }
            return Outcome::Respond(r);
        }
        Outcome::Continue
    }
}

/// The `Location` for an expanded `target` of `rule`.
fn location(cx: &Ctx<'_>, rule: &UrlRule, target: &str) -> String {
    let mut loc = String::with_capacity(target.len() + 32);
    if rule.target.is_absolute() {
        loc.push_str(target);
    } else {
        tessera_core::response::push_origin(cx, &mut loc);
        loc.push_str(&collapse_leading_slashes(target));
    }
    let q = cx.query();
    if !rule.match_query && !rule.target.has_query() && !q.is_empty() {
        loc.push('?');
        push_query(&mut loc, q);
    }
    loc
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::actix_web::test::TestRequest;
    use tessera_core::registry::SharedState;
    use tessera_core::rule::{MatchSpec, Matcher};
    use tessera_core::vhost::VhostInfo;

    fn vhost() -> VhostInfo {
        VhostInfo {
            index: 0,
            names: vec!["site.test".into()],
            document_root: std::env::temp_dir(),
        }
    }

    fn build_with(json: serde_json::Value, rule: Option<&Matcher>) -> Result<Redirect, String> {
        let cfg: RedirectConfig = serde_json::from_value(json).map_err(|e| e.to_string())?;
        let v = vhost();
        let shared = SharedState::default();
        let cx = BuildContext {
            vhost: &v,
            config_dir: std::path::Path::new("."),
            shared: &shared,
            rule_match: rule,
            upstreams: &tessera_core::upstream::Upstreams::default(),
        };
        Redirect::build(cfg, &cx)
    }

    fn build(json: serde_json::Value) -> Result<Redirect, String> {
        build_with(json, None)
    }

    /// (status, Location) for `uri` with `host` (None: no Host header).
    fn run(m: &Redirect, uri: &str, host: Option<&str>) -> Option<(u16, String)> {
        let mut t = TestRequest::default().uri(uri);
        if let Some(h) = host {
            t = t.insert_header(("host", h));
        }
        let req = t.to_http_request();
        let v = vhost();
        let path = tessera_core::path::normalize(req.path())
            .unwrap()
            .into_owned();
        let mut cx = Ctx::new(&req, &v, path.into());
        match m.on_request(&mut cx) {
            Outcome::Continue => None,
            Outcome::Respond(r) => Some((
                r.status().as_u16(),
                r.headers()
                    .get("location")
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default(),
            )),
        }
    }

    #[test]
    fn first_match_wins_with_status() {
        let m = build(serde_json::json!({"rules": [
            {"regex": "^/old/(.*)$", "target": "/new/$1"},
            {"regex": "^/old/", "target": "/never", "status": 302},
            {"regex": "^/t/(.*)$", "target": "/temp/$1", "status": 307},
        ]}))
        .unwrap();
        assert_eq!(
            run(&m, "/old/a/b.html", Some("site.test")),
            Some((301, "http://site.test/new/a/b.html".into()))
        );
        assert_eq!(
            run(&m, "/t/x", Some("Site.Test:8080")),
            Some((307, "http://Site.Test:8080/temp/x".into()))
        );
        assert_eq!(run(&m, "/new/x", Some("site.test")), None);
        // no host: relative
        assert_eq!(run(&m, "/old/x", None), Some((301, "/new/x".into())));
    }

    #[test]
    fn query_is_kept_unless_the_target_sets_one() {
        let m = build(serde_json::json!({"rules": [
            {"regex": "^/a$", "target": "/b"},
            {"regex": "^/c$", "target": "/d?x=1"},
            {"regex": "^/e\\?(.*)$", "target": "/f?$1&y", "match-query": true},
        ]}))
        .unwrap();
        assert_eq!(run(&m, "/a?q=1&r", None).unwrap().1, "/b?q=1&r");
        assert_eq!(run(&m, "/a", None).unwrap().1, "/b");
        assert_eq!(run(&m, "/c?q=1", None).unwrap().1, "/d?x=1");
        assert_eq!(run(&m, "/e?k=%41", None).unwrap().1, "/f?k=%41&y");
        assert_eq!(run(&m, "/e", None), None);
    }

    #[test]
    fn hostile_captures_stay_on_site() {
        let m = build(serde_json::json!({"rules": [
            {"regex": "^/r(.*)$", "target": "/$1"},
            {"regex": "^/abs/(.*)$", "target": "https://example.org/$1"},
        ]}))
        .unwrap();
        // decoded "/r//evil.example" is normalized to "/r/evil.example"
        assert_eq!(
            run(&m, "/r/%2Fevil.example", None).unwrap().1,
            "/evil.example"
        );
        assert_eq!(
            run(&m, "/r/%5Cevil.example", None).unwrap().1,
            "/%5Cevil.example"
        );
        assert_eq!(
            run(&m, "/r/%0D%0ASet-Cookie:%20a=b", Some("site.test"))
                .unwrap()
                .1,
            "http://site.test/%0D%0ASet-Cookie:%20a=b"
        );
        assert_eq!(run(&m, "/r/a%3Fb%23c", None).unwrap().1, "/a%3Fb%23c");
        assert_eq!(
            run(&m, "/abs/@evil.example", None).unwrap().1,
            "https://example.org/@evil.example"
        );
    }

    #[test]
    fn rule_captures() {
        let spec: MatchSpec =
            serde_json::from_value(serde_json::json!({"path-regex": "^/(en|de)/"})).unwrap();
        let matcher = Matcher::compile(&spec).unwrap();
        let m = build_with(
            serde_json::json!({"rules": [{"regex": "^/[a-z]+/(.*)$", "target": "/%1/new/$1"}]}),
            Some(&matcher),
        )
        .unwrap();
        assert_eq!(run(&m, "/de/x", None).unwrap().1, "/de/new/x");
    }

    #[test]
    fn build_errors() {
        let e = |j| build(j).err().unwrap();
        assert_eq!(e(serde_json::json!({})), "rules: the list is empty");
        assert!(
            e(serde_json::json!({"rules": [{"regex": "^/", "target": "/x", "status": 200}]}))
                .starts_with("rules[0].status: 200 is not a redirect status")
        );
        assert!(
            e(serde_json::json!({"rules": [{"regex": "^/", "target": "/x", "status": 304}]}))
                .starts_with("rules[0].status")
        );
        assert!(
            e(serde_json::json!({"rules": [{"regex": "^/", "target": "/%1"}]}))
                .starts_with("rules[0].target: %1 needs")
        );
        assert!(
            e(serde_json::json!({"rules": [{"regex": "^/", "target": "/x", "code": 301}]}))
                .contains("unknown field")
        );
    }
}
