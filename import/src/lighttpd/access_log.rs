//! mod_accesslog: `accesslog.filename` and `accesslog.format`, whose
//! directives are translated into Tessera's.

use super::{Arg, Tr};
use crate::model::{Opt, V};
use crate::report::Report;

impl Tr<'_> {
    /// The options of mod_accesslog.
    pub(super) fn access_log_option(&self, a: &Arg<'_>, report: &mut Report) -> Option<Vec<Opt>> {
        let Arg { key, src, val, .. } = *a;
        let opt = |module, k, v| a.opt(module, k, v);
        Some(match key {
            "accesslog.filename" => {
                let p = val.as_string().unwrap_or_default();
                if p.starts_with('|') {
                    report.dropped(src, key, "piped logs are not supported: log to a file");
                    return Some(vec![opt("access-log", "path", V::s(""))]);
                }
                report.translated(
                    src,
                    key,
                    if p.is_empty() {
                        "access-log off here".to_owned()
                    } else {
                        "access-log path".to_owned()
                    },
                );
                vec![opt("access-log", "path", V::s(p))]
            }
            "accesslog.format" => {
                let f = val.as_string().unwrap_or_default();
                let (t, notes) = log_format(&f);
                if notes.is_empty() {
                    report.translated(src, key, "access-log format");
                } else {
                    report.approximated(
                        src,
                        key,
                        format!("access-log format \"{t}\": {}", notes.join("; ")),
                    );
                }
                vec![opt("access-log", "format", V::s(t))]
            }
            _ => return None,
        })
    }
}

/// Translates a lighttpd `accesslog.format` into Tessera's directives; the
/// notes say what changed.
pub(crate) fn log_format(f: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut notes: Vec<String> = Vec::new();
    let chars: Vec<char> = f.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let e = chars[i + 1];
            match e {
                'n' | 'r' | 'a' | 'b' | 'f' | 'v' => notes.push(format!(
                    "the escape \\{e} is left out (one line per request)"
                )),
                't' => out.push('\t'),
                other => out.push(other),
            }
            i += 2;
            continue;
        }
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let mut arg: Option<String> = None;
        if chars.get(i) == Some(&'{') {
            let close = chars[i..].iter().position(|&x| x == '}').map(|p| p + i);
            let Some(close) = close else {
                notes.push("an unterminated %{ is left out".into());
                break;
            };
            arg = Some(chars[i + 1..close].iter().collect());
            i = close + 1;
        }
        let mut modifier = String::new();
        while matches!(chars.get(i), Some('<' | '>')) {
            modifier.push(chars[i]);
            i += 1;
        }
        let Some(&d) = chars.get(i) else {
            notes.push("a trailing % is left out".into());
            break;
        };
        i += 1;
        let directive = format!(
            "%{}{modifier}{d}",
            arg.as_ref().map(|a| format!("{{{a}}}")).unwrap_or_default()
        );
        match (d, arg.as_deref()) {
            ('%', None) => out.push_str("%%"),
            ('h' | 'a' | 'l' | 'u' | 'r' | 'D' | 'v' | 'V' | 'U' | 'm' | 'H' | 'A', None) => {
                out.push('%');
                out.push(d);
            }
            // lighttpd logs 0 for an empty body (HEAD, 304) once a response
            // was sent: Tessera's %B (its %b writes "-" as Apache does).
            ('b' | 'B', None) => out.push_str("%B"),
            ('p', None | Some("local" | "canonical")) => out.push_str("%p"),
            ('p', Some("remote")) => out.push_str("%{remote}p"),
            ('s', None) => out.push_str("%>s"),
            ('t', None) => {
                out.push_str("%t");
            }
            ('t', Some(a)) => {
                let (begin, a) = match a.split_once(':') {
                    Some(("begin", rest)) => (true, rest),
                    Some(("end", rest)) => (false, rest),
                    _ => (false, a),
                };
                let bare = |p: &str| matches!(p, "%d/%b/%Y:%H:%M:%S %z" | "%d/%b/%Y:%T %z");
                match a {
                    "sec" | "msec" | "usec" => out.push_str(&format!("%{{{a}}}t")),
                    p if bare(p) => out.push_str(&format!("%{{{p}}}t")),
                    p if p
                        .strip_prefix('[')
                        .and_then(|p| p.strip_suffix(']'))
                        .is_some_and(bare) =>
                    {
                        out.push_str("%t")
                    }
                    _ => {
                        out.push_str("%t");
                        notes.push(format!(
                            "{directive} becomes %t ([10/Oct/2000:13:55:36 +0000], UTC)"
                        ));
                    }
                }
                if begin {
                    notes.push(format!(
                        "{directive}: Tessera writes the time at the end of the request"
                    ));
                }
            }
            ('T', None | Some("s" | "sec")) => out.push_str("%T"),
            ('T', Some("ms" | "msec")) => out.push_str("%{ms}T"),
            ('T', Some("us" | "usec")) => out.push_str("%{us}T"),
            ('T', Some(_)) => {
                out.push_str("%D");
                notes.push(format!("{directive} becomes %D (microseconds)"));
            }
            ('i', Some(h)) => {
                out.push_str(&format!("%{{{h}}}i"));
            }
            ('q', None) => out.push_str("%{raw}q"),
            ('O', None) => {
                out.push_str("%b");
                notes.push("%O (bytes with headers) becomes %b (body bytes)".into());
            }
            _ => {
                out.push('-');
                notes.push(format!("{directive} is not supported and logs \"-\""));
            }
        }
    }
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lighttpd::DEFAULT_LOG_FORMAT;

    #[test]
    fn log_formats() {
        assert_eq!(
            log_format(DEFAULT_LOG_FORMAT).0,
            r#"%h %V %u %t "%r" %>s %B "%{Referer}i" "%{User-Agent}i""#
        );
        assert!(log_format(DEFAULT_LOG_FORMAT).1.is_empty());
        let (f, notes) = log_format("%{%s}t|%V|%r|%s|%b");
        assert_eq!(f, "%t|%V|%r|%>s|%B");
        assert_eq!(notes.len(), 1);
        let (f, notes) = log_format("%h %O %{X}o %X");
        assert_eq!(f, "%h %b - -");
        assert_eq!(notes.len(), 3);
        // Issue 11 #5: lighttpd's time, duration, socket and query directives.
        let (f, notes) = log_format(
            "%{ms}T %{msec}T %{us}T %T %{sec}t %{msec}t %{end:usec}t %{%d/%b/%Y:%H:%M:%S %z}t %{[%d/%b/%Y:%T %z]}t %A %p %{remote}p %q",
        );
        assert_eq!(
            f,
            "%{ms}T %{ms}T %{us}T %T %{sec}t %{msec}t %{usec}t %{%d/%b/%Y:%H:%M:%S %z}t %t %A %p %{remote}p %{raw}q"
        );
        assert!(notes.is_empty(), "{notes:?}");
    }
}
