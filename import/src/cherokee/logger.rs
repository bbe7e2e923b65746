//! Cherokee's logger templates (`${ip_remote}`, `${now}`, …) as Tessera's
//! access-log format directives.

pub(super) fn log_template(t: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut notes = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find(['$', '%']) {
        out.push_str(&rest[..i]);
        if rest[i..].starts_with('%') {
            out.push_str("%%");
            rest = &rest[i + 1..];
            continue;
        }
        if !rest[i..].starts_with("${") {
            out.push('$');
            rest = &rest[i + 1..];
            continue;
        }
        let Some(end) = rest[i..].find('}') else {
            out.push_str(&rest[i..]);
            rest = "";
            break;
        };
        let var = &rest[i + 2..i + end];
        let (d, note): (&str, Option<&str>) = match var {
            "ip_remote" => ("%h", None),
            "ip_local" => (
                "%A",
                Some("${ip_local} becomes %A (0.0.0.0 or :: for a listener on every address, where Cherokee logs \"-\")"),
            ),
            "protocol" => ("%H", None),
            "transport" => (
                "http",
                Some("${transport} is always http (plain HTTP listeners)"),
            ),
            "port_server" => ("%p", None),
            "query_string" => ("%{raw-or-dash}q", None),
            "request_first_line" => ("%r", None),
            "status" => ("%>s", None),
            // Cherokee writes the date without brackets, in local time
            // unless logger!utc_time.
            "now" => (
                "%{%d/%b/%Y:%H:%M:%S %z}t",
                Some("${now} is written in UTC (+0000)"),
            ),
            "time_secs" => ("%{sec}t", None),
            "time_msecs" => ("%{msec}t", None),
            "user_remote" => ("%u", None),
            "request" => ("%U", None),
            "request_original" => (
                "%U",
                Some("${request_original} becomes %U (the path after rewrites)"),
            ),
            "vserver_name" => ("%v", None),
            "vserver_name_req" => ("%{no-port}V", None),
            "response_size" => (
                "%b",
                Some("${response_size} becomes %b (body bytes, without headers)"),
            ),
            "http_host" => ("%{no-port}V", None),
            "http_referrer" => ("%{Referer}i", None),
            "http_user_agent" => ("%{User-Agent}i", None),
            "http_cookie" => ("%{Cookie}i", None),
            _ => ("-", None),
        };
        if d == "-" && note.is_none() {
            notes.push(format!("${{{var}}} is unknown and logs \"-\""));
        }
        if let Some(n) = note {
            notes.push(n.to_owned());
        }
        out.push_str(d);
        rest = &rest[i + end + 1..];
    }
    out.push_str(rest);
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates() {
        let (f, notes) = log_template("${ip_remote} - ${user_remote} [${now}] \"${request_first_line}\" ${status} ${response_size} \"${http_referrer}\" 100%");
        // Issue 11 #5: [${now}] has one pair of brackets.
        assert_eq!(
            f,
            "%h - %u [%{%d/%b/%Y:%H:%M:%S %z}t] \"%r\" %>s %b \"%{Referer}i\" 100%%"
        );
        assert_eq!(notes.len(), 2);
        // ${time_msecs} is milliseconds since the epoch, not a date; the
        // socket, query and host variables have directives of their own.
        let (f, notes) = log_template(
            "${time_secs} ${time_msecs} ${port_server} ${query_string} ${http_host} ${vserver_name_req}",
        );
        assert_eq!(
            f,
            "%{sec}t %{msec}t %p %{raw-or-dash}q %{no-port}V %{no-port}V"
        );
        assert!(notes.is_empty(), "{notes:?}");
    }
}
