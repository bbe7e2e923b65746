//! Serving files: mod_indexfile, mod_staticfile (`static-file.*`,
//! `etag.use-*`, `mimetype.assign`), `server.follow-symlink`, the error pages
//! (`server.errorfile-prefix`, `server.error-handler-404`) and mod_dirlisting.

use super::value::Val;
use super::{Arg, Tr};
use crate::model::{Opt, V};
use crate::report::{Report, Src};
use crate::tessera::{builtin_mime, normalize_mime};

impl Tr<'_> {
    /// The options of mod_indexfile, mod_staticfile, mod_dirlisting and the error pages.
    pub(super) fn static_file_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { ctx, key, src, val } = *a;
        let opt = |module, k, v| a.opt(module, k, v);
        let bool_of = |report: &mut Report| -> Option<bool> {
            let b = val.as_bool();
            if b.is_none() {
                report.dropped(src, key, format!("{} is not a boolean", val.show()));
            }
            b
        };
        Some(match key {
            "index-file.names" | "server.indexfiles" => {
                let mut names = Vec::new();
                for n in val.as_list() {
                    if n.contains('/') || n.is_empty() {
                        report.approximated(
                            src,
                            key,
                            format!(
                                "\"{n}\" is not a plain file name (a front controller); left out"
                            ),
                        );
                    } else if !names.contains(&n) {
                        names.push(n);
                    }
                }
                report.translated(src, key, "static-file index-files");
                let mut out = Vec::new();
                let backends = self.backend_modules();
                if !backends.is_empty() {
                    report.translated(
                        src,
                        key,
                        format!("index-files of {}: the names each back end would run (index.php goes to fastcgi where lighttpd runs it)", backends.join(", ")),
                    );
                    for m in backends {
                        out.push(opt(m, "index-names", V::strs(names.clone())));
                    }
                }
                out.push(opt("static-file", "index-files", V::strs(names)));
                out
            }
            "mimetype.assign" => vec![opt(
                "static-file",
                "mime-types",
                self.mime_types(val, src, report),
            )],
            "static-file.exclude-extensions" => {
                // lighttpd matches each entry as a plain suffix of the path
                // (".php", "php", "~"); Tessera's entries are suffixes of the
                // file name, so an entry without '/' means the same.
                let mut suffixes = Vec::new();
                for e in val.as_list() {
                    if e.contains('/') {
                        report.weaker(
                            src,
                            key,
                            format!("\"{e}\" holds a '/' (Tessera's entries are suffixes of a file name): the files it kept lighttpd from serving are now served as files; deny them by hand (access deny-suffixes)"),
                        );
                    } else if !suffixes.contains(&e) {
                        suffixes.push(e);
                    }
                }
                report.translated(
                    src,
                    key,
                    format!(
                        "static-file exclude-extensions = {:?}: each entry a suffix of the file name, as in lighttpd (compared case-insensitively: Tessera also excludes x.PHP for \"php\")",
                        suffixes
                    ),
                );
                vec![opt("static-file", "exclude-extensions", V::strs(suffixes))]
            }
            "static-file.etags" => {
                let Some(b) = bool_of(report) else {
                    return Some(Vec::new());
                };
                report.translated(src, key, "static-file etag");
                vec![opt("static-file", "etag", V::Bool(b))]
            }
            "etag.use-inode" | "etag.use-mtime" | "etag.use-size" => {
                let Some(b) = bool_of(report) else {
                    return Some(Vec::new());
                };
                let all_off = ["etag.use-inode", "etag.use-mtime", "etag.use-size"]
                    .iter()
                    .all(|k| {
                        *k == key && !b
                            || self
                                .ctx(ctx)
                                .get(k)
                                .is_some_and(|x| x.val.as_bool() == Some(false))
                    });
                if all_off {
                    report.translated(
                        src,
                        key,
                        "static-file etag = false (every etag.use-* is disabled)",
                    );
                    return Some(vec![opt("static-file", "etag", V::Bool(false))]);
                }
                report.approximated(
                    src,
                    key,
                    "Tessera's ETag is always built from modification time and size",
                );
                Vec::new()
            }
            "server.follow-symlink" => {
                let Some(b) = bool_of(report) else {
                    return Some(Vec::new());
                };
                let p = if b { "always" } else { "never" };
                report.translated(
                    src,
                    key,
                    format!("static-file and dir-listing follow-symlinks = \"{p}\""),
                );
                vec![
                    opt("static-file", "follow-symlinks", V::s(p)),
                    opt("dir-listing", "follow-symlinks", V::s(p)),
                ]
            }
            "server.errorfile-prefix" => {
                let Some(p) = val.as_string() else {
                    return Some(Vec::new());
                };
                report.translated(src, key, "error-pages prefix");
                vec![opt("error-pages", "prefix", V::s(p))]
            }
            "server.error-handler-404" => {
                let Some(p) = val.as_string() else {
                    return Some(Vec::new());
                };
                let ext = p.rsplit('.').next().unwrap_or("");
                if matches!(ext, "html" | "htm" | "txt") && !p.contains('?') {
                    let rel = p.trim_start_matches('/').to_owned();
                    report.approximated(src, key, format!("error-pages pages.404 = \"{rel}\" (the page is sent with status 404; lighttpd would run it as a request)"));
                    vec![opt("error-pages", "pages", V::tab1("404", V::s(rel)))]
                } else {
                    report.dropped(
                        src,
                        key,
                        "a dynamic error handler (a script) is not supported",
                    );
                    Vec::new()
                }
            }
            "dir-listing.activate" | "server.dir-listing" => {
                let Some(b) = bool_of(report) else {
                    return Some(Vec::new());
                };
                report.translated(
                    src,
                    key,
                    format!("dir-listing {}", if b { "on" } else { "off" }),
                );
                vec![opt("dir-listing", "enabled", V::Bool(b))]
            }
            "dir-listing.hide-dotfiles" => {
                let Some(b) = bool_of(report) else {
                    return Some(Vec::new());
                };
                report.translated(src, key, format!("dir-listing hidden-files = {}", !b));
                vec![opt("dir-listing", "hidden-files", V::Bool(!b))]
            }
            "dir-listing.show-readme" | "dir-listing.show-header" => {
                let (k, default) = if key.ends_with("readme") {
                    ("readme-file", "README.txt")
                } else {
                    ("header-file", "HEADER.txt")
                };
                let file = match val.as_bool() {
                    Some(true) => Some(default.to_owned()),
                    Some(false) => None,
                    None => val.as_string(),
                };
                report.translated(src, key, format!("dir-listing {k}"));
                match file {
                    Some(f) => vec![opt("dir-listing", k, V::s(f))],
                    None => vec![opt("dir-listing", k, V::s(""))],
                }
            }
            _ => return None,
        })
    }

    fn mime_types(&self, val: &Val, src: &Src, report: &mut Report) -> V {
        let mut out: Vec<(String, V)> = Vec::new();
        let mut multi = Vec::new();
        let mut base = Vec::new();
        let mut same = 0usize;
        for (k, t) in val.as_pairs() {
            if k.is_empty() {
                if normalize_mime(&t) != "application/octet-stream" {
                    report.approximated(src, "mimetype.assign", format!("the default \"\" => \"{t}\": Tessera sends application/octet-stream for unknown extensions"));
                }
                continue;
            }
            let Some(ext) = k.strip_prefix('.') else {
                base.push(k);
                continue;
            };
            if ext.contains('.') || ext.is_empty() {
                multi.push(k);
                continue;
            }
            let ext = ext.to_ascii_lowercase();
            if out.iter().any(|(e, _)| *e == ext) {
                continue;
            }
            if normalize_mime(&builtin_mime(&ext)) == normalize_mime(&t) {
                same += 1;
                continue;
            }
            out.push((ext, V::s(t)));
        }
        // lighttpd sends its default ("" entry, else application/octet-stream)
        // for every extension the list does not name; Tessera would send its
        // built-in type, which also changes which expires mime-types entries
        // apply. The common web extensions are written with lighttpd's type.
        let default_type = val
            .as_pairs()
            .iter()
            .find(|(k, _)| k.is_empty())
            .map_or_else(|| "application/octet-stream".to_owned(), |(_, t)| t.clone());
        let listed: Vec<String> = val
            .as_pairs()
            .iter()
            .filter_map(|(k, _)| k.strip_prefix('.').map(str::to_ascii_lowercase))
            .collect();
        let unlisted: Vec<&str> = crate::tessera::WEB_EXTENSIONS
            .iter()
            .copied()
            .filter(|e| !listed.iter().any(|l| l == e))
            .filter(|e| normalize_mime(&builtin_mime(e)) != normalize_mime(&default_type))
            .collect();
        if !unlisted.is_empty() {
            out.extend(
                unlisted
                    .iter()
                    .map(|e| ((*e).to_owned(), V::s(&default_type))),
            );
            report.translated(
                src,
                "mimetype.assign",
                format!(
                    "the common extensions it does not list ({}) are written as {default_type}, which lighttpd sends for them (Tessera's built-in types would differ, e.g. .{} is {}); rarer extensions it does not list get Tessera's built-in types",
                    unlisted.join(" "),
                    unlisted[0],
                    builtin_mime(unlisted[0])
                ),
            );
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        report.translated(
            src,
            "mimetype.assign",
            format!(
                "static-file mime-types: {} entries differ from Tessera's built-in types and are written, {same} are the same",
                out.len()
            ),
        );
        if !multi.is_empty() {
            report.approximated(src, "mimetype.assign", format!("keys with several dots ({}) cannot be expressed: Tessera looks at the last extension only", multi.join(", ")));
        }
        if !base.is_empty() {
            report.approximated(
                src,
                "mimetype.assign",
                format!("whole-name keys ({}) are not supported", base.join(", ")),
            );
        }
        V::Tab(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::lighttpd::test_util::*;

    /// `static-file.exclude-extensions` entries are suffixes in lighttpd
    /// (`"php"`, `"~"` included): every one is passed through as written,
    /// with a "translated" line; one with a `/` is a marked weakening.
    #[test]
    fn exclude_extensions_pass_through_as_suffixes() {
        let (t, r) = imp(concat!(
            "server.document-root = \"/\"\n",
            "static-file.exclude-extensions = ( \"php\", \".inc\", \"~\", \".php\", \"php\" )\n",
        ));
        let v: toml::Table = toml::from_str(&t).unwrap();
        let x: Vec<&str> = v["vhost"][0]["static-file"]["exclude-extensions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e.as_str())
            .collect();
        assert_eq!(x, ["php", ".inc", "~", ".php"], "{t}");
        let e: Vec<_> = r.find("static-file.exclude-extensions").collect();
        assert_eq!(e.len(), 1, "{r}");
        assert_eq!(e[0].outcome, crate::Outcome::Translated);
        assert!(e[0].message.contains("suffix of the file name"), "{r}");
        let (t, r) = imp(concat!(
            "server.document-root = \"/\"\n",
            "static-file.exclude-extensions = ( \".php\", \"/secret.txt\" )\n",
        ));
        assert!(t.contains("exclude-extensions = [\".php\"]"), "{t}");
        assert!(r.find("/secret.txt").any(|e| e.is_weaker()), "{r}");
    }

    /// Issue 11 #7: the common extensions a `mimetype.assign` leaves out get
    /// lighttpd's type for them (its "" default, else
    /// application/octet-stream), and the report names them.
    #[test]
    fn partial_mimetype_assign_keeps_lighttpds_default() {
        // The default vhost's static-file mime-types for a mimetype.assign.
        let mimes = |assign: &str| {
            let (t, r) = imp(&format!(
                "server.document-root = \"/\"\nmimetype.assign = ( {assign} )\n"
            ));
            let v: toml::Table = toml::from_str(&t).unwrap();
            let m = v["vhost"][0]["static-file"]["mime-types"].clone();
            (m.as_table().unwrap().clone(), r)
        };
        let (m, r) = mimes(r#"".html" => "text/html", ".css" => "text/css""#);
        assert_eq!(
            m["json"].as_str(),
            Some("application/octet-stream"),
            "{m:?}"
        );
        assert_eq!(m["png"].as_str(), Some("application/octet-stream"), "{m:?}");
        assert_eq!(m["css"].as_str(), Some("text/css"), "{m:?}");
        let e: Vec<_> = r.find("which lighttpd sends for them").collect();
        assert_eq!(e.len(), 1, "{r}");
        assert!(
            e[0].message.contains(" json ") && !e[0].message.contains(" css "),
            "{r}"
        );
        assert_eq!(e[0].src.line, 2, "{r}");
        // With a "" default, that type.
        let (m, _) = mimes(r#"".html" => "text/html", "" => "text/plain""#);
        assert_eq!(m["json"].as_str(), Some("text/plain"), "{m:?}");
    }
}
