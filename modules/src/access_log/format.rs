//! Log formats: compiling an Apache/lighttpd format string into pieces at build
//! time, and writing one request's line from a [`LogRecord`].
//!
//! Directives follow Apache `mod_log_config` (which lighttpd `mod_accesslog` and
//! nginx's `combined` copy). Every value taken from the request is escaped the
//! Apache way (case B39): `"` as `\"`, `\` as `\\`, and any byte below 0x20 or at
//! or above 0x7F as `\xHH` (two upper-case hex digits, as nginx writes them), so a
//! hostile header can neither end a quoted field nor start a new line.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use tessera_core::actix_web::http::header::HeaderName;
use tessera_core::actix_web::http::Version;
use tessera_core::context::request_host;
use tessera_core::vhost::strip_port;
use tessera_core::LogRecord;

/// The Common Log Format (NCSA, Apache `common`, lighttpd's default):
/// `host ident authuser [date] "request" status bytes`.
pub const COMMON: &str = r#"%h %l %u %t "%r" %>s %b"#;

/// The Combined Log Format (Apache and nginx `combined`): [`COMMON`] followed by
/// `"referer" "user-agent"`.
pub const COMBINED: &str = r#"%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i""#;

/// Why a format string was refused at configuration time. Each variant carries
/// the offending directive or its byte offset in the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// A directive that is not supported, for example `%Z` (Apache says "Unrecognized
    /// LogFormat directive", nginx "unknown variable").
    #[error("unknown log format directive \"{0}\"")]
    UnknownDirective(String),
    /// `%{Name}o`: response headers are not known in the log phase.
    #[error("log format directive \"{0}\" (a response header) is not supported: response headers are not available to the access log")]
    ResponseHeader(String),
    /// `%{Name}i` with a name that is not a valid header name (RFC 9110 §5.1 token).
    #[error("log format directive \"{0}\" names an invalid header")]
    BadHeaderName(String),
    /// `%{` without the closing `}`, at this byte offset.
    #[error("unterminated \"%{{\" at byte {0} of the log format")]
    Unterminated(usize),
    /// A `%` (or `%>`/`%<`) at the very end of the format.
    #[error("log format ends with an incomplete directive \"{0}\"")]
    Incomplete(String),
    /// A control character (other than tab) in the literal text, at this byte
    /// offset: it would break the one-line-per-request rule.
    #[error("control character 0x{1:02X} at byte {0} of the log format (only tab is allowed)")]
    ControlChar(usize, u8),
    /// A format name (`combined`, `common`) written beside other text, as in
    /// `"combined %{request-id}n"`: it would be logged as a literal word.
    #[error("\"{0}\" is a format name: use it alone (format = \"{0}\"), or write %{{{0}}} to insert its fields among other directives")]
    KeywordNotAlone(String),
    /// A format without any directive that looks like a format name
    /// (`"comon"`, `"ncsa"`, `"main"`): it would log the same word on every line.
    #[error("\"{0}\" is not a format name (combined, common) and has no % directive")]
    UnknownKeyword(String),
}

