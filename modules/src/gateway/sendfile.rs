//! X-Sendfile: a back end answers with a header naming a file, and the
//! server sends that file itself (lighttpd `x-sendfile` with
//! `X-Sendfile`/`X-LIGHTTPD-send-file`, Cherokee's `xsendfile`, nginx
//! `X-Accel-Redirect`).
//!
//! - `X-Sendfile: /abs/path` (and `X-LIGHTTPD-send-file`): the file is
//!   served through `static-file` (open-file cache, validators, conditional
//!   requests, Range) when it lies inside one of `x-sendfile-docroot`
//!   (default: the vhost's document root). A path outside them, relative, or
//!   with `.`/`..` segments is refused with 403 and logged, as lighttpd does;
//!   a missing file is 404.
//! - `X-Accel-Redirect: /url/path`: an internal redirect to that path of the
//!   same vhost (nginx), which its rules and modules then serve.
//!
//! The back end's other fields (`Content-Disposition`, `Cache-Control`,
//! `Set-Cookie`, its `Content-Type`) are kept on a 200 or 206 for the file;
//! its body is dropped. A status other than 200, or a method other than GET
//! and HEAD, gets the whole file under the back end's status (lighttpd). Without `x-sendfile` the fields are dropped and the
//! back end's answer is sent as it is (never a path to the client).

use std::path::{Path, PathBuf};

use tessera_core::actix_web::http::header;
use tessera_core::actix_web::http::{Method, StatusCode};
use tessera_core::actix_web::HttpResponse;
use tessera_core::response::error_response;
use tessera_core::Ctx;

use super::Head;
use crate::static_file::StaticFile;

/// The X-Sendfile settings of one back-end module instance.
pub struct XSendfile {
    /// `(directory, its server)`; empty when `x-sendfile` is off.
    roots: Vec<(PathBuf, StaticFile)>,
}

impl XSendfile {
    /// Off, or on for files inside `docroots` (existing directories,
    /// relative ones taken from `config_dir`; default `[document_root]` when
    /// empty). Errors: the key and why, for the configuration error.
    pub fn new(
        on: bool,
        docroots: &[PathBuf],
        document_root: &Path,
        config_dir: &Path,
    ) -> Result<Self, String> {
        if !on {
            if !docroots.is_empty() {
                return Err("x-sendfile-docroot: set, but x-sendfile is off".into());
            }
            return Ok(XSendfile { roots: Vec::new() });
        }
        let default = [document_root.to_path_buf()];
        let list = if docroots.is_empty() {
            &default[..]
        } else {
            docroots
        };
        let mut roots = Vec::new();
        for d in list {
            let real = config_dir
                .join(d)
                .canonicalize()
                .map_err(|e| format!("x-sendfile-docroot: \"{}\": {e}", d.display()))?;
            roots.push((real.clone(), StaticFile::for_directory(real)));
        }
        Ok(XSendfile { roots })
    }

    /// Whether X-Sendfile fields are honoured.
    pub fn is_on(&self) -> bool {
        !self.roots.is_empty()
    }

