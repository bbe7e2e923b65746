//! The `cherokee.conf` format (after Cherokee's `config_reader.c` and
//! `config_node.c`): one `key = value` per line, the key a path split on `!`.
//!
//! - The separator is exactly `" = "`; the first one splits the line.
//! - A line is a comment when its first non-blank character is `#`; there are
//!   no trailing comments (`#` in a value is data). Lines of 4 characters or
//!   fewer are ignored. Trailing spaces of key and value are trimmed.
//! - A repeated key replaces the value (the last wins).
//! - `include = PATH` reads a file, or each file of a directory (names
//!   starting with `.` or `#` or ending in `~` skipped; sorted here, Cherokee
//!   reads them in directory order); `try_include` ignores errors.
//! - Nodes whose children are all numbers are listed from the highest number
//!   down (Cherokee sorts them so).

use std::path::Path;

use crate::error::ImportError;
use crate::report::Src;

/// A node of the tree: an optional value and ordered children.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// The value, with where it was written.
    pub value: Option<(String, Src)>,
    /// Children in order of first appearance.
    pub children: Vec<(String, Node)>,
}

impl Node {
    /// The child named `name`.
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
    }

    /// The node at `path` (`"vserver!1!nick"`).
    pub fn get(&self, path: &str) -> Option<&Node> {
        let mut n = self;
        for part in path.split('!').filter(|p| !p.is_empty()) {
            n = n.child(part)?;
        }
        Some(n)
    }

    /// The value at `path`.
    pub fn val(&self, path: &str) -> Option<&str> {
        self.get(path)?.value.as_ref().map(|(v, _)| v.as_str())
    }

    /// Where the value at `path` was written.
    pub fn src(&self, path: &str) -> Option<&Src> {
        self.get(path)?.value.as_ref().map(|(_, s)| s)
    }

    /// The value at `path` read as Cherokee reads booleans (`atoi() != 0`).
    pub fn flag(&self, path: &str) -> Option<bool> {
        self.val(path).map(|v| {
            v.trim()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect::<String>()
                .parse::<i64>()
                .unwrap_or(0)
                != 0
        })
    }

    /// Numbered children (`rule!N`), highest number first; other children are
    /// skipped.
    pub fn numbered(&self) -> Vec<(u64, &Node)> {
        let mut v: Vec<(u64, &Node)> = self
            .children
            .iter()
            .filter_map(|(k, n)| k.parse::<u64>().ok().map(|i| (i, n)))
            .collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.0));
        v
    }

    /// The first source line found in this subtree (for reports).
    pub fn first_src(&self) -> Option<&Src> {
        if let Some((_, s)) = &self.value {
            return Some(s);
        }
        self.children.iter().find_map(|(_, c)| c.first_src())
    }

    /// Every `(path, value, src)` below this node, paths relative to it.
    pub fn leaves(&self) -> Vec<(String, &str, &Src)> {
        let mut out = Vec::new();
        fn walk<'a>(n: &'a Node, prefix: &str, out: &mut Vec<(String, &'a str, &'a Src)>) {
            if let Some((v, s)) = &n.value {
                out.push((prefix.to_owned(), v.as_str(), s));
            }
            for (k, c) in &n.children {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}!{k}")
                };
                walk(c, &p, out);
            }
        }
        walk(self, "", &mut out);
        out
    }

    fn set(&mut self, path: &[&str], value: String, src: Src) {
        let mut n = self;
        for part in path {
            let idx = match n.children.iter().position(|(k, _)| k == part) {
                Some(i) => i,
                None => {
                    n.children.push(((*part).to_owned(), Node::default()));
                    n.children.len() - 1
                }
            };
            n = &mut n.children[idx].1;
        }
        n.value = Some((value, src));
    }
}