/// One compiled element of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Text copied as configured.
    Literal(Box<str>),
    /// `%h`, `%a`: the peer's IP address, no port.
    ClientIp,
    /// `%l`: identd user, always `-`.
    Ident,
    /// `%u`: the authenticated user or `-`.
    User,
    /// `%t`: `[10/Oct/2000:13:55:36 +0000]`.
    Time,
    /// `%{%d/%b/%Y:%H:%M:%S %z}t`: `10/Oct/2000:13:55:36 +0000` (no brackets).
    TimeBare,
    /// `%{sec}t`, `%{msec}t`, `%{usec}t`: the time the line is written, since
    /// the epoch, in seconds, milliseconds (rounded up) or microseconds (rounded up).
    Epoch(TimeUnit),
    /// `%A`: the IP address of the listener that accepted the connection.
    LocalIp,
    /// `%p`, `%{local}p`, `%{canonical}p`: the listener's port.
    LocalPort,
    /// `%{remote}p`: the client's port.
    RemotePort,
    /// `%{raw}q`: the query without `?`, or nothing.
    RawQuery,
    /// `%{raw-or-dash}q`: the query without `?`, or `-`.
    RawQueryOrDash,
    /// `%r`: the request line as received.
    RequestLine,
    /// `%s`, `%>s`, `%<s`: the status.
    Status,
    /// `%b`: body bytes, `-` for none.
    BytesClf,
    /// `%B`: body bytes, `0` for none.
    Bytes,
    /// `%{Name}i`: a request header or `-`.
    RequestHeader(HeaderName),
    /// `%{name}n`: a note left by a module (Apache's notes; e.g. the request id).
    Note(Box<str>),
    /// `%D`, `%{us}T`: microseconds taken, rounded up.
    Micros,
    /// `%{ms}T`: milliseconds taken, rounded up.
    Millis,
    /// `%T`, `%{s}T`: seconds taken (whole-second clock at the end minus at
    /// the start).
    Seconds,
    /// `%v`: the vhost's label.
    VhostLabel,
    /// `%V`: the host as requested or `-`.
    Host,
    /// `%{no-port}V`: the host as requested without its port, or `-`.
    HostNoPort,
    /// `%U`: the URL path.
    Path,
    /// `%q`: `?query` or nothing.
    Query,
    /// `%m`: the method.
    Method,
    /// `%H`: the protocol, `HTTP/1.1`.
    Protocol,
}

/// The unit of an epoch time directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeUnit {
    Sec,
    Msec,
    Usec,
}

impl TimeUnit {
    /// The directive's name: `%{sec}t`, `%{msec}t`, `%{usec}t`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TimeUnit::Sec => "sec",
            TimeUnit::Msec => "msec",
            TimeUnit::Usec => "usec",
        }
    }
}

/// Format names, expanded when they stand alone or as `%{name}`.
const KEYWORDS: &[(&str, &str)] = &[("common", COMMON), ("combined", COMBINED)];

/// Checks the literal text of a format for format names: a format that is
/// only a word (no directive) must be a known name, and a known name must not
/// stand beside other fields as a word of its own.
fn check_keywords(spec: &str) -> Result<(), FormatError> {
    let word = |w: &str| w.len() > 2 && w.bytes().all(|b| b.is_ascii_alphabetic());
    if !spec.contains('%') && word(spec.trim()) {
        return Err(FormatError::UnknownKeyword(spec.trim().to_owned()));
    }
    // Words outside directives (text after a `%` directive letter or `{...}`
    // is skipped with it).
    let b = spec.as_bytes();
    let mut i = 0;
    let mut start = None;
    while i <= b.len() {
        let c = b.get(i).copied();
        match c {
            Some(b'%') => {
                // Skip the directive: `%{...}x`, `%>s`, `%x`.
                start = None;
                i += 1;
                if b.get(i) == Some(&b'{') {
                    i += spec[i..].find('}').map_or(spec.len() - i, |n| n + 1);
                }
                while matches!(b.get(i), Some(b'>' | b'<')) {
                    i += 1;
                }
                i += 1;
                continue;
            }
            Some(c) if c.is_ascii_alphabetic() => {
                start.get_or_insert(i);
            }
            _ => {
                if let Some(s) = start.take() {
                    let w = &spec[s..i];
                    if let Some((k, _)) = KEYWORDS.iter().find(|(k, _)| k.eq_ignore_ascii_case(w)) {
                        return Err(FormatError::KeywordNotAlone((*k).to_owned()));
                    }
                }
            }
        }
        i += 1;
    }
    Ok(())
}

