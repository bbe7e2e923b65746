//! Where each table of a configuration file is written, for `tessera
//! explain`: the line of every `[[vhost]]`, `[[vhost.rule]]`, module table and
//! key, and the provenance comments `tessera import` writes above vhosts and
//! rules (`# when lighttpd.conf:12-20 $HTTP["url"] =~ "^/img/"`).
//!
//! Found by a second, span-aware parse of the file's text (`toml`'s
//! `DeTable`), keyed by the table path the loader uses in its messages:
//! `vhost[0]`, `vhost[0].headers`, `vhost[0].rule[2]`,
//! `vhost[0].rule[2].expires.url`. The `config` crate, which loads the file
//! with the `TESSERA_` environment overrides, keeps no positions. Built once
//! per load, never consulted per request.

use std::collections::HashMap;

use toml::de::{DeTable, DeValue};

/// Line numbers (1-based) and provenance comments by table path.
#[derive(Debug, Default, Clone)]
pub struct SourceMap {
    lines: HashMap<String, usize>,
    comments: HashMap<String, Vec<String>>,
}

impl SourceMap {
    /// Maps the TOML `text`. Text that does not parse gives an empty map (the
    /// loader reports the syntax error itself).
    pub fn parse(text: &str) -> SourceMap {
        let mut map = SourceMap::default();
        let Ok(top) = DeTable::parse(text) else {
            return map;
        };
        let starts: Vec<usize> = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let line_of = |offset: usize| starts.partition_point(|&s| s <= offset);
        let lines: Vec<&str> = text.lines().collect();
        let mut walk = Walk {
            map: &mut map,
            line_of: &line_of,
            lines: &lines,
        };
        walk.table(top.get_ref(), "");
        map
    }

    /// The line of the table or key at `path` (`vhost[0].rule[1].headers`).
    pub fn line(&self, path: &str) -> Option<usize> {
        self.lines.get(path).copied()
    }

    /// The comment lines (without `# `) written directly above the
    /// `[[vhost]]` or `[[vhost.rule]]` header at `path`; empty when none.
    pub fn comments(&self, path: &str) -> &[String] {
        self.comments.get(path).map_or(&[], Vec::as_slice)
    }

    /// Of [`SourceMap::comments`], the lines `tessera import` writes to name
    /// the source of a block: `when FILE:LINE-LINE CONDITION` and `options
    /// from FILE:LINE`.
    pub fn provenance(&self, path: &str) -> Vec<&str> {
        self.comments(path)
            .iter()
            .map(String::as_str)
            .filter(|c| c.starts_with("when ") || c.starts_with("options from "))
            .collect()
    }
}

struct Walk<'a, F> {
    map: &'a mut SourceMap,
    line_of: &'a F,
    lines: &'a [&'a str],
}

impl<F: Fn(usize) -> usize> Walk<'_, F> {
    fn table(&mut self, t: &DeTable<'_>, prefix: &str) {
        for (k, v) in t {
            let path = if prefix.is_empty() {
                k.get_ref().to_string()
            } else {
                format!("{prefix}.{}", k.get_ref())
            };
            self.map
                .lines
                .insert(path.clone(), (self.line_of)(v.span().start));
            match v.get_ref() {
                DeValue::Table(inner) => self.table(inner, &path),
                DeValue::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let DeValue::Table(inner) = item.get_ref() else {
                            continue;
                        };
                        let ip = format!("{path}[{i}]");
                        let line = (self.line_of)(item.span().start);
                        self.map.lines.insert(ip.clone(), line);
                        let above = self.comments_above(line);
                        if !above.is_empty() {
                            self.map.comments.insert(ip.clone(), above);
                        }
                        self.table(inner, &ip);
                    }
                }
                _ => {}
            }
        }
    }

    /// The contiguous `#` lines right above line `line` (1-based), in order,
    /// without rulers (`# -----`).
    fn comments_above(&self, line: usize) -> Vec<String> {
        let mut out = Vec::new();
        let mut n = line.saturating_sub(1);
        while n > 0 {
            let Some(c) = self.lines[n - 1].trim_start().strip_prefix('#') else {
                break;
            };
            let c = c.trim();
            if !c.is_empty() && !c.chars().all(|ch| ch == '-') {
                out.push(c.to_owned());
            }
            n -= 1;
        }
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_rules_and_provenance() {
        let text = "[server]\nlisten = []\n\n# a vhost\n[[vhost]]\nserver-names = [\"a\"]\nmodules = [\"headers\"]\n\n[vhost.headers]\nset = { X = \"1\" }\n\n# when l.conf:3-5 $HTTP[\"url\"] =~ \"^/a/\"\n# options from l.conf:4\n[[vhost.rule]]\nmatch = { path-prefix = \"/a/\" }\n[vhost.rule.headers]\nadd = { Y = \"2\" }\n\n[[vhost.rule]]\nname = \"b\"\n";
        let m = SourceMap::parse(text);
        assert_eq!(m.line("vhost[0]"), Some(5));
        assert_eq!(m.line("vhost[0].modules"), Some(7));
        assert_eq!(m.line("vhost[0].headers"), Some(9));
        assert_eq!(m.line("vhost[0].rule[0]"), Some(14));
        assert_eq!(m.line("vhost[0].rule[0].headers"), Some(16));
        assert_eq!(m.line("vhost[0].rule[1]"), Some(19));
        assert_eq!(m.comments("vhost[0]"), ["a vhost"]);
        assert_eq!(
            m.provenance("vhost[0].rule[0]"),
            [
                "when l.conf:3-5 $HTTP[\"url\"] =~ \"^/a/\"",
                "options from l.conf:4"
            ]
        );
        assert!(m.comments("vhost[0].rule[1]").is_empty());
        assert!(SourceMap::parse("[[vhost]").line("vhost[0]").is_none());
    }
}
