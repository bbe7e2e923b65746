//! Writes the translated configuration as commented TOML: each vhost, table
//! and rule says which lines of the source it came from.

use std::fmt::Write;

use crate::model::{Cond, Resolved, V};
use crate::report::Src;

/// One listen address and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listen {
    /// `IP:PORT`.
    pub addr: String,
    /// Where it was configured.
    pub src: Src,
}

/// A vhost ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct VhostOut {
    /// Comment lines written above `[[vhost]]` (without `# `).
    pub comment: Vec<String>,
    /// `server-names`.
    pub names: Vec<String>,
    /// `default = true`.
    pub default: bool,
    /// `listen`: the listeners it answers on (empty: every one).
    pub listen: Vec<String>,
    /// `names-see-port = true`.
    pub names_see_port: bool,
    /// `document-root`.
    pub document_root: String,
    /// Where the document root was set.
    pub document_root_src: Option<Src>,
    /// Tables, modules and rules.
    pub resolved: Resolved,
}

/// The whole output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Output {
    /// Comment lines at the top of the file (without `# `).
    pub header: Vec<String>,
    /// `[server] listen`.
    pub listen: Vec<Listen>,
    /// Other `[server]` keys, with where they came from.
    pub server: Vec<(String, V, Src)>,
    /// `[[upstream]]` tables (`name` first), in order.
    pub upstreams: Vec<Vec<(String, V)>>,
    /// The vhosts, in order.
    pub vhosts: Vec<VhostOut>,
}

/// A TOML key: bare when it can be, quoted otherwise.
pub fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        k.to_owned()
    } else {
        string(k)
    }
}