/// A compiled log format: the format string split into literal text and
/// directives once, at build time, so that writing a line is a walk over a `Vec`.
///
/// Supported directives (Apache `mod_log_config` names and meanings):
///
/// | directive | value |
/// |---|---|
/// | `%h`, `%a` | client IP address from the peer address, without port (`::ffff:` mapped IPv4 written as IPv4); `-` when unknown |
/// | `%l` | identd user: always `-` |
/// | `%u` | authenticated user, or `-` |
/// | `%t` | request start time, UTC: `[10/Oct/2000:13:55:36 +0000]` |
/// | `%{%d/%b/%Y:%H:%M:%S %z}t` | the same without brackets (Cherokee `${now}`); no other strftime pattern |
/// | `%{sec}t`, `%{msec}t`, `%{usec}t` | time the line is written, since the epoch; ms and µs rounded up (lighttpd; Cherokee `${time_secs}`, `${time_msecs}`) |
/// | `%A` | IP address of the listener that accepted the connection (`0.0.0.0` for a wildcard one, as lighttpd logs it) |
/// | `%p`, `%{local}p`, `%{canonical}p` | the listener's port; `%{remote}p`: the client's port |
/// | `%r` | request line as received: `GET /a%22b?x=1 HTTP/1.1` (the target still percent-encoded; an absolute-form target in full) |
/// | `%>s`, `%s`, `%<s` | final status, three digits |
/// | `%b` | body bytes sent (after content-coding, without chunk framing), `-` when 0 (CLF) |
/// | `%B` | body bytes sent, `0` when 0 |
/// | `%{Name}i` | request header `Name` (case-insensitive; several fields joined by `, `), or `-` |
/// | `%D`, `%{us}T` | time taken, microseconds, rounded up (lighttpd; so never 0) |
/// | `%{ms}T` | time taken, milliseconds, rounded up (lighttpd) |
/// | `%T`, `%{s}T` | time taken, whole seconds: the seconds clock at the end minus at the start (lighttpd) |
/// | `%v` | the vhost's label (first server name) |
/// | `%V` | host as requested (target authority, else `Host`), or `-` |
/// | `%{no-port}V` | the same without its port (Cherokee `${http_host}`, `${vserver_name_req}`) |
/// | `%U` | URL path, still percent-encoded, without the query |
/// | `%q` | `?` and the query string, or nothing |
/// | `%{raw}q` | the query string without `?`, or nothing (lighttpd `%q`); `%{raw-or-dash}q`: or `-` (Cherokee `${query_string}`) |
/// | `%m` | method |
/// | `%H` | protocol: `HTTP/1.0`, `HTTP/1.1`, `HTTP/2.0` |
/// | `%%` | a literal `%` |
///
/// A format name stands alone (`"combined"`) or is inserted as `%{combined}` /
/// `%{common}` (not followed by a letter) among other directives; a name used
/// as a word beside other fields (`"combined %{request-id}n"`), or a format
/// that is one unknown word (`"comon"`), is refused.
///
/// `%{Name}o` (response header) is refused: the log phase does not see response
/// headers. Values from the request (`%r %u %{..}i %V %U %q %m`) are escaped as
/// the module documentation describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFormat {
    pub(crate) pieces: Vec<Piece>,
}

