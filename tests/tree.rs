//! A large real tree (`/usr/share/doc`: thousands of files, odd names, symlinks)
//! served byte-exact: every regular file inside the document root, reached by
//! its percent-encoded path, comes back exactly as on disk; links that leave the
//! root are refused.

use std::path::{Path, PathBuf};

use crate::util::Server;

fn encode(rel: &str) -> String {
    let mut out = String::new();
    for b in rel.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            walk(&p, out);
        } else if ft.is_file() || ft.is_symlink() {
            out.push(p);
        }
    }
}

#[test]
fn every_file_of_a_real_tree_is_served_byte_exact() {
    let root = Path::new("/usr/share/doc");
    assert!(root.is_dir(), "/usr/share/doc is missing on this machine");
    let root = std::fs::canonicalize(root).unwrap();
    let cfg = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"{}\"\nmodules = [\"static-file\"]\n[vhost.static-file]\nhidden-files = true\nindex-files = []\n",
        root.display()
    );
    let s = Server::start(&cfg, |_| {});
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    assert!(files.len() > 500, "only {} files", files.len());
    let (mut served, mut refused, mut skipped) = (0, 0, 0);
    for f in files.iter().take(20_000) {
        let rel = f.strip_prefix(&root).unwrap();
        let Some(rel) = rel.to_str() else {
            skipped += 1; // non-UTF-8 names are not served (documented)
            continue;
        };
        let target = std::fs::canonicalize(f);
        let r = s.get(&format!("/{}", encode(rel)));
        match target {
            Ok(t) if t.starts_with(&root) && t.is_file() => {
                let want = std::fs::read(&t).unwrap();
                assert_eq!(r.status, 200, "{rel}");
                assert!(
                    r.body == want,
                    "{rel}: {} bytes, want {}",
                    r.body.len(),
                    want.len()
                );
                served += 1;
            }
            Ok(t) if t.is_file() => {
                assert_eq!(r.status, 403, "{rel} -> {} leaves the root", t.display());
                refused += 1;
            }
            _ => {
                // dangling link or a link to a directory
                assert!(
                    r.status == 404 || r.status == 301 || r.status == 403,
                    "{rel}: {}",
                    r.status
                );
                skipped += 1;
            }
        }
    }
    assert!(
        served > 500,
        "served {served}, refused {refused}, skipped {skipped}"
    );
}
