//! `tessera explain`: why a request gets the answer it gets.
//!
//! An [`Explanation`] is made by the server's own code, not a model of it:
//! the vhost comes from [`VhostTable::select_why`] (the selection requests
//! use, with its reason), the rules from [`Pipeline::evaluate_rules`] (the
//! evaluation [`Pipeline::resolve`] uses, with each rule's deciding
//! condition, [`crate::rule::Matcher::decide`]), the module instances from
//! [`Slot::chosen`], and the answer from the request path itself
//! ([`crate::server`]'s `respond`) run with an [`Observe`]r in dry mode:
//! request, content and response hooks run as for a real request (files are
//! opened, headers computed), but an asynchronous content handler (`proxy`,
//! `fastcgi`) only says which back end would get the request
//! ([`crate::Module::explain`]), and counters and the log phase are skipped.
//! Line numbers come from [`crate::config::source::SourceMap`].
//!
//! Two ways in: the command line ([`explain_url`], `tessera explain URL`),
//! and a running server, for a request carrying `X-Tessera-Explain: 1` from
//! an address in `[server] explain-from` ([`answer`]): the response is then
//! the explanation as JSON, in place of the answer. JSON in the body, not a
//! header, because an explanation is kilobytes of nested data (tables, lines)
//! while a header field is one line that proxies cap at a few KiB; and on the
//! request itself, not at a status path, because what is explained is that
//! request as it arrived: its listener, client address (after
//! `trusted-proxies`), Host and other fields.
//!
//! Nothing here runs for a request without the header: the request path's
//! observer is [`Unobserved`], whose reports compile to nothing.

mod text;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use actix_web::body::{BodySize, MessageBody};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::{HttpRequest, HttpResponse};
use serde::Serialize;

use crate::config::inherit::Inherit;
use crate::config::Config;
use crate::context::{request_host, Ctx};
use crate::module::{Hooks, Module};
use crate::pipeline::{Pipeline, Slot};
use crate::rule::MatchInput;
use crate::vhost::{Selected, VhostTable};

/// The request header that asks a running server for an explanation.
pub const HEADER: &str = "x-tessera-explain";

/// The phase in which a module answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A request-phase hook answered (a redirect, a refusal).
    Request,
    /// A content handler answered.
    Content,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Request => "request",
            Phase::Content => "content",
        }
    }
}

