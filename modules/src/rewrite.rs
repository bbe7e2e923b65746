//! `rewrite`: internal rewrites of the request path (lighttpd mod_rewrite
//! `url.rewrite-once` and `url.rewrite-if-not-file`, Cherokee's `redir` handler
//! with `show = 0`, nginx `rewrite … last` / `try_files`).
//!
//! ```toml
//! [vhost.rewrite]
//! rules = [
//!   { regex = "^/latest/(.*)$", target = "/v2/$1" },
//!   { regex = "^/app/", target = "/app/index.html", if-not-file = true },  # single-page app
//! ]
//! ```
//!
//! Rules are tried in order; the first whose `regex` matches (and, with
//! `if-not-file = true`, whose path names no existing regular file or directory
//! under the document root) replaces the path with its expanded `target`
//! ([`Ctx::set_path`]); no rule matches: the request passes on unchanged. The core
//! then resolves the `[[vhost.rule]]`s again for the new path and restarts the
//! request phase, so the new path gets its own rules' modules (a rewrite into
//! `/img/` gets the `/img/` rule's `expires`).
//!
//! # Rewrite once
//! At most one rewrite per request, by any `rewrite` table (lighttpd
//! `url.rewrite-once`): after the restart every `rewrite` instance passes the
//! request on. So `^/(.*)$ -> /x/$1` rewrites `/a` to `/x/a` and stops there,
//! instead of looping up to the core's limit of
//! [`tessera_core::context::MAX_REWRITES`]. The mark lives in the request's
//! extensions, which actix clears per request.
//!
//! # Target
//! A path starting with `/`, in URL form (`%20` is a space; see
//! [`crate::url_rule`] for `$N`, `%N`, `$$`, `%%` and how captures are encoded).
//! After substitution it is percent-decoded once and normalized like a request
//! path; a result that climbs above the root or decodes to NUL or non-UTF-8
//! (only possible through captures of the query) is answered with 400.
//!
//! The target's query (`/index.php?path=$1`) is accepted but **ignored** for now:
//! [`Ctx`] has no way to replace the query, so the request keeps its own query.
//! Static files do not look at the query, so nothing is lost until a handler that
//! does (FastCGI, proxy) exists.

use fancy_regex::Regex;
use serde::Deserialize;
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpMessage;
use tessera_core::response::error_response;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl, Outcome};

use crate::url_rule::UrlRule;

/// Options of `[vhost.rewrite]` (or of a rule's `rewrite` table).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RewriteConfig {
    /// The rewrite rules, tried in order; the first that applies rewrites
    /// (lighttpd `url.rewrite-once`). Required: an empty list is a build error.
    #[serde(default)]
    pub rules: Vec<RewriteRule>,
}

/// One entry of `rules`: `{ regex = "^/app/(.*)$", target = "/index.html", if-not-file = false }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RewriteRule {
    /// Regular expression (fancy-regex: PCRE-like, look-around allowed), tested
    /// against the decoded, normalized path, or `path?query` with `match-query`.
    /// Unanchored unless it anchors itself.
    pub regex: String,
    /// The new path, starting with `/`; `$N`, `%N`, `$$`, `%%` as in
    /// [`crate::url_rule`]. A query part is ignored (see the module docs).
    pub target: String,
    /// Only rewrite when the path does not name an existing regular file or
    /// directory under the document root (lighttpd `url.rewrite-if-not-file`;
    /// one `stat` when the regex matched). Default `false`.
    #[serde(default)]
    pub if_not_file: bool,
    /// Match against `path?query` (the raw query, only when not empty) instead of
    /// the path. Default `false`.
    #[serde(default)]
    pub match_query: bool,
}

/// The mark a rewrite leaves in the request's extensions (rewrite once).
#[derive(Clone, Copy)]
struct Rewritten;

/// The `rewrite` module instance of one vhost or rule.
pub struct Rewrite {
    rules: Box<[(UrlRule, bool)]>,
    /// The enclosing rule's `path-regex`, for `%N`.
    rule_regex: Option<Regex>,
}

impl ModuleDecl for Rewrite {
    const NAME: &'static str = "rewrite";
    type Config = RewriteConfig;

