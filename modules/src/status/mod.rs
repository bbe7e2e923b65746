//! `status`: server counters since start, in plain text or the Prometheus text
//! exposition format (lighttpd mod_status, nginx stub_status, Cherokee
//! server_info). Put it on a rule (a path such as `/server-status`); access can
//! be limited by client address.
//!
//! ```toml
//! [[vhost.rule]]
//! match = { path-prefix = "/server-status" }
//! [vhost.rule.status]
//! allow = ["127.0.0.1", "::1"]   # default: everyone (put it behind a rule!)
//! format = "text"                # or "prometheus"; `?format=prometheus` also works
//! ```
//!
//! Counters: requests by vhost and status class, response bytes by vhost
//! (Content-Length of sized bodies), request durations by vhost (a
//! histogram, [`tessera_core::stats::DURATION_BOUNDS_US`]), active
//! connections, connections closed by `client-header-timeout` or
//! `send-timeout`, uptime in seconds, configuration generation (1 +
//! successful reloads), access-log lines written and dropped per file, and
//! per upstream server: requests, failures, up or down (passive and active
//! health), requests in flight, connections open and idle.
//!
//! Formats: `text`, `prometheus`, `json` (the same figures as one object,
//! see `json.rs`), and `html`: a live dashboard ([`DASHBOARD`], a static page
//! with its script inline, no outside resources) that polls the JSON form
//! every second and charts the last five minutes, like cherokee-admin's
//! status page.

mod json;

/// The dashboard page (`format=html`): HTML, CSS and a small script in one
/// file, no outside resources, no build step.
pub const DASHBOARD: &str = include_str!("dashboard.html");

use std::fmt::Write;
use std::sync::atomic::Ordering;

use ipnet::IpNet;
use serde::Deserialize;
use tessera_core::actix_web::http::header::{self, HeaderValue};
use tessera_core::actix_web::http::StatusCode;
use tessera_core::actix_web::HttpResponse;
use tessera_core::response::error_response;
use tessera_core::rule::{canonical_ip, parse_cidr};
use tessera_core::stats::DURATION_BOUNDS_US;
use tessera_core::{BuildContext, Ctx, Hooks, Module, ModuleDecl, Outcome};

/// Output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `key: value` lines (default).
    #[default]
    Text,
    /// Prometheus text exposition format 0.0.4.
    Prometheus,
    /// One JSON object (the `json` form the dashboard polls).
    Json,
    /// The live dashboard page, which polls the JSON form.
    Html,
}

/// Options of `[vhost.status]` (normally in a rule table).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StatusConfig {
    /// Client addresses or CIDR ranges allowed to see the page (403 for others).
    /// Default: everyone.
    #[serde(default)]
    pub allow: Vec<String>,
    /// `text` (default), `prometheus`, `json` or `html` (the dashboard);
    /// the query `format=...` overrides it per request.
    #[serde(default)]
    pub format: Format,
}

/// The `status` module instance.
pub struct Status {
    allow: Vec<IpNet>,
    format: Format,
    upstreams: Vec<std::sync::Arc<tessera_core::upstream::Upstream>>,
}

impl ModuleDecl for Status {
    const NAME: &'static str = "status";
    type Config = StatusConfig;