impl LogFormat {
    /// Compiles `spec`: `"common"` and `"combined"` name [`COMMON`] and
    /// [`COMBINED`]; anything else is a format string of directives.
    ///
    /// # Errors
    /// [`FormatError`] naming the unknown or unsupported directive, or the place
    /// of a malformed one.
    pub fn compile(spec: &str) -> Result<LogFormat, FormatError> {
        let spec = match KEYWORDS.iter().find(|(k, _)| *k == spec) {
            Some((_, f)) => *f,
            None => {
                check_keywords(spec)?;
                spec
            }
        };
        // `%{combined}` and `%{common}` (not followed by a letter) expand in place.
        let expanded;
        let spec = if KEYWORDS
            .iter()
            .any(|(k, _)| spec.contains(&format!("%{{{k}}}")))
        {
            let mut s = spec.to_owned();
            for (k, f) in KEYWORDS {
                let pat = format!("%{{{k}}}");
                let mut from = 0;
                while let Some(n) = s[from..].find(&pat) {
                    let at = from + n;
                    let end = at + pat.len();
                    if s[end..].starts_with(|c: char| c.is_ascii_alphabetic()) {
                        from = end;
                        continue;
                    }
                    s.replace_range(at..end, f);
                    from = at + f.len();
                }
            }
            expanded = s;
            expanded.as_str()
        } else {
            spec
        };
        let bytes = spec.as_bytes();
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b != b'%' {
                // Copy a whole UTF-8 run up to the next `%`.
                let end = spec[i..].find('%').map_or(spec.len(), |n| i + n);
                if let Some((n, &c)) = bytes[i..end]
                    .iter()
                    .enumerate()
                    .find(|(_, &c)| (c < 0x20 && c != b'\t') || c == 0x7F)
                {
                    return Err(FormatError::ControlChar(i + n, c));
                }
                lit.push_str(&spec[i..end]);
                i = end;
                continue;
            }
            let start = i;
            i += 1;
            let mut arg: Option<&str> = None;
            if bytes.get(i) == Some(&b'{') {
                let close = spec[i..]
                    .find('}')
                    .ok_or(FormatError::Unterminated(start))?;
                arg = Some(&spec[i + 1..i + close]);
                i += close + 1;
            }
            // Apache's status conditions `%>s` / `%<s`: final / original status.
            let mut angle = false;
            if arg.is_none() && matches!(bytes.get(i), Some(b'>' | b'<')) {
                angle = true;
                i += 1;
            }
            let Some(c) = spec[i..].chars().next() else {
                return Err(FormatError::Incomplete(spec[start..].to_owned()));
            };
            i += c.len_utf8();
            let directive = &spec[start..i];
            let unknown = || FormatError::UnknownDirective(directive.to_owned());
            let piece = match (arg, c) {
                (None, '%') if !angle => {
                    lit.push('%');
                    continue;
                }
                (None, 's') => Piece::Status,
                (_, _) if angle => return Err(unknown()),
                (None, 'h' | 'a') => Piece::ClientIp,
                (None, 'l') => Piece::Ident,
                (None, 'u') => Piece::User,
                (None, 't') => Piece::Time,
                (Some("%d/%b/%Y:%H:%M:%S %z" | "%d/%b/%Y:%T %z"), 't') => Piece::TimeBare,
                (Some("sec"), 't') => Piece::Epoch(TimeUnit::Sec),
                (Some("msec"), 't') => Piece::Epoch(TimeUnit::Msec),
                (Some("usec"), 't') => Piece::Epoch(TimeUnit::Usec),
                (None, 'A') => Piece::LocalIp,
                (None | Some("local" | "canonical"), 'p') => Piece::LocalPort,
                (Some("remote"), 'p') => Piece::RemotePort,
                (Some("raw"), 'q') => Piece::RawQuery,
                (Some("raw-or-dash"), 'q') => Piece::RawQueryOrDash,
                (None, 'r') => Piece::RequestLine,
                (None, 'b') => Piece::BytesClf,
                (None, 'B') => Piece::Bytes,
                (None, 'D') | (Some("us"), 'T') => Piece::Micros,
                (Some("ms"), 'T') => Piece::Millis,
                (None | Some("s"), 'T') => Piece::Seconds,
                (None, 'v') => Piece::VhostLabel,
                (None, 'V') => Piece::Host,
                (Some("no-port"), 'V') => Piece::HostNoPort,
                (None, 'U') => Piece::Path,
                (None, 'q') => Piece::Query,
                (None, 'm') => Piece::Method,
                (None, 'H') => Piece::Protocol,
                (Some(name), 'i') => Piece::RequestHeader(
                    HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| FormatError::BadHeaderName(directive.to_owned()))?,
                ),
                (Some(name), 'n') => Piece::Note(name.into()),
                (Some(_), 'o') => return Err(FormatError::ResponseHeader(directive.to_owned())),
                _ => return Err(unknown()),
            };
            if !lit.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut lit).into_boxed_str()));
            }
            pieces.push(piece);
        }
        if !lit.is_empty() {
            pieces.push(Piece::Literal(lit.into_boxed_str()));
        }
        Ok(LogFormat { pieces })
    }

    /// Appends the line for `rec` to `out`, without the trailing `\n`. `clock`
    /// caches the `%t` text of the last second seen. Never fails; allocates only
    /// when `out` must grow.
    pub fn write_line(&self, rec: &LogRecord<'_>, clock: &mut TimeCache, out: &mut Vec<u8>) {
        let req = rec.req;
        // numbers and addresses without `core::fmt` (a third of a Combined
        // line's cost went to `write!` for the address, the target and the
        // byte count)
        let mut num = itoa::Buffer::new();
        let mut ip = tessera_core::realip::IpText::default();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(s) => out.extend_from_slice(s.as_bytes()),
                Piece::ClientIp => match req.peer_addr() {
                    Some(a) => out.extend_from_slice(ip.format(a.ip().to_canonical())),
                    None => out.push(b'-'),
                },
                Piece::Ident => out.push(b'-'),
                Piece::User => escape_or_dash(out, rec.user.map(str::as_bytes)),
                Piece::Time => out.extend_from_slice(clock.get(rec.start_time)),
                Piece::TimeBare => {
                    let t = clock.get(rec.start_time);
                    out.extend_from_slice(&t[1..t.len() - 1]);
                }
                Piece::Epoch(unit) => {
                    let now = (rec.start_time + rec.started.elapsed())
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default();
                    let v = match unit {
                        TimeUnit::Sec => u128::from(now.as_secs()),
                        TimeUnit::Msec => now.as_nanos().div_ceil(1_000_000),
                        TimeUnit::Usec => now.as_nanos().div_ceil(1_000),
                    };
                    out.extend_from_slice(num.format(v).as_bytes());
                }
                Piece::LocalIp => out.extend_from_slice(
                    ip.format(req.app_config().local_addr().ip().to_canonical()),
                ),
                Piece::LocalPort => out
                    .extend_from_slice(num.format(req.app_config().local_addr().port()).as_bytes()),
                Piece::RemotePort => match req.peer_addr() {
                    Some(a) => out.extend_from_slice(num.format(a.port()).as_bytes()),
                    None => out.push(b'-'),
                },
                Piece::RawQuery => escape_into(out, req.query_string().as_bytes()),
                Piece::RawQueryOrDash => escape_or_dash(out, Some(req.query_string().as_bytes())),
                Piece::RequestLine => {
                    escape_into(out, req.method().as_str().as_bytes());
                    out.push(b' ');
                    let uri = req.uri();
                    match uri.path_and_query() {
                        // origin-form (`/path?query`) and `*`: what `Display`
                        // writes, without the formatter
                        Some(pq) if uri.scheme().is_none() && uri.authority().is_none() => {
                            escape_into(out, pq.as_str().as_bytes());
                        }
                        _ => {
                            let _ = fmt::Write::write_fmt(&mut Escaped(out), format_args!("{uri}"));
                        }
                    }
                    out.push(b' ');
                    out.extend_from_slice(protocol(req.version()).as_bytes());
                }
                Piece::Status => out.extend_from_slice(rec.status.as_str().as_bytes()),
                Piece::BytesClf if rec.body_bytes == 0 => out.push(b'-'),
                Piece::BytesClf | Piece::Bytes => {
                    out.extend_from_slice(num.format(rec.body_bytes).as_bytes());
                }
                Piece::RequestHeader(name) => {
                    let mut values = req.headers().get_all(name);
                    match values.next() {
                        None => out.push(b'-'),
                        Some(first) => {
                            escape_into(out, first.as_bytes());
                            for v in values {
                                out.extend_from_slice(b", ");
                                escape_into(out, v.as_bytes());
                            }
                        }
                    }
                }
                Piece::Note(name) => escape_or_dash(out, rec.notes.get(name).map(str::as_bytes)),
                Piece::Micros => {
                    let us = rec.started.elapsed().as_nanos().div_ceil(1_000);
                    out.extend_from_slice(num.format(us).as_bytes());
                }
                Piece::Millis => {
                    let ms = rec.started.elapsed().as_nanos().div_ceil(1_000_000);
                    out.extend_from_slice(num.format(ms).as_bytes());
                }
                Piece::Seconds => {
                    let secs =
                        |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
                    let end = rec.start_time + rec.started.elapsed();
                    let s = secs(end).saturating_sub(secs(rec.start_time));
                    out.extend_from_slice(num.format(s).as_bytes());
                }
                Piece::VhostLabel => escape_into(out, rec.vhost_label.as_bytes()),
                Piece::Host => escape_or_dash(out, request_host(req).map(str::as_bytes)),
                Piece::HostNoPort => {
                    escape_or_dash(out, request_host(req).map(|h| strip_port(h).as_bytes()))
                }
                Piece::Path => escape_into(out, req.uri().path().as_bytes()),
                Piece::Query => {
                    if let Some(q) = req.uri().query() {
                        out.push(b'?');
                        escape_into(out, q.as_bytes());
                    }
                }
                Piece::Method => escape_into(out, req.method().as_str().as_bytes()),
                Piece::Protocol => out.extend_from_slice(protocol(req.version()).as_bytes()),
            }
        }
    }
}