/// What the request path reports while it handles a request. Every method
/// has a no-op default; [`Unobserved`] keeps them all, so a real request pays
/// nothing for them.
pub(crate) trait Observe {
    /// Dry run: ask asynchronous content handlers to describe the request
    /// instead of sending it, and skip counters and the log phase.
    const DRY: bool = false;
    /// The protocol checks (or `https-redirect`) answered before any module.
    fn early(&mut self) {}
    /// A request-phase module rewrote the path to `path`.
    fn rewritten(&mut self, _path: &str) {}
    /// Module `m` answered in `phase`.
    fn answered(&mut self, _m: &Arc<dyn Module>, _phase: Phase, _cx: &Ctx<'_>) {}
    /// Asynchronous content handler `m` would send the request to a back
    /// end, as `what` says (dry runs only).
    fn back_end(&mut self, _m: &Arc<dyn Module>, _what: String) {}
    /// The response is ready: count it in its vhost's `counters` (status,
    /// announced body bytes, time since dispatch). An offloaded request
    /// counts it later, once it knows whether the answer is sent.
    fn counted(
        &mut self,
        counters: &Arc<crate::stats::VhostCounters>,
        status: u16,
        body_bytes: u64,
        took: std::time::Duration,
    ) {
        counters.record(status, body_bytes, took);
    }
}

/// The observer of every real request: no reports, no dry run.
pub(crate) struct Unobserved;

impl Observe for Unobserved {}

/// The observer of an explanation.
#[derive(Default)]
struct Recorder {
    early: bool,
    rewrites: Vec<String>,
    /// The answering instance (by address), the phase, and what it says it did.
    answered: Option<(*const (), Phase, Option<String>)>,
    back_end: bool,
}

impl Observe for Recorder {
    const DRY: bool = true;
    fn early(&mut self) {
        self.early = true;
    }
    fn rewritten(&mut self, path: &str) {
        self.rewrites.push(path.to_owned());
    }
    fn answered(&mut self, m: &Arc<dyn Module>, phase: Phase, cx: &Ctx<'_>) {
        self.answered = Some((Arc::as_ptr(m) as *const (), phase, m.explain(cx)));
    }
    fn back_end(&mut self, m: &Arc<dyn Module>, what: String) {
        self.answered = Some((Arc::as_ptr(m) as *const (), Phase::Content, Some(what)));
        self.back_end = true;
    }
}

/// Why a request gets its answer; `Display` gives the text `tessera
/// explain` prints, `Serialize` its `--json` form (also the running server's
/// answer).
#[derive(Debug, Serialize)]
pub struct Explanation {
    /// The configuration file.
    pub config: String,
    /// The request as explained.
    pub request: RequestInfo,
    /// Set when the protocol checks answered before vhost and rules (a bad
    /// Host, a path that climbs above the root, ...): the reason.
    pub refused: Option<String>,
    /// The vhost chosen, and why.
    pub vhost: VhostChoice,
    /// The decoded, normalized path the rules saw (after any rewrite).
    pub path: String,
    /// The paths internal rewrites produced, in order (rules are resolved
    /// again for each; `rules` and `modules` are those of the last).
    pub rewrites: Vec<String>,
    /// Every rule of the vhost, in order.
    pub rules: Vec<RuleTrace>,
    /// The module instances that run, in pipeline order.
    pub modules: Vec<ModuleUse>,
    /// Module names per phase, in the order their hooks run.
    pub phases: Phases,
    /// What answers.
    pub answer: Answer,
}

/// The explained request.
#[derive(Debug, Serialize)]
pub struct RequestInfo {
    /// Method.
    pub method: String,
    /// Request target as sent (path and query, or absolute form).
    pub target: String,
    /// The host as sent (absolute-form authority, else `Host`); vhost
    /// selection does not see it when the request was refused.
    pub host: Option<String>,
    /// The client address (after `trusted-proxies`).
    pub client: Option<String>,
    /// The listener that accepted it.
    pub listener: String,
    /// Whether it came over TLS.
    pub tls: bool,
}

/// The vhost chosen and why.
#[derive(Debug, Serialize)]
pub struct VhostChoice {
    /// Its label (first server name, or `#N`).
    pub label: String,
    /// Its position in the file (0-based).
    pub index: usize,
    /// Line of its `[[vhost]]` header.
    pub line: Option<usize>,
    /// `exact`, `wildcard`, `regex`, `default` or `no-host`.
    pub kind: &'static str,
    /// The name, suffix or pattern that matched, for the first three kinds.
    pub name: Option<String>,
    /// The comment lines above its `[[vhost]]` (an import names its source).
    pub comments: Vec<String>,
}

/// One rule and its outcome.
#[derive(Debug, Serialize)]
pub struct RuleTrace {
    /// Its label: the `name` key, or `rule[N]`.
    pub name: String,
    /// Line of its `[[vhost.rule]]` header.
    pub line: Option<usize>,
    /// Its match, as written (`any = [...]`).
    pub matcher: String,
    /// `final = true`.
    pub is_final: bool,
    /// `matched`, `not matched`, or `not evaluated` (after a matching final
    /// rule, or when the protocol checks answered).
    pub outcome: &'static str,
    /// The condition that decided, when evaluated.
    pub decided_by: Option<String>,
    /// The lines `tessera import` wrote above it naming its source block
    /// (`when lighttpd.conf:12-20 $HTTP["url"] =~ "^/img/"`).
    pub from: Vec<String>,
}

/// One module instance that runs, and where its table came from.
#[derive(Debug, Serialize)]
pub struct ModuleUse {
    /// Module name.
    pub name: String,
    /// Phases it joins: `request`, `content`, `response`, `log`.
    pub phases: Vec<&'static str>,
    /// `vhost` (the vhost's table, or defaults without one) or `rule`.
    pub source: &'static str,
    /// The rule whose table it is.
    pub rule: Option<String>,
    /// Line of the table (`[vhost.rule.expires]`, `[vhost.expires]`), or of
    /// the `modules` list for a module without a table.
    pub line: Option<usize>,
    /// For a rule's table: `inherited` (inherit = "keys"), `merged`
    /// ("extend") or `replaced` ("none"); see [`crate::config::inherit`].
    pub inherit: Option<&'static str>,
    /// Line of the vhost's table of the same module, which a rule's table
    /// inherits from or merges into.
    pub vhost_line: Option<usize>,
    /// The rule's provenance lines (see [`RuleTrace::from`]).
    pub from: Vec<String>,
    /// The effective table the instance was built from (`null`: defaults),
    /// the one `tessera -t` prints.
    pub table: serde_json::Value,
}

/// Module names per phase.
#[derive(Debug, Default, Serialize)]
pub struct Phases {
    /// Request phase.
    pub request: Vec<String>,
    /// Content phase.
    pub content: Vec<String>,
    /// Response phase.
    pub response: Vec<String>,
    /// Log phase.
    pub log: Vec<String>,
}

/// What answers the request.
#[derive(Debug, Serialize)]
pub struct Answer {
    /// The module that answered, or `core` (protocol checks, or no handler
    /// answered: the fallback status).
    pub by: String,
    /// `request` or `content`; `None` for the core.
    pub phase: Option<&'static str>,
    /// What it says it did: the file served, the back end that would get the
    /// request.
    pub detail: Option<String>,
    /// A back end answers: status and headers are the back end's, not shown.
    pub back_end: bool,
    /// Status, after the response phase (`None` for a back end).
    pub status: Option<u16>,
    /// Header fields, after the response phase, sorted by name, then
    /// `Content-Length` as it would be sent (no `Date`, which the connection
    /// adds).
    pub headers: Vec<(String, String)>,
}

/// Explains `req`, a request as the server received it, on `cfg`.
pub fn explain(cfg: &Arc<Config>, req: &HttpRequest) -> Explanation {
    let refused = crate::request::protocol_check(req, &cfg.server);
    let host = if refused.is_some() {
        None
    } else {
        request_host(req)
    };
    let listener = req.app_config().local_addr();
    let tls = req.app_config().secure();
    let (vhost, why) = cfg.vhosts.select_why(host, Some(listener), tls);
    let mut rec = Recorder::default();
    let res = {
        let fut = std::pin::pin!(crate::request::respond_observed(
            cfg, req, None, &mut rec, None
        ));
        match std::future::Future::poll(
            fut,
            &mut std::task::Context::from_waker(std::task::Waker::noop()),
        ) {
            std::task::Poll::Ready(r) => Some(r),
            // a dry run never waits for a back end
            std::task::Poll::Pending => None,
        }
    };
    let path = match rec.rewrites.last() {
        Some(p) => p.clone(),
        None => crate::path::normalize(req.uri().path())
            .map(|p| p.into_owned())
            .unwrap_or_else(|_| "/".to_owned()),
    };
    let refused = refused.map(|r| reason(r.status())).or_else(|| {
        crate::path::normalize(req.uri().path())
            .is_err()
            .then(|| "400 Bad Request: the path does not normalize (it climbs above the root, or has a NUL)".to_owned())
    });
    let early = refused.is_some() || rec.early;
    let p = &vhost.pipeline;
    let vkey = format!("vhost[{}]", vhost.info.index);
    let src = &cfg.sources;
    let input = MatchInput {
        path: &path,
        req: Some(req),
        document_root: &vhost.info.document_root,
        internal: false,
    };
    let mut matched = Vec::new();
    let mut rules: Vec<RuleTrace> = p
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let rkey = format!("{vkey}.rule[{i}]");
            RuleTrace {
                name: r.label.clone(),
                line: src.line(&rkey),
                matcher: r.matcher.describe(),
                is_final: r.is_final,
                outcome: "not evaluated",
                decided_by: None,
                from: src
                    .provenance(&rkey)
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            }
        })
        .collect();
    if !early {
        p.evaluate_rules(&input, |i, d| {
            rules[i].outcome = if d.matched { "matched" } else { "not matched" };
            rules[i].decided_by = Some(d.by.describe());
            if d.matched {
                matched.push(i);
            }
        });
    }
    let modules = modules(cfg, p, &vkey, &matched, &rules);
    let mut phases = Phases::default();
    for m in &modules {
        for ph in &m.phases {
            let list = match *ph {
                "request" => &mut phases.request,
                "content" => &mut phases.content,
                "response" => &mut phases.response,
                _ => &mut phases.log,
            };
            list.push(m.name.clone());
        }
    }
    let by = rec.answered.and_then(|(ptr, phase, detail)| {
        p.slots
            .iter()
            .find(|s| s.instances().any(|m| Arc::as_ptr(m) as *const () == ptr))
            .map(|s| (s.name.clone(), phase, detail))
    });
    let answer = answer_of(res, by, rec.back_end, early, req);
    Explanation {
        config: cfg.file.display().to_string(),
        request: RequestInfo {
            method: req.method().to_string(),
            target: req.uri().to_string(),
            host: request_host(req).map(str::to_owned),
            client: req.peer_addr().map(|a| a.ip().to_string()),
            listener: listener.to_string(),
            tls,
        },
        refused,
        vhost: vhost_choice(&cfg.vhosts, vhost.info.index, why, cfg),
        path,
        rewrites: rec.rewrites,
        rules,
        modules,
        phases,
        answer,
    }
}

