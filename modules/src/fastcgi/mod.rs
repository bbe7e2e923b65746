//! `fastcgi`: scripts run by a FastCGI application, PHP's above all
//! (lighttpd mod_fastcgi `fastcgi.server`, Cherokee's `fcgi` handler, nginx
//! `fastcgi_pass` with `fastcgi_param`).
//!
//! ```toml
//! [[upstream]]
//! name = "php"
//! servers = ["unix:/run/php/php8.2-fpm.sock"]
//!
//! [vhost]
//! modules = ["access-log", "fastcgi", "static-file"]
//! [vhost.fastcgi]
//! upstream = "php"
//! ```
//!
//! An asynchronous content handler for paths whose script ends with one of
//! `extensions` (default `.php`): other paths pass on (to `static-file`).
//!
//! - **The script.** The path itself, or, for `/index.php/more`, the part up to
//!   the first segment that ends with an extension (`PATH_INFO` is the rest).
//!   A path is never split at a segment without the extension, so
//!   `/uploads/evil.jpg/x.php` names the script `/uploads/evil.jpg/x.php`,
//!   which does not exist, and `evil.jpg` is never executed (the classic
//!   `cgi.fix_pathinfo` hole of nginx with PHP). A directory path (`/`, `/a/`)
//!   runs its first existing `index-files` entry (default `index.php`).
//! - **check-local** (default on, lighttpd's option): a script that is not a
//!   regular file under the document root is 404 without calling the back end.
//! - **Parameters** (RFC 3875 §4.1): `GATEWAY_INTERFACE`, `SERVER_SOFTWARE`,
//!   `SERVER_NAME`, `SERVER_PORT`, `SERVER_ADDR`, `SERVER_PROTOCOL`,
//!   `REQUEST_METHOD`, `REQUEST_URI`, `QUERY_STRING`, `SCRIPT_NAME`,
//!   `SCRIPT_FILENAME`, `PATH_INFO`, `PATH_TRANSLATED`, `DOCUMENT_ROOT`,
//!   `REMOTE_ADDR`, `REMOTE_PORT`, `HTTPS` (`on` over TLS), `CONTENT_TYPE`,
//!   `CONTENT_LENGTH`, `REDIRECT_STATUS=200` (php-cgi's `cgi.force_redirect`),
//!   and `HTTP_*` for each request field except `Proxy` (the "httpoxy"
//!   attack), then `params` from the configuration.
//! - **Bodies.** A Content-Length body streams to the application as STDIN
//!   records; a chunked body is collected first (FastCGI needs its length),
//!   at most `max-body-size` bytes.
//! - **The answer.** CGI header lines; `Status:` sets the status (RFC 3875
//!   §6.3.3), a `Location:` without `Status:` gives 302. The body streams as it
//!   comes. STDERR lines go to the error log. An application that ends its
//!   connection before END_REQUEST makes the client's connection close without
//!   a proper end. Refused is 502 and a timeout 504, as for `proxy`.
//!
//! Not yet: connection reuse (FCGI_KEEP_CONN; each request opens a connection),
//! `bin-path` process management, and internal redirects for a local
//! `Location` (RFC 3875 §6.2.2; such an answer is a 302 here).

mod protocol;

use std::collections::HashMap;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use serde::Deserialize;
use tessera_core::actix_web::http::header::{self, HeaderName, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::module::ContentFuture;
use tessera_core::response::error_response;
use tessera_core::upstream::Upstream;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl};
use tokio::io::AsyncWriteExt;

use protocol::Record;

/// The largest CGI header block read from the application, bytes.
const MAX_HEAD: usize = 64 * 1024;

/// Options of `[vhost.fastcgi]` (or a rule's `fastcgi` table).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FastCgiConfig {
    /// The `[[upstream]]` of the FastCGI application. Required.
    #[serde(default)]
    pub upstream: String,
    /// Script extensions, with their dot. Default `[".php"]` (lighttpd's
    /// `fastcgi.server` key).
    #[serde(default = "default_extensions")]
    pub extensions: Vec<String>,
    /// A missing script is 404 without calling the back end. Default true
    /// (lighttpd `check-local`).
    #[serde(default = "yes")]
    pub check_local: bool,
    /// Scripts tried for a directory path. Default `["index.php"]`.
    #[serde(default = "default_index")]
    pub index_files: Vec<String>,
    /// Extra parameters (nginx `fastcgi_param`, lighttpd `bin-environment`
    /// for a spawned application); they come after, and may replace, the
    /// standard ones.
    #[serde(default)]
    pub params: HashMap<String, String>,
}

