//! Debian's `/usr/share/lighttpd/create-mime.conf.pl`, re-done in Rust so that
//! `include_shell "/usr/share/lighttpd/create-mime.conf.pl"` can be imported
//! without running it: reads a `mime.types` file and writes the same
//! `mimetype.assign = ( … )` block the script prints (lighttpd 1.4.69-1).

use std::collections::HashMap;

/// `text/*` subtypes the script serves with `;charset=utf-8`.
const TEXT_UTF8: &[&str] = &[
    "css",
    "csv",
    "markdown",
    "plain",
    "x-bibtex",
    "x-boo",
    "x-c++hdr",
    "x-c++src",
    "x-chdr",
    "x-csh",
    "x-csrc",
    "x-dsrc",
    "x-diff",
    "x-haskell",
    "x-java",
    "x-lilypond",
    "x-literate-haskell",
    "x-makefile",
    "x-moc",
    "x-pascal",
    "x-perl",
    "x-python",
    "x-scala",
    "x-sh",
    "x-tcl",
    "x-tex",
];

/// The script's `%manual_conflicts_resolve`: extension -> (type -> replacement).
fn manual(ext: &str, mime: &str) -> Option<&'static str> {
    Some(match (ext, mime) {
        (".ra", "audio/x-pn-realaudio") => "audio/x-realaudio",
        (".otf", "application/font-sfnt" | "font/sfnt" | "font/ttf") => "font/ttf",
        (".ttf", "application/font-sfnt" | "font/otf" | "font/sfnt") => "font/ttf",
        (".woff", "application/font-woff") => "font/woff",
        (".asn", "chemical/x-ncbi-asn1-spec") => "application/octet-stream",
        (".ent", "chemical/x-ncbi-asn1-ascii") => "application/octet-stream",
        _ => return None,
    })
}

#[derive(Default)]
struct Table {
    ext: HashMap<String, String>,
    lc: HashMap<String, String>,
}

impl Table {
    fn set(&mut self, ext: &str, mime: &str) {
        self.ext.insert(ext.to_owned(), mime.to_owned());
        self.lc.insert(ext.to_lowercase(), ext.to_owned());
    }

    /// The script's `add`; returns the type after the manual conflict
    /// resolution, because the Perl code writes it back into the caller's
    /// variable (`$_[1] = …`), so later extensions of the same line get it too.
    fn add(&mut self, ext: &str, mime: &str) -> String {
        let mut ext = ext.to_owned();
        if let Some(seen) = self.lc.get(&ext.to_lowercase()) {
            if *seen != ext {
                ext = seen.clone();
            }
        }
        let mime = manual(&ext, mime).unwrap_or(mime).to_owned();
        self.add_resolved(&ext, &mime);
        mime
    }

    fn add_resolved(&mut self, ext: &str, mime: &str) {
        let (ext, mime) = (ext.to_owned(), mime.to_owned());
        let Some(have) = self.ext.get(&ext).cloned() else {
            self.set(&ext, &mime);
            return;
        };
        if have == mime || have == "application/octet-stream" {
            return;
        }
        let (have_type, have_sub) = have.split_once('/').unwrap_or((&have, ""));
        let (ty, sub) = mime.split_once('/').unwrap_or((&mime, ""));
        let have_x = have_type.starts_with("x-") || have_sub.starts_with("x-");
        let x = ty.starts_with("x-") || sub.starts_with("x-");
        if have_x && !x {
            self.set(&ext, &mime);
            return;
        } else if x && !have_x {
            return;
        }
        if sub == have_sub {
            if ty == "text" && have_type == "application" {
                self.set(&ext, &mime);
                return;
            } else if have_type == "text" && ty == "application" {
                return;
            }
        }
        let have_vnd = have_sub.starts_with("vnd.");
        let vnd = sub.starts_with("vnd.");
        if vnd != have_vnd {
            if have_vnd {
                self.set(&ext, &mime);
            }
            return;
        }
        self.set(&ext, "application/octet-stream");
    }
}

