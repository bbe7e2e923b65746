//! Rules inside a vhost (`[[vhost.rule]]`): Cherokee's rule model, into which
//! lighttpd's `$HTTP["url"]` conditionals and nginx's locations translate.
//!
//! A rule has a match and module tables. Rules are evaluated top-down in file order;
//! a rule with `final = true` (the default, as in Cherokee) stops the evaluation.
//! How matching rules combine into a pipeline is described in [`crate::pipeline`].

use regex::Regex;
use serde::Deserialize;

/// A match as written in the configuration (`match = { path-prefix = "/img/" }`).
///
/// Externally tagged, kebab-case keys: `path-prefix`, `path-regex`, `extensions`,
/// `all`, `any`, `not`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum MatchSpec {
    /// The decoded, normalized path starts with this string (nginx `location /x/`,
    /// Cherokee `directory`, lighttpd `$HTTP["url"] =^`).
    PathPrefix(String),
    /// The decoded path matches this regular expression (unanchored unless the
    /// pattern anchors itself; nginx `location ~`, Cherokee `request`,
    /// lighttpd `$HTTP["url"] =~`). Syntax: the `regex` crate.
    PathRegex(String),
    /// The last path segment ends in `.EXT` for one of these extensions,
    /// compared case-insensitively, without the dot (Cherokee `extensions`).
    Extensions(Vec<String>),
    /// Every inner match holds (Cherokee `and`).
    All(Vec<MatchSpec>),
    /// At least one inner match holds (Cherokee `or`).
    Any(Vec<MatchSpec>),
    /// The inner match does not hold (Cherokee `not`).
    Not(Box<MatchSpec>),
}

/// A compiled match, evaluated per request against the decoded path.
#[derive(Debug)]
pub enum Matcher {
    /// Matches every request (a rule without `match`, Cherokee's `default`).
    Always,
    /// See [`MatchSpec::PathPrefix`].
    PathPrefix(Box<str>),
    /// See [`MatchSpec::PathRegex`].
    PathRegex(Regex),
    /// Lower-cased extensions without the dot; see [`MatchSpec::Extensions`].
    Extensions(Box<[Box<str>]>),
    /// See [`MatchSpec::All`].
    All(Box<[Matcher]>),
    /// See [`MatchSpec::Any`].
    Any(Box<[Matcher]>),
    /// See [`MatchSpec::Not`].
    Not(Box<Matcher>),
}

impl Matcher {
    /// Compiles a match. Errors carry the key path below `match` and the reason
    /// (an invalid regular expression, an empty extension list).
    pub fn compile(spec: &MatchSpec) -> Result<Matcher, (String, String)> {
        Ok(match spec {
            MatchSpec::PathPrefix(p) => {
                if !p.starts_with('/') {
                    return Err(("path-prefix".into(), format!("\"{p}\" must start with '/'")));
                }
                Matcher::PathPrefix(p.as_str().into())
            }
            MatchSpec::PathRegex(r) => Matcher::PathRegex(Regex::new(r).map_err(|e| {
                let msg = e.to_string().replace('\n', " ");
                (
                    "path-regex".to_string(),
                    format!("invalid regular expression: {msg}"),
                )
            })?),
            MatchSpec::Extensions(exts) => {
                if exts.is_empty() {
                    return Err(("extensions".into(), "the list is empty".into()));
                }
                Matcher::Extensions(
                    exts.iter()
                        .map(|e| e.trim_start_matches('.').to_ascii_lowercase().into())
                        .collect(),
                )
            }
            MatchSpec::All(v) => Matcher::All(compile_list("all", v)?),
            MatchSpec::Any(v) => Matcher::Any(compile_list("any", v)?),
            MatchSpec::Not(m) => Matcher::Not(Box::new(
                Matcher::compile(m).map_err(|(k, r)| (format!("not.{k}"), r))?,
            )),
        })
    }

    /// True when the request with this decoded, normalized path matches.
    pub fn matches(&self, path: &str) -> bool {
        match self {
            Matcher::Always => true,
            Matcher::PathPrefix(p) => path.starts_with(&**p),
            Matcher::PathRegex(r) => r.is_match(path),
            Matcher::Extensions(exts) => match extension(path) {
                Some(ext) => exts.iter().any(|e| e.eq_ignore_ascii_case(ext)),
                None => false,
            },
            Matcher::All(v) => v.iter().all(|m| m.matches(path)),
            Matcher::Any(v) => v.iter().any(|m| m.matches(path)),
            Matcher::Not(m) => !m.matches(path),
        }
    }
}

fn compile_list(key: &str, v: &[MatchSpec]) -> Result<Box<[Matcher]>, (String, String)> {
    if v.is_empty() {
        return Err((key.into(), "the list is empty".into()));
    }
    v.iter()
        .enumerate()
        .map(|(i, s)| Matcher::compile(s).map_err(|(k, r)| (format!("{key}[{i}].{k}"), r)))
        .collect()
}

/// The extension of the last path segment, without the dot; `None` for a name
/// without one, a dotfile such as `.env`, or a path ending in `/`.
pub fn extension(path: &str) -> Option<&str> {
    let name = &path[path.rfind('/').map_or(0, |i| i + 1)..];
    match name.rfind('.') {
        Some(0) | None => None,
        Some(i) => Some(&name[i + 1..]),
    }
}

/// One compiled rule of a vhost.
#[derive(Debug)]
pub struct Rule {
    /// A label for `tessera -t` and errors: the `name` key, or `rule[N]`.
    pub label: String,
    /// When the rule applies.
    pub matcher: Matcher,
    /// Whether a match stops the evaluation of later rules (default `true`).
    pub is_final: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(toml_like: serde_json::Value) -> Matcher {
        Matcher::compile(&serde_json::from_value(toml_like).unwrap()).unwrap()
    }

    #[test]
    fn prefix_regex_extensions() {
        assert!(m(serde_json::json!({"path-prefix": "/img/"})).matches("/img/a.png"));
        assert!(!m(serde_json::json!({"path-prefix": "/img/"})).matches("/imgx"));
        assert!(m(serde_json::json!({"path-regex": "\\.php$"})).matches("/a/b.php"));
        let e = m(serde_json::json!({"extensions": ["PNG", ".jpg"]}));
        assert!(e.matches("/a/b.png") && e.matches("/x.JPG"));
        assert!(!e.matches("/png") && !e.matches("/a.png/") && !e.matches("/.png"));
    }

    #[test]
    fn combinations() {
        let c = m(serde_json::json!({"all": [
            {"path-prefix": "/a/"},
            {"not": {"extensions": ["txt"]}},
            {"any": [{"path-regex": "x"}, {"path-regex": "y"}]}
        ]}));
        assert!(c.matches("/a/x.png"));
        assert!(!c.matches("/a/x.txt"));
        assert!(!c.matches("/a/z.png"));
        assert!(!c.matches("/b/x.png"));
    }

    #[test]
    fn errors_name_the_key() {
        let spec: MatchSpec =
            serde_json::from_value(serde_json::json!({"all": [{"path-regex": "("}]})).unwrap();
        let (k, r) = Matcher::compile(&spec).unwrap_err();
        assert_eq!(k, "all[0].path-regex");
        assert!(r.contains("invalid regular expression"), "{r}");
        let bad: Result<MatchSpec, _> =
            serde_json::from_value(serde_json::json!({"pathprefix": "/"}));
        assert!(bad.is_err());
    }
}