impl Default for FastCgiConfig {
    fn default() -> Self {
        FastCgiConfig {
            upstream: String::new(),
            extensions: default_extensions(),
            check_local: true,
            index_files: default_index(),
            params: HashMap::new(),
        }
    }
}

fn default_extensions() -> Vec<String> {
    vec![".php".into()]
}
fn default_index() -> Vec<String> {
    vec!["index.php".into()]
}
fn yes() -> bool {
    true
}

/// A configured `fastcgi` instance.
pub struct FastCgi {
    upstream: Arc<Upstream>,
    extensions: Vec<String>,
    check_local: bool,
    index_files: Vec<String>,
    params: Vec<(String, String)>,
}

impl ModuleDecl for FastCgi {
    const NAME: &'static str = "fastcgi";
    type Config = FastCgiConfig;

    fn build(cfg: FastCgiConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        if cfg.upstream.is_empty() {
            return Err("upstream: required (the name of an [[upstream]])".into());
        }
        let upstream = cx.upstreams.get(&cfg.upstream).cloned().ok_or_else(|| {
            format!(
                "upstream: \"{}\" is not declared (declared: {})",
                cfg.upstream,
                cx.upstreams.names().join(", ")
            )
        })?;
        for e in &cfg.extensions {
            if !e.starts_with('.') || e.len() < 2 || e.contains('/') {
                return Err(format!("extensions: \"{e}\" is not like \".php\""));
            }
        }
        for i in &cfg.index_files {
            if i.is_empty() || i.contains('/') {
                return Err(format!("index-files: \"{i}\" is not a file name"));
            }
        }
        let mut params: Vec<(String, String)> = cfg.params.into_iter().collect();
        params.sort();
        Ok(FastCgi {
            upstream,
            extensions: cfg.extensions,
            check_local: cfg.check_local,
            index_files: cfg.index_files,
            params,
        })
    }
}

impl Module for FastCgi {
    fn hooks(&self) -> Hooks {
        Hooks::ASYNC
    }

    fn content_async<'a>(&'a self, cx: &'a mut Ctx<'_>) -> Option<ContentFuture<'a>> {
        let (script, path_info) = self.script(cx.path(), &cx.vhost.document_root)?;
        Some(Box::pin(self.run(cx, script, path_info)))
    }
}

impl FastCgi {
    fn is_script(&self, name: &str) -> bool {
        self.extensions.iter().any(|e| name.ends_with(e.as_str()))
    }

    /// The script and `PATH_INFO` of `path`, or `None` when this module does
    /// not take the request (no script extension).
    fn script(&self, path: &str, root: &Path) -> Option<(String, String)> {
        if path.ends_with('/') {
            let found = self.index_files.iter().find(|i| {
                std::fs::metadata(root.join(format!("{}{i}", &path[1..])))
                    .is_ok_and(|m| m.is_file())
            })?;
            return self
                .is_script(found)
                .then(|| (format!("{path}{found}"), String::new()));
        }
        // the first segment ending with an extension ends the script name
        let mut end = 0;
        for seg in path.split_inclusive('/') {
            end += seg.len();
            let name = seg.trim_end_matches('/');
            if self.is_script(name) {
                let cut = end - (seg.len() - name.len());
                return Some((path[..cut].to_string(), path[cut..].to_string()));
            }
        }
        None
    }