fn reason(s: StatusCode) -> String {
    format!(
        "{} {}: refused by the protocol checks before any module",
        s.as_u16(),
        s.canonical_reason().unwrap_or("")
    )
}

fn vhost_choice(t: &VhostTable, index: usize, why: Selected<'_>, cfg: &Config) -> VhostChoice {
    let (kind, name) = match why {
        Selected::Exact(n) => ("exact", Some(n.to_owned())),
        Selected::Wildcard(n) => ("wildcard", Some(n.to_owned())),
        Selected::Regex(n) => ("regex", Some(n.to_owned())),
        Selected::NoHost => ("no-host", None),
        Selected::Default => ("default", None),
    };
    let key = format!("vhost[{index}]");
    VhostChoice {
        label: t.all()[index].label.clone(),
        index,
        line: cfg.sources.line(&key),
        kind,
        name,
        comments: cfg.sources.comments(&key).to_vec(),
    }
}

/// The slots that run for `matched`, in pipeline order.
fn used_slots<'p>(p: &'p Pipeline, matched: &'p [usize]) -> impl Iterator<Item = &'p Slot> + 'p {
    p.slots.iter().filter(|s| s.chosen(matched).is_some())
}

fn modules(
    cfg: &Config,
    p: &Pipeline,
    vkey: &str,
    matched: &[usize],
    rules: &[RuleTrace],
) -> Vec<ModuleUse> {
    let src = &cfg.sources;
    used_slots(p, matched)
        .filter_map(|slot| {
            let (rule, inst) = slot.chosen(matched)?;
            let h = inst.hooks();
            let phases = [
                (Hooks::REQUEST, "request"),
                (Hooks::CONTENT, "content"),
                (Hooks::ASYNC, "content"),
                (Hooks::RESPONSE, "response"),
                (Hooks::LOG, "log"),
            ]
            .into_iter()
            .filter(|(f, _)| h.contains(*f))
            .map(|(_, n)| n)
            .fold(Vec::new(), |mut v, n| {
                if !v.contains(&n) {
                    v.push(n);
                }
                v
            });
            let vhost_key = format!("{vkey}.{}", slot.name);
            let vhost_line = src.line(&vhost_key);
            Some(match rule {
                None => {
                    let table = slot.vhost_table.clone().unwrap_or_default();
                    ModuleUse {
                        name: slot.name.clone(),
                        phases,
                        source: "vhost",
                        rule: None,
                        line: vhost_line.or_else(|| src.line(&format!("{vkey}.modules"))),
                        inherit: None,
                        vhost_line: None,
                        from: Vec::new(),
                        table,
                    }
                }
                Some(ri) => {
                    let (mode, table) = slot
                        .rule_tables
                        .iter()
                        .find(|(r, _, _)| *r == ri)
                        .map(|(_, m, t)| (*m, t.clone()))
                        .unwrap_or((Inherit::None, serde_json::Value::Null));
                    let has_vhost_table = slot
                        .vhost_table
                        .as_ref()
                        .is_some_and(serde_json::Value::is_object);
                    ModuleUse {
                        name: slot.name.clone(),
                        phases,
                        source: "rule",
                        rule: Some(rules[ri].name.clone()),
                        line: src.line(&format!("{vkey}.rule[{ri}].{}", slot.name)),
                        inherit: Some(match (mode, has_vhost_table) {
                            (Inherit::None, _) | (_, false) => "replaced",
                            (Inherit::Keys, true) => "inherited",
                            (Inherit::Extend, true) => "merged",
                        }),
                        vhost_line: vhost_line.filter(|_| has_vhost_table && mode != Inherit::None),
                        from: rules[ri].from.clone(),
                        table,
                    }
                }
            })
        })
        .collect()
}