    /// Compiles every rule.
    ///
    /// # Errors
    /// One line naming the key: `rules: the list is empty`, `rules[N].regex`
    /// (invalid regular expression), `rules[N].target` (not a path starting
    /// with `/`, a control character, `$N`/`%N` without such a group).
    fn build(cfg: RewriteConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        if cfg.rules.is_empty() {
            return Err("rules: the list is empty".into());
        }
        let rule_regex = cx.rule_match.and_then(|m| m.path_regex()).cloned();
        let mut rules = Vec::with_capacity(cfg.rules.len());
        for (i, r) in cfg.rules.iter().enumerate() {
            let rule = UrlRule::new(
                i,
                &r.regex,
                &r.target,
                r.match_query,
                rule_regex.as_ref(),
                false,
            )?;
            if rule.target.has_query() {
                tracing::warn!(
                    target = %r.target,
                    "rewrite: rules[{i}].target: the query part is ignored for now"
                );
            }
            rules.push((rule, r.if_not_file));
        }
        Ok(Rewrite {
            rules: rules.into(),
            rule_regex,
        })
    }
}

impl Module for Rewrite {
    fn hooks(&self) -> Hooks {
        Hooks::REQUEST
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        if cx.req.extensions().contains::<Rewritten>() {
            return Outcome::Continue;
        }
        let mut target = String::new();
        for (rule, if_not_file) in self.rules.iter() {
            if !rule.apply(cx.path(), cx.query(), self.rule_regex.as_ref(), &mut target) {
                continue;
            }
            if *if_not_file && exists(cx) {
                continue;
            }
            let path = match target.find(['?', '#']) {
                Some(i) => &target[..i],
                None => &target[..],
            };
            let new = match tessera_core::path::normalize(path) {
                Ok(p) => p.into_owned(),
                Err(e) => {
                    tracing::debug!(target = %path, error = %e, "rewrite: refused");
                    return Outcome::Respond(error_response(StatusCode::BAD_REQUEST));
                }
            };
            cx.req.extensions_mut().insert(Rewritten);
            if cx.set_path(&new).is_err() {
                return Outcome::Respond(error_response(StatusCode::BAD_REQUEST));
            }
            return Outcome::Continue;
        }
        Outcome::Continue
    }
}