/// Parses the file `path` (and its includes) into a tree.
///
/// # Errors
/// [`ImportError::Io`] when the file cannot be read, [`ImportError::Parse`] for
/// a line without `" = "`, [`ImportError::IncludeDepth`] for an include loop.
pub fn parse_file(path: &Path) -> Result<Node, ImportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ImportError::Io {
        path: path.to_owned(),
        source: e,
    })?;
    let mut root = Node::default();
    parse_into(&mut root, &path.display().to_string(), &text, 0)?;
    Ok(root)
}

/// Parses `text` (named `name` in messages) into a tree.
///
/// # Errors
/// As [`parse_file`].
pub fn parse_text(name: &str, text: &str) -> Result<Node, ImportError> {
    let mut root = Node::default();
    parse_into(&mut root, name, text, 0)?;
    Ok(root)
}

fn parse_into(root: &mut Node, name: &str, text: &str, depth: usize) -> Result<(), ImportError> {
    if depth > crate::lighttpd::parser::MAX_INCLUDE_DEPTH {
        return Err(ImportError::IncludeDepth {
            file: name.to_owned(),
            depth: crate::lighttpd::parser::MAX_INCLUDE_DEPTH,
        });
    }
    for (i, raw) in text.lines().enumerate() {
        let line_no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let line = raw.trim_start();
        if line.starts_with('#') || line.trim_end().len() <= 4 {
            continue;
        }
        let Some((k, v)) = line.split_once(" = ") else {
            return Err(ImportError::Parse {
                file: name.to_owned(),
                line: line_no,
                message: format!(
                    "expected \"key = value\" (with spaces around '='), found \"{}\"",
                    line.trim_end()
                ),
            });
        };
        let key = k.trim_end();
        let value = v.trim_end().to_owned();
        if key == "include" || key == "try_include" {
            let p = Path::new(&value);
            let mut files = Vec::new();
            if p.is_dir() {
                if let Ok(rd) = std::fs::read_dir(p) {
                    for e in rd.flatten() {
                        let n = e.file_name().to_string_lossy().into_owned();
                        if n.starts_with('.') || n.starts_with('#') || n.ends_with('~') {
                            continue;
                        }
                        files.push(e.path());
                    }
                }
                files.sort();
            } else {
                files.push(p.to_owned());
            }
            for f in files {
                match std::fs::read_to_string(&f) {
                    Ok(t) => parse_into(root, &f.display().to_string(), &t, depth + 1)?,
                    Err(e) if key == "include" => {
                        return Err(ImportError::Io { path: f, source: e })
                    }
                    Err(_) => {}
                }
            }
            continue;
        }
        let parts: Vec<&str> = key.split('!').collect();
        root.set(&parts, value, Src::new(name, line_no));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_and_order() {
        let t = parse_text(
            "c.conf",
            "# comment\nvserver!1!nick = default\nvserver!1!rule!1!match = default\nvserver!1!rule!100!match = directory\nvserver!1!rule!20!match = extensions\nvserver!1!nick = other\nx\nvserver!1!document_root = /a = b # not a comment\n",
        )
        .unwrap();
        assert_eq!(t.val("vserver!1!nick"), Some("other"));
        assert_eq!(t.src("vserver!1!nick").unwrap().line, 6);
        assert_eq!(
            t.val("vserver!1!document_root"),
            Some("/a = b # not a comment")
        );
        let prio: Vec<u64> = t
            .get("vserver!1!rule")
            .unwrap()
            .numbered()
            .iter()
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(prio, vec![100, 20, 1]);
        assert!(parse_text("c.conf", "server!port=80\n").is_err());
        assert_eq!(t.get("vserver!1").unwrap().leaves().len(), 5);
    }

    #[test]
    fn flags() {
        let t = parse_text("c", "a!b = 1\na!c = 0\na!d = 12x\n").unwrap();
        assert_eq!(t.flag("a!b"), Some(true));
        assert_eq!(t.flag("a!c"), Some(false));
        assert_eq!(t.flag("a!d"), Some(true));
        assert_eq!(t.flag("a!e"), None);
    }
}