fn answer_of(
    res: Option<HttpResponse>,
    by: Option<(String, Phase, Option<String>)>,
    back_end: bool,
    early: bool,
    req: &HttpRequest,
) -> Answer {
    let (by, phase, detail) = match by {
        Some((n, p, d)) => (n, Some(p.as_str()), d),
        None => ("core".to_owned(), None, None),
    };
    if back_end {
        return Answer {
            by,
            phase,
            detail,
            back_end,
            status: None,
            headers: Vec::new(),
        };
    }
    let Some(res) = res else {
        return Answer {
            by,
            phase,
            detail: Some("the handler did not answer at once".into()),
            back_end,
            status: None,
            headers: Vec::new(),
        };
    };
    let mut headers: Vec<(String, String)> = res
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    // by name, so that output compares across runs (a multi-line field
    // keeps its lines' order)
    headers.sort_by(|a, b| a.0.cmp(&b.0));
    if let BodySize::Sized(n) = res.body().size() {
        let head_of_get = req.method() == Method::HEAD;
        if !head_of_get || n > 0 {
            headers.push(("content-length".into(), n.to_string()));
        }
    }
    let detail = detail.or_else(|| {
        (by == "core").then(|| {
            if early {
                "answered before any module (protocol checks, https-redirect, OPTIONS *)"
            } else {
                "no module answered: the core's fallback status (404, or 403 for a directory without an index file)"
            }
            .to_owned()
        })
    });
    Answer {
        by,
        phase,
        detail,
        back_end,
        status: Some(res.status().as_u16()),
        headers,
    }
}