/// `HTTP/1.1` and friends, as Apache and nginx write `%H` (`HTTP/2.0` for h2).
fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/?",
    }
}

fn escape_or_dash(out: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        Some(v) if !v.is_empty() => escape_into(out, v),
        _ => out.push(b'-'),
    }
}

/// Appends `s` to `out` escaped for a log field (Apache `ap_escape_logitem`
/// convention, case B39): `"` becomes `\"`, `\` becomes `\\`, and every byte
/// below 0x20 or at or above 0x7F (control bytes, DEL, each byte of a UTF-8
/// sequence) becomes `\xHH` with upper-case hex digits. Other bytes are copied.
pub fn escape_into(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut run = 0;
    for (i, &b) in s.iter().enumerate() {
        if (0x20..0x7F).contains(&b) && b != b'"' && b != b'\\' {
            continue;
        }
        out.extend_from_slice(&s[run..i]);
        run = i + 1;
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xF)],
            ]),
        }
    }
    out.extend_from_slice(&s[run..]);
}

/// A `fmt::Write` that escapes what it is given into a byte buffer (used to write
/// the URI without an intermediate `String`).
struct Escaped<'a>(&'a mut Vec<u8>);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        escape_into(self.0, s.as_bytes());
        Ok(())
    }
}

/// The `%t` text of the last second formatted, so that a busy thread formats the
/// date once per second (Apache caches its request-time string the same way).
#[derive(Debug, Clone)]
pub struct TimeCache {
    secs: u64,
    text: [u8; 28],
}