/// A TOML string: a literal string (`'…'`) when the text has backslashes and
/// can be written so, a basic string (`"…"`) otherwise.
pub fn string(s: &str) -> String {
    let control = s.chars().any(|c| c.is_control());
    if s.contains('\\') && !s.contains('\'') && !control {
        return format!("'{s}'");
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value on one line.
pub fn inline(v: &V) -> String {
    match v {
        V::Str(s) => string(s),
        V::Int(i) => i.to_string(),
        V::Bool(b) => b.to_string(),
        V::Arr(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        V::Tab(t) if t.is_empty() => "{}".to_owned(),
        V::Tab(t) => format!(
            "{{ {} }}",
            t.iter()
                .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Whether a table-valued key is written as a sub-table (long tables).
fn as_subtable(v: &V) -> bool {
    matches!(v, V::Tab(t) if t.len() > 4 || inline(v).len() > 100)
}

/// Writes a module table's keys: short values inline, arrays of tables one
/// element per line, long tables as `[prefix.key]` sub-tables after the rest.
fn table_body(out: &mut String, prefix: &str, t: &[(String, V)]) {
    for (k, v) in t.iter().filter(|(_, v)| !as_subtable(v)) {
        match v {
            V::Arr(a) if a.iter().any(|x| matches!(x, V::Tab(_))) || inline(v).len() > 100 => {
                let _ = writeln!(out, "{} = [", key(k));
                for x in a {
                    let _ = writeln!(out, "  {},", inline(x));
                }
                out.push_str("]\n");
            }
            _ => {
                let _ = writeln!(out, "{} = {}", key(k), inline(v));
            }
        }
    }
    for (k, v) in t.iter().filter(|(_, v)| as_subtable(v)) {
        let _ = writeln!(out, "\n[{prefix}.{}]", key(k));
        if let V::Tab(entries) = v {
            for (ek, ev) in entries {
                let _ = writeln!(out, "{} = {}", key(ek), inline(ev));
            }
        }
    }
}

fn srcs_comment(srcs: &[Src]) -> String {
    let real: Vec<String> = srcs
        .iter()
        .filter(|s| s.line > 0)
        .map(Src::to_string)
        .collect();
    if real.is_empty() {
        String::new()
    } else {
        let mut shown = real.clone();
        if shown.len() > 6 {
            let n = shown.len() - 6;
            shown.truncate(6);
            shown.push(format!("and {n} more"));
        }
        format!("  # from {}", shown.join(", "))
    }
}

/// A block label with the file's directory left out.
fn short_label(l: &str) -> String {
    match l.split_once(' ') {
        Some((place, rest)) => {
            let base = place.rsplit('/').next().unwrap_or(place);
            format!("{base} {rest}")
        }
        None => l.rsplit('/').next().unwrap_or(l).to_owned(),
    }
}

/// The TOML text of `out`.
pub fn write(out: &Output) -> String {
    let mut s = String::new();
    for l in &out.header {
        let _ = writeln!(s, "# {l}");
    }
    s.push_str("\n[server]\n");
    if !out.listen.is_empty() {
        s.push_str("listen = [\n");
        for l in &out.listen {
            let _ = writeln!(
                s,
                "  {},{}",
                string(&l.addr),
                srcs_comment(std::slice::from_ref(&l.src))
            );
        }
        s.push_str("]\n");
    }
    for (k, v, src) in &out.server {
        let _ = writeln!(
            s,
            "{} = {}{}",
            key(k),
            inline(v),
            srcs_comment(std::slice::from_ref(src))
        );
    }
    for u in &out.upstreams {
        s.push_str("\n[[upstream]]\n");
        table_body(&mut s, "upstream", u);
    }
    for v in &out.vhosts {
        s.push_str(
            "\n# ---------------------------------------------------------------------------\n",
        );
        for l in &v.comment {
            let _ = writeln!(s, "# {l}");
        }
        s.push_str("[[vhost]]\n");
        let _ = writeln!(
            s,
            "server-names = {}",
            inline(&V::strs(v.names.iter().cloned()))
        );
        if v.default {
            s.push_str("default = true\n");
        }
        if v.names_see_port {
            s.push_str("names-see-port = true\n");
        }
        if !v.listen.is_empty() {
            let _ = writeln!(s, "listen = {}", inline(&V::strs(v.listen.iter().cloned())));
        }
        let _ = writeln!(
            s,
            "document-root = {}{}",
            string(&v.document_root),
            srcs_comment(v.document_root_src.as_slice())
        );
        let _ = writeln!(
            s,
            "modules = {}",
            inline(&V::strs(v.resolved.modules.iter().copied()))
        );
        for (m, t, srcs) in &v.resolved.tables {
            let _ = writeln!(s, "\n[vhost.{}]{}", key(m), srcs_comment(srcs));
            table_body(&mut s, &format!("vhost.{}", key(m)), t);
        }
        for (i, r) in v.resolved.rules.iter().enumerate() {
            s.push('\n');
            for f in &r.from {
                let _ = writeln!(s, "# when {f}");
            }
            let c = srcs_comment(&r.srcs);
            if !c.is_empty() {
                let _ = writeln!(s, "# options{}", c.trim_start().trim_start_matches('#'));
            }
            s.push_str("[[vhost.rule]]\n");
            // A rule of no block (a module's own per-path split, like
            // proxy.server's prefixes) is named after its positive tests.
            let own: Vec<&Cond> = r
                .ctx
                .iter()
                .filter(|c| !matches!(c, Cond::Not(_)))
                .collect();
            let name = match (r.from.first(), own.as_slice()) {
                (Some(f), _) => format!("{}: {}", i + 1, short_label(f)),
                (None, [c]) => format!("{}: {}", i + 1, inline(&c.to_match())),
                _ => format!("{}: every other request", i + 1),
            };
            let _ = writeln!(s, "name = {}", string(&name));
            let m = if r.ctx.len() == 1 {
                r.ctx[0].to_match()
            } else {
                V::tab1("all", V::Arr(r.ctx.iter().map(|c| c.to_match()).collect()))
            };
            let _ = writeln!(s, "match = {}", inline(&m));
            s.push_str("final = false\n");
            for (m, t) in &r.tables {
                let _ = writeln!(s, "[vhost.rule.{}]", key(m));
                table_body(&mut s, &format!("vhost.rule.{}", key(m)), t);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_keys() {
        assert_eq!(string("a\"b"), "\"a\\\"b\"");
        assert_eq!(string(r"^/a\.b$"), r"'^/a\.b$'");
        assert_eq!(string(r"it's\x"), r#""it's\\x""#);
        assert_eq!(key("index-files"), "index-files");
        assert_eq!(key("text/css"), "\"text/css\"");
        assert_eq!(key(""), "\"\"");
    }

    #[test]
    fn inline_values() {
        let v = V::Tab(vec![
            ("regex".into(), V::s("^/(.*)$")),
            ("status".into(), V::Int(301)),
            ("if-not-file".into(), V::Bool(true)),
        ]);
        assert_eq!(
            inline(&v),
            "{ regex = \"^/(.*)$\", status = 301, if-not-file = true }"
        );
        assert_eq!(inline(&V::Tab(vec![])), "{}");
    }
}