    async fn run(&self, cx: &mut Ctx<'_>, script: String, path_info: String) -> HttpResponse {
        let root = &cx.vhost.document_root;
        let filename = root.join(script.trim_start_matches('/'));
        if self.check_local && !std::fs::metadata(&filename).is_ok_and(|m| m.is_file()) {
            return error_response(StatusCode::NOT_FOUND);
        }
        let req = cx.req;
        // the body: Content-Length streams; chunked is collected first
        let length = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let chunked = req.headers().contains_key(header::TRANSFER_ENCODING);
        let mut body = cx
            .take_body()
            .filter(|_| chunked || length.is_some_and(|n| n > 0));
        let mut collected: Option<Bytes> = None;
        if chunked {
            let mut all = BytesMut::new();
            if let Some(b) = body.as_mut() {
                loop {
                    match std::future::poll_fn(|c| Pin::new(&mut *b).poll_next(c)).await {
                        // RequestBody stops at max-body-size (TooLarge below)
                        Some(Ok(chunk)) => all.extend_from_slice(&chunk),
                        Some(Err(tessera_core::request_body::BodyError::TooLarge { .. })) => {
                            return error_response(StatusCode::PAYLOAD_TOO_LARGE)
                        }
                        Some(Err(_)) => return error_response(StatusCode::BAD_REQUEST),
                        None => break,
                    }
                }
            }
            collected = Some(all.freeze());
            body = None;
        }
        let content_length = collected
            .as_ref()
            .map_or(length.unwrap_or(0), |c| c.len() as u64);
        // the parameters
        let mut params = BytesMut::with_capacity(2048);
        let mut put = |k: &str, v: &[u8]| protocol::pair(&mut params, k.as_bytes(), v);
        let scheme = req.connection_info().scheme().to_owned();
        let host = cx
            .host()
            .map(tessera_core::vhost::strip_port)
            .unwrap_or_default();
        let local = req.app_config().local_addr();
        let peer = req.peer_addr();
        put("GATEWAY_INTERFACE", b"CGI/1.1");
        put("SERVER_SOFTWARE", b"tessera");
        put("SERVER_NAME", host.as_bytes());
        put("SERVER_PORT", local.port().to_string().as_bytes());
        put("SERVER_ADDR", local.ip().to_string().as_bytes());
        put("SERVER_PROTOCOL", format!("{:?}", req.version()).as_bytes());
        put("REQUEST_METHOD", req.method().as_str().as_bytes());
        put(
            "REQUEST_URI",
            req.uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .as_bytes(),
        );
        put("QUERY_STRING", req.query_string().as_bytes());
        put("SCRIPT_NAME", script.as_bytes());
        put("SCRIPT_FILENAME", filename.as_os_str().as_encoded_bytes());
        put("DOCUMENT_ROOT", root.as_os_str().as_encoded_bytes());
        if !path_info.is_empty() {
            put("PATH_INFO", path_info.as_bytes());
            let translated = root.join(path_info.trim_start_matches('/'));
            put("PATH_TRANSLATED", translated.as_os_str().as_encoded_bytes());
        }
        if let Some(p) = peer {
            put("REMOTE_ADDR", p.ip().to_string().as_bytes());
            put("REMOTE_PORT", p.port().to_string().as_bytes());
        }
        if req.app_config().secure() {
            put("HTTPS", b"on");
        }
        put("REQUEST_SCHEME", scheme.as_bytes());
        if let Some(t) = req.headers().get(header::CONTENT_TYPE) {
            put("CONTENT_TYPE", t.as_bytes());
        }
        if body.is_some() || collected.is_some() {
            put("CONTENT_LENGTH", content_length.to_string().as_bytes());
        }
        put("REDIRECT_STATUS", b"200");
        if let Some(u) = &cx.user {
            put("REMOTE_USER", u.as_bytes());
        }
        for (k, v) in cx.headers().iter() {
            let name = k.as_str();
            if matches!(name, "content-type" | "content-length" | "proxy") {
                continue;
            }
            let mut key = String::with_capacity(5 + name.len());
            key.push_str("HTTP_");
            key.extend(name.chars().map(|c| {
                if c == '-' {
                    '_'
                } else {
                    c.to_ascii_uppercase()
                }
            }));
            put(&key, v.as_bytes());
        }
        for (k, v) in &self.params {
            put(k, v.as_bytes());
        }
        // the records
        let mut out = BytesMut::with_capacity(params.len() + 64);
        protocol::begin(&mut out);
        protocol::stream(&mut out, protocol::PARAMS, &params);
        protocol::record(&mut out, protocol::PARAMS, &[]);
        if let Some(c) = &collected {
            protocol::stream(&mut out, protocol::STDIN, c);
        }
        let u = &self.upstream.config;
        let Some(pick) = self.upstream.pick(peer.map(|p| p.ip()), &[]) else {
            return error_response(StatusCode::BAD_GATEWAY);
        };
        let server = self.upstream.servers[pick.index].address.clone();
        let (pick, mut io) = match pick.connect(None, "fastcgi").await {
            Ok(c) => c,
            Err(status) => return error_response(status),
        };
        let send = Duration::from_secs(u.send_timeout);
        let sent = async {
            io.write_all(&out).await?;
            if let Some(b) = body.as_mut() {
                let mut rec = BytesMut::with_capacity(protocol::MAX_CONTENT + 16);
                loop {
                    match std::future::poll_fn(|c| Pin::new(&mut *b).poll_next(c)).await {
                        Some(Ok(chunk)) => {
                            rec.clear();
                            protocol::stream(&mut rec, protocol::STDIN, &chunk);
                            io.write_all(&rec).await?;
                        }
                        Some(Err(e)) => {
                            return Err(std::io::Error::new(
                                std::io::ErrorKind::InvalidData,
                                e.to_string(),
                            ))
                        }
                        None => break,
                    }
                }
            }
            let mut end = BytesMut::with_capacity(8);
            protocol::record(&mut end, protocol::STDIN, &[]);
            io.write_all(&end).await
        };
        match tokio::time::timeout(send, sent).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                return error_response(if e.to_string().contains("max-body-size") {
                    StatusCode::PAYLOAD_TOO_LARGE
                } else {
                    StatusCode::BAD_REQUEST
                })
            }
            Ok(Err(e)) => {
                tracing::error!(upstream = %self.upstream.name, %server, "fastcgi: sending: {e}");
                pick.failed();
                return error_response(StatusCode::BAD_GATEWAY);
            }
            Err(_) => {
                pick.failed();
                return error_response(StatusCode::GATEWAY_TIMEOUT);
            }
        }
        let mut answer = Answer {
            io,
            buf: BytesMut::with_capacity(8192),
            pending: BytesMut::new(),
            read: Duration::from_secs(u.read_timeout),
            sleep: None,
            done: false,
            upstream: self.upstream.name.clone(),
        };
        let head = tokio::time::timeout(answer.read, answer.head()).await;
        let (status, fields) = match head {
            Ok(Ok(h)) => h,
            Ok(Err(why)) => {
                tracing::error!(upstream = %self.upstream.name, %server, "fastcgi: {why}");
                pick.failed();
                return error_response(StatusCode::BAD_GATEWAY);
            }
            Err(_) => {
                tracing::error!(upstream = %self.upstream.name, %server, "fastcgi: no answer (read-timeout)");
                pick.failed();
                return error_response(StatusCode::GATEWAY_TIMEOUT);
            }
        };
        pick.succeeded();
        let mut r = HttpResponse::build(status).streaming(answer);
        // the application's Content-Type, not the builder's default
        r.headers_mut().remove(header::CONTENT_TYPE);
        for (k, v) in fields {
            r.headers_mut().append(k, v);
        }
        r
    }
}