/// The running server's side: for a request with `X-Tessera-Explain` from an
/// address in `[server] explain-from`, the explanation as JSON (`200`,
/// `Cache-Control: no-store`), to send instead of the answer. `None`
/// otherwise: the request is served as if the header were not there.
pub fn answer(cfg: &Arc<Config>, req: &HttpRequest) -> Option<HttpResponse> {
    req.headers().get(HEADER)?;
    let client = req.peer_addr()?.ip();
    if !cfg.server.explain_from.contains(client) {
        return None;
    }
    let body = serde_json::to_string_pretty(&explain(cfg, req)).ok()?;
    let mut r = HttpResponse::Ok()
        .content_type("application/json")
        .body(body + "\n");
    r.headers_mut().insert(
        actix_web::http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r.headers_mut().insert(
        actix_web::http::header::SERVER,
        HeaderValue::from_static("tessera"),
    );
    Some(r)
}

/// Why [`explain_url`] could not build its request.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The URL is neither `http://host/path`, `https://…` nor `/path`.
    #[error("\"{0}\" is not a URL (http://host/path, https://host/path) or a path (/path)")]
    Url(String),
    /// A `-H` value is not `Name: value`.
    #[error("\"{0}\" is not a header field (Name: value)")]
    Header(String),
    /// `-X` is not a method token.
    #[error("\"{0}\" is not a method")]
    Method(String),
}

/// A request for [`explain_url`], as `tessera explain` takes it.
#[derive(Debug, Clone)]
pub struct UrlRequest {
    /// `http://host[:port]/path?query`, `https://…`, or `/path` (then the
    /// host is the listener's address, as `curl http://127.0.0.1:8080/path`).
    pub url: String,
    /// Method. Default GET.
    pub method: String,
    /// Header fields, `Name: value`; a `Host` replaces the URL's host.
    pub headers: Vec<String>,
    /// The client address (the TCP peer; `trusted-proxies` then apply to it).
    pub from: IpAddr,
}