/// True when the path names an existing regular file or directory under the
/// request's document root (the vhost's, or one an earlier `alias`, `userdir`
/// or `mass-vhost` set; symlinks followed).
fn exists(cx: &Ctx<'_>) -> bool {
    let p = cx
        .document_root()
        .join(cx.path_in_root().trim_start_matches('/'));
    std::fs::metadata(p).is_ok_and(|m| m.is_file() || m.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::actix_web::test::TestRequest;
    use tessera_core::registry::SharedState;
    use tessera_core::vhost::VhostInfo;

    fn vhost(root: &std::path::Path) -> VhostInfo {
        VhostInfo {
            index: 0,
            names: vec!["site.test".into()],
            document_root: root.to_path_buf(),
        }
    }

    fn build(json: serde_json::Value) -> Result<Rewrite, String> {
        let cfg: RewriteConfig = serde_json::from_value(json).map_err(|e| e.to_string())?;
        let v = vhost(&std::env::temp_dir());
        let shared = SharedState::default();
        let cx = BuildContext {
            vhost: &v,
            config_dir: std::path::Path::new("."),
            shared: &shared,
            rule_match: None,
            upstreams: &tessera_core::upstream::Upstreams::default(),
        };
        Rewrite::build(cfg, &cx)
    }

    /// Runs the request phase up to `passes` times like the core does; returns
    /// the final path, or the status of a response.
    fn run(m: &Rewrite, root: &std::path::Path, uri: &str, passes: usize) -> Result<String, u16> {
        let req = TestRequest::default().uri(uri).to_http_request();
        let v = vhost(root);
        let path = tessera_core::path::normalize(req.path())
            .unwrap()
            .into_owned();
        let mut cx = Ctx::new(&req, &v, path.into());
        for _ in 0..passes {
            if let Outcome::Respond(r) = m.on_request(&mut cx) {
                return Err(r.status().as_u16());
            }
            if !cx.take_rewritten() {
                break;
            }
        }
        Ok(cx.path().to_owned())
    }

    #[test]
    fn first_match_rewrites_once() {
        let m = build(serde_json::json!({"rules": [
            {"regex": "^/(.*)$", "target": "/x/$1"},
            {"regex": "^/never", "target": "/y"},
        ]}))
        .unwrap();
        let tmp = std::env::temp_dir();
        assert_eq!(run(&m, &tmp, "/a/b", 10).unwrap(), "/x/a/b");
        assert_eq!(run(&m, &tmp, "/never", 10).unwrap(), "/x/never");
    }

    #[test]
    fn captures_round_trip_through_decoding() {
        let m = build(serde_json::json!({"rules": [
            {"regex": "^/app/(.*)$", "target": "/index.html?path=$1"},
            {"regex": "^/q\\?(.*)$", "target": "/found/$1", "match-query": true},
            {"regex": "^/lit$", "target": "/a%%20b/100%%25"},
        ]}))
        .unwrap();
        let tmp = std::env::temp_dir();
        assert_eq!(run(&m, &tmp, "/app/x", 10).unwrap(), "/index.html");
        // a decoded name with '?', '#', '%' stays one path segment
        let m2 = build(serde_json::json!({"rules": [{"regex": "^/f/(.*)$", "target": "/g/$1"}]}))
            .unwrap();
        assert_eq!(
            run(&m2, &tmp, "/f/a%3Fb%23c%25d", 10).unwrap(),
            "/g/a?b#c%d"
        );
        assert_eq!(run(&m, &tmp, "/q?a%20b", 10).unwrap(), "/found/a b");
        assert_eq!(run(&m, &tmp, "/lit", 10).unwrap(), "/a b/100%");
    }

    #[test]
    fn hostile_query_captures() {
        let m = build(serde_json::json!({"rules": [
            {"regex": "^/q\\?p=(.*)$", "target": "/static/$1", "match-query": true},
        ]}))
        .unwrap();
        let tmp = std::env::temp_dir();
        assert_eq!(run(&m, &tmp, "/q?p=../../etc/passwd", 10), Err(400));
        assert_eq!(run(&m, &tmp, "/q?p=%2e%2e/%2e%2e/x", 10), Err(400));
        assert_eq!(run(&m, &tmp, "/q?p=a%00b", 10), Err(400));
        assert_eq!(run(&m, &tmp, "/q?p=../x", 10).unwrap(), "/x");
        assert_eq!(run(&m, &tmp, "/q?p=a?b", 10).unwrap(), "/static/a?b");
    }

    #[test]
    fn if_not_file() {
        let root = std::env::temp_dir().join(format!("tessera-rewrite-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("dir")).unwrap();
        std::fs::write(root.join("file.txt"), "x").unwrap();
        let m = build(serde_json::json!({"rules": [
            {"regex": "^/", "target": "/index.html", "if-not-file": true},
        ]}))
        .unwrap();
        assert_eq!(run(&m, &root, "/file.txt", 10).unwrap(), "/file.txt");
        assert_eq!(run(&m, &root, "/dir/", 10).unwrap(), "/dir/");
        assert_eq!(run(&m, &root, "/missing", 10).unwrap(), "/index.html");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn build_errors() {
        let e = |j| build(j).err().unwrap();
        assert_eq!(
            e(serde_json::json!({"rules": []})),
            "rules: the list is empty"
        );
        assert!(
            e(serde_json::json!({"rules": [{"regex": "^/", "target": "https://x.example/"}]}))
                .contains("rules[0].target: \"https://x.example/\" must be a path")
        );
        assert!(
            e(serde_json::json!({"rules": [{"regex": "^/", "target": "x"}]}))
                .contains("must start with '/'")
        );
        assert!(
            e(serde_json::json!({"rules": [{"regex": "[", "target": "/x"}]}))
                .starts_with("rules[0].regex: invalid regular expression")
        );
        assert!(
            e(serde_json::json!({"rules": [{"regex": "^/", "target": "/x", "status": 301}]}))
                .contains("unknown field")
        );
    }
}
