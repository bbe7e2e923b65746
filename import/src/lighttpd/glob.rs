//! lighttpd's include globs: `*`, `?`, `[…]` and `{a,b}` in any path
//! component, expanded in sorted order as glob(3) does for lighttpd's
//! `include "conf-enabled/*.conf"`.

use std::path::{Path, PathBuf};

/// Whether `s` contains glob metacharacters.
pub(crate) fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '[', '{'])
}

/// Expands a glob (`*`, `?`, `[…]`, `{a,b}` in any component), sorted like
/// glob(3); no match gives an empty list.
pub(crate) fn glob(pattern: &Path) -> Vec<PathBuf> {
    let s = pattern.display().to_string();
    let mut out = Vec::new();
    for alt in expand_braces(&s) {
        let comps: Vec<&str> = alt.split('/').collect();
        let start = if alt.starts_with('/') {
            PathBuf::from("/")
        } else {
            PathBuf::from(".")
        };
        let mut cur = vec![start];
        for (i, c) in comps.iter().enumerate() {
            if c.is_empty() {
                continue;
            }
            let last = i == comps.len() - 1;
            let mut next = Vec::new();
            for dir in &cur {
                if is_glob(c) {
                    let Ok(rd) = std::fs::read_dir(dir) else {
                        continue;
                    };
                    let mut names: Vec<String> = rd
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| (!n.starts_with('.') || c.starts_with('.')) && wild(c, n))
                        .collect();
                    names.sort();
                    for n in names {
                        let p = dir.join(&n);
                        if last || p.is_dir() {
                            next.push(p);
                        }
                    }
                } else {
                    let p = dir.join(c);
                    if p.exists() {
                        next.push(p);
                    }
                }
            }
            cur = next;
        }
        for p in cur {
            let p = p.strip_prefix("./").map(Path::to_owned).unwrap_or(p);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// `a{b,c}d` -> `abd`, `acd` (GLOB_BRACE).
fn expand_braces(s: &str) -> Vec<String> {
    let Some(open) = s.find('{') else {
        return vec![s.to_owned()];
    };
    let mut depth = 0;
    let mut close = None;
    for (i, c) in s[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return vec![s.to_owned()];
    };
    let inner = &s[open + 1..close];
    let mut parts = Vec::new();
    let mut d = 0;
    let mut last = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '{' => d += 1,
            '}' => d -= 1,
            ',' if d == 0 => {
                parts.push(&inner[last..i]);
                last = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[last..]);
    let mut out = Vec::new();
    for p in parts {
        for rest in expand_braces(&format!("{}{}{}", &s[..open], p, &s[close + 1..])) {
            out.push(rest);
        }
    }
    out
}

/// fnmatch(3) without flags: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`.
fn wild(pat: &str, name: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let n: Vec<char> = name.chars().collect();
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|i| go(&p[1..], &n[i..])),
            Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some('[') => {
                let Some(end) = p.iter().skip(2).position(|&c| c == ']').map(|e| e + 2) else {
                    return !n.is_empty() && n[0] == '[' && go(&p[1..], &n[1..]);
                };
                let Some(&c) = n.first() else { return false };
                let mut set = &p[1..end];
                let neg = matches!(set.first(), Some('!' | '^'));
                if neg {
                    set = &set[1..];
                }
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= set[i] <= c && c <= set[i + 2];
                        i += 3;
                    } else {
                        hit |= set[i] == c;
                        i += 1;
                    }
                }
                hit != neg && go(&p[end + 1..], &n[1..])
            }
            Some(&c) => n.first() == Some(&c) && go(&p[1..], &n[1..]),
        }
    }
    go(&p, &n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns() {
        assert!(wild("*.conf", "10-a.conf"));
        assert!(!wild("*.conf", "10-a.conf~"));
        assert!(wild("[0-9]?-*", "10-x"));
        assert!(!wild("[!1]*", "10"));
        assert_eq!(expand_braces("a{b,c}d"), vec!["abd", "acd"]);
    }
}