    /// The response for a head with `X-Sendfile`, when on; `None` to send
    /// the back end's own answer.
    ///
    /// - To a GET or HEAD under the back end's 200 (or 206), the file as
    ///   static-file serves it: validators, conditional requests, Range.
    /// - Under another status of the back end (`Status: 404` with an error
    ///   page's file), or to another method (a download answering a POST),
    ///   the whole file with the back end's status, as lighttpd does (it
    ///   keeps a status other than 200 and serves any method); no
    ///   validators unless the status is 200. A 205 has no content (RFC
    ///   9110 §15.3.6).
    /// - A file that cannot be served gives its own error (403, 404, 503),
    ///   or the back end's status when that is an error too.
    ///
    /// A full or partial answer keeps the back end's other fields; its
    /// Content-Type replaces the file's (not a multipart one), and its
    /// validators, coding and framing fields give way to the file's. A 304
    /// keeps its Cache-Control, Expires, Vary and Content-Location (RFC 9110
    /// §15.4.5).
    pub fn serve(&self, cx: &Ctx<'_>, head: &Head) -> Option<HttpResponse> {
        let named = head.sendfile.as_deref().filter(|_| self.is_on())?;
        let Some((root, inner)) = self.inside(named) else {
            tracing::warn!(
                vhost = %cx.vhost.label(),
                file = named,
                "x-sendfile: refused: not a clean absolute path inside x-sendfile-docroot"
            );
            return Some(error_response(StatusCode::FORBIDDEN));
        };
        let status = head.status;
        if status == StatusCode::RESET_CONTENT {
            // no content, by definition (RFC 9110 §15.3.6)
            return Some(HttpResponse::build(status).finish());
        }
        let as_file = matches!(status, StatusCode::OK | StatusCode::PARTIAL_CONTENT)
            && matches!(*cx.method(), Method::GET | Method::HEAD);
        let failed = |file_status: StatusCode| {
            error_response(if status.is_client_error() || status.is_server_error() {
                status
            } else {
                file_status
            })
        };
        let mut r = match root.serve_at(cx, &inner, !as_file) {
            Some(r) if !as_file && r.status() != StatusCode::OK => return Some(failed(r.status())),
            Some(r) => r,
            None => return Some(failed(StatusCode::NOT_FOUND)),
        };
        if r.status() == StatusCode::OK || r.status() == StatusCode::PARTIAL_CONTENT {
            // several ranges: the type is multipart/byteranges (each part
            // names the file's own type)
            let multipart = r
                .headers()
                .get(header::CONTENT_TYPE)
                .is_some_and(|t| t.as_bytes().starts_with(b"multipart/byteranges"));
            for (k, v) in &head.fields {
                if *k == header::CONTENT_TYPE {
                    if !multipart {
                        r.headers_mut().insert(k.clone(), v.clone());
                    }
                } else if !describes_the_file(k) {
                    r.headers_mut().append(k.clone(), v.clone());
                }
            }
            if !as_file && status != StatusCode::OK {
                // the body of another status: the file's validators are not
                // that answer's
                for k in [header::ETAG, header::LAST_MODIFIED, header::ACCEPT_RANGES] {
                    r.headers_mut().remove(k);
                }
                *r.status_mut() = status;
            }
        } else if r.status() == StatusCode::NOT_MODIFIED {
            // RFC 9110 §15.4.5: the fields a 200 would have had that a
            // cache needs
            for (k, v) in &head.fields {
                if matches!(
                    *k,
                    header::CACHE_CONTROL
                        | header::EXPIRES
                        | header::VARY
                        | header::CONTENT_LOCATION
                ) {
                    r.headers_mut().append(k.clone(), v.clone());
                }
            }
        }
        Some(r)
    }

    /// The docroot's server and the path inside it (`/`-prefixed) of an
    /// absolute, clean file path; `None` when it is outside every docroot or
    /// not clean.
    fn inside(&self, named: &str) -> Option<(&StaticFile, String)> {
        let p = Path::new(named);
        // (a trailing `/` names a directory: `Path` would drop it)
        if !p.is_absolute()
            || named.ends_with('/')
            || named.contains('\0')
            || named.split('/').any(|seg| seg == "." || seg == "..")
        {
            return None;
        }
        self.roots.iter().find_map(|(dir, server)| {
            let rest = p.strip_prefix(dir).ok()?;
            let rest = rest.to_str()?;
            (!rest.is_empty()).then(|| (server, format!("/{rest}")))
        })
    }
}

/// Fields static-file sets from the file it serves: the back end's would
/// describe its own body (a Content-Encoding, too: the file is sent as it
/// is), and a second ETag or Last-Modified would not be the one conditional
/// requests were checked against (nginx `X-Accel-Redirect` takes the
/// validators from the file too).
fn describes_the_file(k: &header::HeaderName) -> bool {
    [
        header::ETAG,
        header::LAST_MODIFIED,
        header::ACCEPT_RANGES,
        header::CONTENT_RANGE,
        header::CONTENT_LENGTH,
        header::CONTENT_ENCODING,
    ]
    .contains(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_clean_paths_inside_a_docroot() {
        let dir = std::env::temp_dir();
        let x = XSendfile::new(true, &[], &dir, &dir).unwrap();
        let real = dir.canonicalize().unwrap();
        let inside = format!("{}/a/b.bin", real.display());
        assert_eq!(x.inside(&inside).map(|(_, p)| p), Some("/a/b.bin".into()));
        assert!(x
            .inside(&format!("{}/../etc/passwd", real.display()))
            .is_none());
        assert!(x.inside(&format!("{}/./a", real.display())).is_none());
        assert!(x.inside("/etc/passwd").is_none());
        assert!(x.inside("relative/a").is_none());
        assert!(x.inside(&format!("{}", real.display())).is_none());
        // a sibling whose name starts the same is outside
        assert!(x.inside(&format!("{}-other/a", real.display())).is_none());
        assert!(XSendfile::new(true, &[PathBuf::from("no-such-dir-here")], &dir, &dir).is_err());
        assert!(XSendfile::new(false, std::slice::from_ref(&dir), &dir, &dir).is_err());
    }
}