impl Default for TimeCache {
    fn default() -> Self {
        TimeCache {
            secs: u64::MAX,
            text: [b' '; 28],
        }
    }
}

impl TimeCache {
    /// `t` as `[10/Oct/2000:13:55:36 +0000]` (28 bytes, UTC, whole seconds).
    /// Times before 1970 are written as the epoch, times after 9999 as the end
    /// of 9999.
    pub fn get(&mut self, t: SystemTime) -> &[u8] {
        const MAX: u64 = 253_402_300_799; // 9999-12-31T23:59:59Z
        let secs = t
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .min(MAX);
        if secs != self.secs {
            self.secs = secs;
            self.text = clf_time(secs);
        }
        &self.text
    }
}

/// Formats unix seconds as `[dd/Mon/yyyy:hh:mm:ss +0000]`.
fn clf_time(secs: u64) -> [u8; 28] {
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let (y, m, d) = civil_from_days(secs / 86_400);
    let rem = secs % 86_400;
    let (hh, mm, ss) = (rem / 3600, rem / 60 % 60, rem % 60);
    let mut out = *b"[dd/Mon/yyyy:hh:mm:ss +0000]";
    let two = |out: &mut [u8; 28], at: usize, v: u64| {
        out[at] = b'0' + (v / 10) as u8;
        out[at + 1] = b'0' + (v % 10) as u8;
    };
    two(&mut out, 1, d);
    out[4..7].copy_from_slice(MONTHS[(m - 1) as usize]);
    two(&mut out, 8, y / 100);
    two(&mut out, 10, y % 100);
    two(&mut out, 13, hh);
    two(&mut out, 16, mm);
    two(&mut out, 19, ss);
    out
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31) in the proleptic
/// Gregorian calendar (Howard Hinnant's `civil_from_days`, for days >= 0).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let doe = z % 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365], from March 1
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests;