/// A connection to the application.
type Io = tessera_core::upstream::Connection;

/// The application's answer: records read from the connection, STDOUT
/// yielded as the body after the CGI header block.
struct Answer {
    io: Io,
    buf: BytesMut,
    /// STDOUT bytes not yet yielded (the start of the body after the head).
    pending: BytesMut,
    read: Duration,
    sleep: Option<Pin<Box<actix_rt::time::Sleep>>>,
    done: bool,
    upstream: String,
}

/// The application broke off or stalled while its body was being sent.
#[derive(Debug, thiserror::Error)]
#[error("fastcgi application: {0}")]
struct AnswerFailed(&'static str);

impl Answer {
    /// Reads records until the CGI header block is complete: the status and
    /// the fields to send.
    async fn head(&mut self) -> Result<Head, &'static str> {
        loop {
            let end = find_head_end(&self.pending);
            if let Some((end, skip)) = end {
                let head = self.pending.split_to(end);
                let _ = self.pending.split_to(skip);
                return parse_head(&head);
            }
            if self.pending.len() > MAX_HEAD {
                return Err("CGI header block too large");
            }
            match std::future::poll_fn(|cx| self.poll_record(cx)).await {
                Some(Ok(b)) => self.pending.extend_from_slice(&b),
                Some(Err(e)) => return Err(e.0),
                None => return Err("the application ended before its header block"),
            }
        }
    }

    /// The next STDOUT bytes; STDERR is logged on the way.
    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, AnswerFailed>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match protocol::next(&mut self.buf) {
                Ok(Some(Record::Stdout(b))) if !b.is_empty() => {
                    self.sleep = None;
                    return Poll::Ready(Some(Ok(b)));
                }
                Ok(Some(Record::Stderr(b))) => {
                    for line in String::from_utf8_lossy(&b).lines() {
                        tracing::warn!(upstream = %self.upstream, "fastcgi stderr: {line}");
                    }
                    continue;
                }
                Ok(Some(Record::End)) => {
                    self.done = true;
                    return Poll::Ready(None);
                }
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(why) => return Poll::Ready(Some(Err(AnswerFailed(why)))),
            }
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(16 * 1024);
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.buf) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Some(Err(AnswerFailed(
                        "the connection ended before END_REQUEST",
                    ))))
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(_)) => {
                    return Poll::Ready(Some(Err(AnswerFailed("the connection failed"))))
                }
                Poll::Pending => {
                    let read = self.read;
                    let sleep = self
                        .sleep
                        .get_or_insert_with(|| Box::pin(actix_rt::time::sleep(read)));
                    if std::future::Future::poll(sleep.as_mut(), cx).is_ready() {
                        return Poll::Ready(Some(Err(AnswerFailed(
                            "no bytes within read-timeout",
                        ))));
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl Stream for Answer {
    type Item = Result<Bytes, AnswerFailed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if !this.pending.is_empty() {
            return Poll::Ready(Some(Ok(this.pending.split().freeze())));
        }
        this.poll_record(cx)
    }
}

/// The end of the header block in `b`: `(end, separator length)`.
fn find_head_end(b: &[u8]) -> Option<(usize, usize)> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// A CGI header block: the status and the fields to send.
type Head = (StatusCode, Vec<(HeaderName, HeaderValue)>);

/// The CGI header block: `Status:` gives the status, `Location:` without it
/// 302 (RFC 3875 §6.3); the other fields are sent as they are.
fn parse_head(head: &[u8]) -> Result<Head, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "CGI header block is not text")?;
    let mut status = None;
    let mut location = false;
    let mut fields = Vec::new();
    for line in text.split('\n') {
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        let (k, v) = line
            .split_once(':')
            .ok_or("a CGI header line without a colon")?;
        let v = v.trim();
        if k.eq_ignore_ascii_case("status") {
            let code = v.split(' ').next().and_then(|c| c.parse::<u16>().ok());
            status = Some(
                code.and_then(|c| StatusCode::from_u16(c).ok())
                    .ok_or("a Status line without a valid code")?,
            );
            continue;
        }
        let name =
            HeaderName::from_bytes(k.trim().as_bytes()).map_err(|_| "an invalid header name")?;
        if name == header::LOCATION {
            location = true;
        }
        if matches!(
            name,
            header::CONNECTION | header::TRANSFER_ENCODING | header::CONTENT_LENGTH
        ) {
            continue;
        }
        let value = HeaderValue::from_str(v).map_err(|_| "an invalid header value")?;
        fields.push((name, value));
    }
    let status = status.unwrap_or(if location {
        StatusCode::FOUND
    } else {
        StatusCode::OK
    });
    Ok((status, fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module() -> FastCgi {
        let ups = tessera_core::upstream::Upstreams::build(vec![serde_json::from_value(
            serde_json::json!({"name": "php", "servers": ["127.0.0.1:9000"]}),
        )
        .unwrap()])
        .unwrap();
        FastCgi {
            upstream: ups.get("php").unwrap().clone(),
            extensions: default_extensions(),
            check_local: true,
            index_files: default_index(),
            params: Vec::new(),
        }
    }

    #[test]
    fn a_path_splits_only_after_a_script_extension() {
        let m = module();
        let root = Path::new("/nonexistent");
        assert_eq!(
            m.script("/index.php", root),
            Some(("/index.php".into(), String::new()))
        );
        assert_eq!(
            m.script("/a/index.php/more/x", root),
            Some(("/a/index.php".into(), "/more/x".into()))
        );
        // never at evil.jpg
        assert_eq!(
            m.script("/uploads/evil.jpg/x.php", root),
            Some(("/uploads/evil.jpg/x.php".into(), String::new()))
        );
        assert_eq!(m.script("/style.css", root), None);
    }

    #[test]
    fn cgi_heads_give_status_and_fields() {
        let (s, f) =
            parse_head(b"Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-A: b").unwrap();
        assert_eq!(s, StatusCode::NOT_FOUND);
        assert_eq!(f.len(), 2);
        let (s, _) = parse_head(b"Location: https://example.org/\n").unwrap();
        assert_eq!(s, StatusCode::FOUND);
        assert!(parse_head(b"garbage").is_err());
        assert_eq!(find_head_end(b"A: b\n\nbody"), Some((4, 2)));
    }
}