    fn build(cfg: StatusConfig, cx: &BuildContext<'_>) -> Result<Self, String> {
        let allow = cfg
            .allow
            .iter()
            .enumerate()
            .map(|(i, a)| parse_cidr(a).map_err(|e| format!("allow[{i}]: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Status {
            allow,
            format: cfg.format,
            upstreams: cx.upstreams.all().to_vec(),
        })
    }
}

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Escapes a Prometheus label value (`\`, `"`, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Renders the counters in `format`, with the servers of `upstreams`.
pub fn render(
    format: Format,
    upstreams: &[std::sync::Arc<tessera_core::upstream::Upstream>],
) -> String {
    let st = tessera_core::stats::global();
    let mut out = String::new();
    let uptime = st.uptime_secs();
    let generation = st.generation.load(Ordering::Relaxed);
    let conns = st.connections.load(Ordering::Relaxed).max(0);
    let timeouts = st.timeouts.load(Ordering::Relaxed);
    let vhosts = st.vhosts();
    let logs = st.log_files();
    match format {
        Format::Json => return json::render(upstreams),
        Format::Html => return DASHBOARD.to_string(),
        Format::Text => {
            let _ = writeln!(out, "uptime-seconds: {uptime}");
            let _ = writeln!(out, "config-generation: {generation}");
            let _ = writeln!(out, "connections-active: {conns}");
            let _ = writeln!(out, "connections-timed-out: {timeouts}");
            for v in &vhosts {
                let _ = write!(out, "vhost {}:", v.label);
                for (c, n) in CLASSES.iter().zip(&v.by_class) {
                    let _ = write!(out, " {c}={n}");
                }
                let _ = writeln!(
                    out,
                    " requests={} bytes={}",
                    v.by_class.iter().sum::<u64>(),
                    v.bytes
                );
            }
            for (p, w, d) in &logs {
                let _ = writeln!(
                    out,
                    "access-log {}: lines-written={w} lines-dropped={d}",
                    p.display()
                );
            }
            for u in upstreams {
                for s in &u.servers {
                    let _ = writeln!(
                        out,
                        "upstream {} server {}: state={} requests={} failures={} in-flight={} connections-open={} connections-idle={}",
                        u.name,
                        s.address,
                        if s.is_up() { "up" } else { "down" },
                        s.requests.load(Ordering::Relaxed),
                        s.failures.load(Ordering::Relaxed),
                        s.in_flight(),
                        s.open_connections.load(Ordering::Relaxed),
                        s.idle_connections.load(Ordering::Relaxed)
                    );
                }
            }
        }
        Format::Prometheus => {
            let _ = writeln!(
                out,
                "# HELP tessera_uptime_seconds Seconds since the server started."
            );
            let _ = writeln!(
                out,
                "# TYPE tessera_uptime_seconds gauge\ntessera_uptime_seconds {uptime}"
            );
            let _ = writeln!(
                out,
                "# HELP tessera_config_generation 1 plus the number of successful reloads."
            );
            let _ = writeln!(
                out,
                "# TYPE tessera_config_generation gauge\ntessera_config_generation {generation}"
            );
            let _ = writeln!(
                out,
                "# HELP tessera_connections_active Open client connections."
            );
            let _ = writeln!(
                out,
                "# TYPE tessera_connections_active gauge\ntessera_connections_active {conns}"
            );
            let _ = writeln!(
                out,
                "# HELP tessera_connections_timed_out_total Connections closed by client-header-timeout or send-timeout."
            );
            let _ = writeln!(
                out,
                "# TYPE tessera_connections_timed_out_total counter\ntessera_connections_timed_out_total {timeouts}"
            );
            let _ = writeln!(
                out,
                "# HELP tessera_requests_total Responses by vhost and status class."
            );
            let _ = writeln!(out, "# TYPE tessera_requests_total counter");
            for v in &vhosts {
                for (c, n) in CLASSES.iter().zip(&v.by_class) {
                    let _ = writeln!(
                        out,
                        "tessera_requests_total{{vhost=\"{}\",class=\"{c}\"}} {n}",
                        label(&v.label)
                    );
                }
            }
            let _ = writeln!(
                out,
                "# HELP tessera_response_bytes_total Response body bytes by vhost."
            );
            let _ = writeln!(out, "# TYPE tessera_response_bytes_total counter");
            for v in &vhosts {
                let _ = writeln!(
                    out,
                    "tessera_response_bytes_total{{vhost=\"{}\"}} {}",
                    label(&v.label),
                    v.bytes
                );
            }
            let _ = writeln!(
                out,
                "# HELP tessera_request_duration_seconds Time from a request's dispatch to its response head, by vhost."
            );
            let _ = writeln!(out, "# TYPE tessera_request_duration_seconds histogram");
            for v in &vhosts {
                let name = label(&v.label);
                let mut cumulative = 0;
                for (i, n) in v.duration_buckets.iter().enumerate() {
                    cumulative += n;
                    let le = DURATION_BOUNDS_US
                        .get(i)
                        .map_or_else(|| "+Inf".to_string(), |us| format!("{}", *us as f64 / 1e6));
                    let _ = writeln!(
                        out,
                        "tessera_request_duration_seconds_bucket{{vhost=\"{name}\",le=\"{le}\"}} {cumulative}"
                    );
                }
                let _ = writeln!(
                    out,
                    "tessera_request_duration_seconds_sum{{vhost=\"{name}\"}} {}",
                    v.duration_sum_us as f64 / 1e6
                );
                let _ = writeln!(
                    out,
                    "tessera_request_duration_seconds_count{{vhost=\"{name}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "# HELP tessera_access_log_lines_written_total Access-log lines written, by file."
            );
            let _ = writeln!(out, "# TYPE tessera_access_log_lines_written_total counter");
            for (p, w, _) in &logs {
                let _ = writeln!(
                    out,
                    "tessera_access_log_lines_written_total{{file=\"{}\"}} {w}",
                    label(&p.display().to_string())
                );
            }
            let _ = writeln!(
                out,
                "# HELP tessera_access_log_lines_dropped_total Access-log lines dropped, by file."
            );
            let _ = writeln!(out, "# TYPE tessera_access_log_lines_dropped_total counter");
            for (p, _, d) in &logs {
                let _ = writeln!(
                    out,
                    "tessera_access_log_lines_dropped_total{{file=\"{}\"}} {d}",
                    label(&p.display().to_string())
                );
            }
            let metrics: [(&str, &str, &str); 6] = [
                (
                    "tessera_upstream_requests_total",
                    "counter",
                    "Requests sent to an upstream server (reused connections and connects, failed ones included).",
                ),
                (
                    "tessera_upstream_failures_total",
                    "counter",
                    "Requests that failed at an upstream server (refused, timed out, broken).",
                ),
                (
                    "tessera_upstream_up",
                    "gauge",
                    "1 when the upstream server is up, 0 while passive or active health holds it down.",
                ),
                (
                    "tessera_upstream_in_flight",
                    "gauge",
                    "Requests in flight to an upstream server.",
                ),
                (
                    "tessera_upstream_connections_open",
                    "gauge",
                    "Connections open to an upstream server, busy and idle.",
                ),
                (
                    "tessera_upstream_connections_idle",
                    "gauge",
                    "Idle kept-alive connections to an upstream server.",
                ),
            ];
            if !upstreams.is_empty() {
                for (name, kind, help) in metrics {
                    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
                    for u in upstreams {
                        for s in &u.servers {
                            let v = match name {
                                "tessera_upstream_requests_total" => {
                                    s.requests.load(Ordering::Relaxed)
                                }
                                "tessera_upstream_failures_total" => {
                                    s.failures.load(Ordering::Relaxed)
                                }
                                "tessera_upstream_up" => u64::from(s.is_up()),
                                "tessera_upstream_connections_open" => {
                                    s.open_connections.load(Ordering::Relaxed) as u64
                                }
                                "tessera_upstream_connections_idle" => {
                                    s.idle_connections.load(Ordering::Relaxed) as u64
                                }
                                _ => s.in_flight() as u64,
                            };
                            let _ = writeln!(
                                out,
                                "{name}{{upstream=\"{}\",server=\"{}\"}} {v}",
                                label(&u.name),
                                label(&s.address.to_string())
                            );
                        }
                    }
                }
            }
        }
    }
    out
}

impl Module for Status {
    fn hooks(&self) -> Hooks {
        Hooks::REQUEST
    }

    fn on_request(&self, cx: &mut Ctx<'_>) -> Outcome {
        // the address check comes first: a refused client learns nothing of
        // the endpoint, not even the methods it allows
        if !self.allow.is_empty() {
            let ok = cx
                .req
                .peer_addr()
                .is_some_and(|a| self.allow.iter().any(|n| n.contains(&canonical_ip(a.ip()))));
            if !ok {
                return Outcome::Respond(error_response(StatusCode::FORBIDDEN));
            }
        }
        let m = cx.method();
        if m != tessera_core::actix_web::http::Method::GET
            && m != tessera_core::actix_web::http::Method::HEAD
        {
            let mut r = error_response(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return Outcome::Respond(r);
        }
        let format = match cx
            .query()
            .split('&')
            .find_map(|kv| kv.strip_prefix("format="))
        {
            Some("prometheus") => Format::Prometheus,
            Some("text") => Format::Text,
            Some("json") => Format::Json,
            Some("html") => Format::Html,
            _ => self.format,
        };
        let ctype = match format {
            Format::Text => "text/plain; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::Json => "application/json",
            Format::Html => "text/html; charset=utf-8",
        };
        let mut r = HttpResponse::Ok().body(render(format, &self.upstreams));
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if format == Format::Html {
            // the page talks to its own origin only
            r.headers_mut().insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(
                    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'",
                ),
            );
        }
        Outcome::Respond(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_both_formats() {
        tessera_core::stats::global().vhost("unit.test").record(
            204,
            10,
            std::time::Duration::from_micros(700),
        );
        let t = render(Format::Text, &[]);
        assert!(t.contains("vhost unit.test: 1xx=0 2xx=1"), "{t}");
        assert!(t.contains("config-generation: "), "{t}");
        let p = render(Format::Prometheus, &[]);
        assert!(
            p.contains("tessera_requests_total{vhost=\"unit.test\",class=\"2xx\"} 1"),
            "{p}"
        );
        assert!(
            p.contains("tessera_response_bytes_total{vhost=\"unit.test\"} 10"),
            "{p}"
        );
        assert!(p.contains("# TYPE tessera_connections_active gauge"), "{p}");
        assert!(
            p.contains(
                "tessera_request_duration_seconds_bucket{vhost=\"unit.test\",le=\"0.0005\"} 0"
            ),
            "{p}"
        );
        assert!(
            p.contains(
                "tessera_request_duration_seconds_bucket{vhost=\"unit.test\",le=\"0.001\"} 1"
            ),
            "{p}"
        );
        assert!(
            p.contains("tessera_request_duration_seconds_count{vhost=\"unit.test\"} 1"),
            "{p}"
        );
        let j: serde_json::Value = serde_json::from_str(&render(Format::Json, &[])).unwrap();
        let v = j["vhosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "unit.test")
            .unwrap();
        assert_eq!(v["requests"][1], 1);
        assert_eq!(v["duration"]["count"], 1);
        assert!(render(Format::Html, &[]).contains("<canvas"));
        assert_eq!(label("a\"b\\c"), "a\\\"b\\\\c");
    }
}