/// Explains the request `r` would be on `cfg`, without a server: the
/// request goes through an actix-web `App` service whose connection is the
/// listener the URL names (`https` URLs: the first `listen-tls` address; a
/// URL port that equals a listener's: that listener; else the first
/// `listen` address), with the same real-IP step as the server, then
/// [`explain`].
///
/// # Errors
/// A URL, header or method that does not parse.
pub async fn explain_url(cfg: Arc<Config>, r: &UrlRequest) -> Result<Explanation, ExplainError> {
    use actix_service::{Service, ServiceFactory};
    use actix_web::dev::{fn_service, ServiceRequest, ServiceResponse};
    let bad_url = || ExplainError::Url(r.url.clone());
    let (tls, rest) = if let Some(rest) = r.url.strip_prefix("https://") {
        (true, Some(rest))
    } else if let Some(rest) = r.url.strip_prefix("http://") {
        (false, Some(rest))
    } else if r.url.starts_with('/') {
        (false, None)
    } else {
        return Err(bad_url());
    };
    let (authority, target) = match rest {
        Some(rest) => match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (Some(&rest[..i]), rest[i..].to_owned()),
            Some(i) => (Some(&rest[..i]), format!("/{}", &rest[i..])),
            None => (Some(rest), "/".to_owned()),
        },
        None => (None, r.url.clone()),
    };
    if authority.is_some_and(str::is_empty) {
        return Err(bad_url());
    }
    let s = &cfg.server;
    let listeners: Vec<SocketAddr> = if tls { &s.listen_tls } else { &s.listen }
        .iter()
        .filter_map(|a| a.trim().parse().ok())
        .collect();
    let url_port = authority
        .map(crate::vhost::strip_port)
        .zip(authority)
        .and_then(|(h, a)| a[h.len()..].strip_prefix(':'))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(if tls { 443 } else { 80 });
    let listener = listeners
        .iter()
        .find(|a| a.port() == url_port)
        .or(listeners.first())
        .copied()
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], url_port)));
    let method = Method::from_bytes(r.method.as_bytes())
        .map_err(|_| ExplainError::Method(r.method.clone()))?;
    let mut tr = actix_web::test::TestRequest::default()
        .method(method)
        .uri(&target)
        .peer_addr(SocketAddr::new(r.from, 50000));
    let mut has_host = false;
    for h in &r.headers {
        let (n, v) = h
            .split_once(':')
            .ok_or_else(|| ExplainError::Header(h.clone()))?;
        let name = HeaderName::from_bytes(n.trim().as_bytes())
            .map_err(|_| ExplainError::Header(h.clone()))?;
        let value = HeaderValue::from_str(v.trim()).map_err(|_| ExplainError::Header(h.clone()))?;
        has_host |= name == actix_web::http::header::HOST;
        tr = tr.append_header((name, value));
    }
    if !has_host {
        let host = authority.map_or_else(|| listener.to_string(), str::to_owned);
        let value = HeaderValue::from_str(&host).map_err(|_| bad_url())?;
        tr = tr.insert_header((actix_web::http::header::HOST, value));
    }
    let out = std::rc::Rc::new(std::cell::RefCell::new(None));
    let slot = out.clone();
    let app = actix_web::App::new().default_service(fn_service(move |mut sreq: ServiceRequest| {
        let s = &cfg.server;
        if !s.trusted_proxies.is_empty() {
            crate::realip::apply(&mut sreq, &s.trusted_proxies, s.real_ip_header);
        }
        let (req, _) = sreq.into_parts();
        *slot.borrow_mut() = Some(explain(&cfg, &req));
        std::future::ready(Ok::<_, actix_web::Error>(ServiceResponse::new(
            req,
            HttpResponse::NoContent().finish(),
        )))
    }));
    let factory = actix_service::IntoServiceFactory::into_factory(app);
    let svc = factory
        .new_service(actix_web::dev::AppConfig::__priv_test_new(
            tls,
            listener.to_string(),
            listener,
        ))
        .await
        .map_err(|_| bad_url())?;
    let _ = svc.call(tr.to_request()).await;
    let e = out.borrow_mut().take();
    e.ok_or_else(bad_url)
}

impl Slot {
    /// Every instance of this slot (the vhost's and the rules').
    fn instances(&self) -> impl Iterator<Item = &Arc<dyn Module>> {
        self.vhost_instance
            .iter()
            .chain(self.rule_instances.iter().map(|(_, m)| m))
    }
}