fn mime_cmp_value(m: &str) -> String {
    // s/(^|\/)(x-|vnd\.)/~$1$2/g
    let mut out = String::new();
    let mut at_start = true;
    let mut rest = m;
    while !rest.is_empty() {
        if at_start && (rest.starts_with("x-") || rest.starts_with("vnd.")) {
            out.push('~');
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        at_start = c == '/';
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The `mimetype.assign = ( … )` text the script prints for `mime_types` (the
/// contents of `/etc/mime.types`).
pub(crate) fn create_mime_conf(mime_types: &str) -> String {
    let mut t = Table::default();
    // The script's line pattern, as written in Perl.
    let re = fancy_regex::Regex::new(r"(?i)^([a-z0-9/+.-]+)\s+((?:[a-z0-9+.-]+[ ]?)+)$")
        .expect("constant pattern");
    for line in mime_types.lines() {
        let line = line.split('#').next().unwrap_or("");
        if line.chars().all(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Ok(Some(c)) = re.captures(line) else {
            continue;
        };
        let (Some(mime), Some(exts)) = (c.get(1), c.get(2)) else {
            continue;
        };
        let mut mime = mime.as_str().to_owned();
        for e in exts.as_str().split(' ').filter(|e| !e.is_empty()) {
            mime = t.add(&format!(".{e}"), &mime);
        }
    }
    t.add(".dtd", "application/xml-dtd");
    t.add(".js", "text/javascript");
    t.add(".mjs", "text/javascript");
    for (e, m) in [
        (".tar.gz", "application/x-gtar-compressed"),
        (".gz", "application/x-gzip"),
        (".tbz", "application/x-gtar-compressed"),
        (".tar.bz2", "application/x-gtar-compressed"),
        (".bz2", "application/x-bzip"),
        (".log", "text/plain"),
        (".conf", "text/plain"),
        (".spec", "text/plain"),
        ("README", "text/plain"),
        ("Makefile", "text/x-makefile"),
    ] {
        if !t.ext.contains_key(e) {
            t.add(e, m);
        }
    }
    let mut keys: Vec<&String> = t.ext.keys().collect();
    let dots = |s: &str| s.matches('.').count();
    keys.sort_by(|a, b| {
        dots(b)
            .cmp(&dots(a))
            .then_with(|| mime_cmp_value(&t.ext[*a]).cmp(&mime_cmp_value(&t.ext[*b])))
            .then_with(|| a.cmp(b))
    });
    let mut out = String::from(
        "# created by create-mime.conf.pl (re-done by tessera import)\nmimetype.assign = (\n",
    );
    for k in keys {
        let mut m = t.ext[k].clone();
        if let Some(sub) = m.strip_prefix("text/") {
            if TEXT_UTF8.contains(&sub) {
                m.push_str(";charset=utf-8");
            }
        }
        out.push_str(&format!("\t\"{k}\" => \"{m}\",\n"));
    }
    out.push_str("\t\"\" => \"application/octet-stream\"\n)\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_and_charsets() {
        let text = create_mime_conf(
            "# comment\ntext/css css\ntext/x-c c h\napplication/x-foo foo\napplication/foo foo\ntext/html html htm\napplication/javascript js\n",
        );
        assert!(
            text.contains("\".css\" => \"text/css;charset=utf-8\""),
            "{text}"
        );
        assert!(text.contains("\".html\" => \"text/html\""));
        assert!(text.contains("\".foo\" => \"application/foo\""));
        assert!(text.contains("\".js\" => \"text/javascript\""));
        assert!(text.contains("\".tar.gz\" => \"application/x-gtar-compressed\""));
        // Two-dot keys come first, the catch-all last.
        assert!(text.find(".tar.gz").unwrap() < text.find(".css").unwrap());
        assert!(text
            .trim_end()
            .ends_with("\"\" => \"application/octet-stream\"\n)"));
    }

    #[test]
    fn matches_the_debian_script_when_available() {
        // When Debian's lighttpd and perl are installed, compare with the real
        // script's output (the set of entries, not the formatting).
        let script = std::path::Path::new("/usr/share/lighttpd/create-mime.conf.pl");
        if !script.exists() || !std::path::Path::new("/etc/mime.types").exists() {
            return;
        }
        let Ok(out) = std::process::Command::new("perl").arg(script).output() else {
            return;
        };
        let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('"') && l.contains("=>"))
            .map(|l| l.trim_end_matches(',').to_owned())
            .collect();
        let ours: Vec<String> =
            create_mime_conf(&std::fs::read_to_string("/etc/mime.types").unwrap())
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with('"') && l.contains("=>"))
                .map(|l| l.trim_end_matches(',').to_owned())
                .collect();
        let first = ours.iter().zip(&theirs).position(|(a, b)| a != b);
        assert!(
            first.is_none() && ours.len() == theirs.len(),
            "first difference at {first:?}: ours {:?}, theirs {:?} ({} vs {} entries)",
            first.map(|i| &ours[i.saturating_sub(2)..(i + 3).min(ours.len())]),
            first.map(|i| &theirs[i.saturating_sub(2)..(i + 3).min(theirs.len())]),
            ours.len(),
            theirs.len()
        );
    }
}
