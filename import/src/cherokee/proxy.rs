//! Cherokee's `handler = proxy` as Tessera's proxy module: an upstream of
//! its balancer's sources and the handler's options.

use super::tree::Node;
use super::{backends, Tr};
use crate::model::V;

/// Cherokee's `handler = proxy`: an upstream of its balancer's sources,
/// with the options of the handler; the report says what is not carried
/// over. `None` when no source can be used.
pub(super) fn proxy_handler(
    tr: &mut Tr<'_>,
    node: &Node,
    what: &str,
    key: &str,
) -> Option<Vec<(&'static str, V)>> {
    let hsrc = tr.src_of(node);
    let backends::Balanced {
        servers, balance, ..
    } = backends::balanced(tr, node, what, false);
    if servers.is_empty() {
        tr.report.dropped(
            &hsrc,
            what,
            "a proxy without a usable source: these requests get 404",
        );
        return None;
    }
    let n = servers.len();
    tr.report.translated(
        &hsrc,
        what,
        format!(
            "proxy: an [[upstream]] with {n} server{} (balance \"{balance}\")",
            if n == 1 { "" } else { "s" }
        ),
    );
    let entry = V::Tab(vec![
        ("key".into(), V::s(key)),
        ("servers".into(), V::Arr(servers)),
        ("balance".into(), V::s(balance)),
    ]);
    let mut opts: Vec<(&'static str, V)> = vec![("server", V::Arr(vec![entry]))];
    // Cherokee sends the source's host as Host unless in_preserve_host.
    if node.flag("in_preserve_host") == Some(true) {
        tr.report.translated(
            &hsrc,
            &format!("{what}!in_preserve_host"),
            "proxy host = \"client\" (the default)",
        );
    } else {
        opts.push(("host", V::s("upstream")));
    }
    for (hk, hn) in &node.children {
        let hs = tr.src_of(hn);
        let w = format!("{what}!{hk}");
        match hk.as_str() {
            "balancer" | "in_preserve_host" => {}
            "in_allow_keepalive" => tr.report.not_needed(&hs, &w, "Tessera keeps connections to upstreams alive (upstream keepalive-timeout)"),
            "in_header_hide" => tr.report.dropped(&hs, &w, "Tessera's proxy cannot remove request headers before passing them on (hop-by-hop ones are always removed)"),
            "in_header_add" => tr.report.dropped(&hs, &w, "Tessera's proxy cannot add request headers"),
            "out_header_hide" => tr.report.dropped(&hs, &w, "not translated: remove these response headers with a headers table (remove = [...]) in this rule"),
            "out_header_add" => tr.report.dropped(&hs, &w, "not translated: add these response headers with a headers table in this rule"),
            "in_rewrite_request" => tr.report.dropped(&hs, &w, "regular-expression rewrites of the upstream request are not supported (map-path replaces a prefix only)"),
            "out_rewrite_request" => tr.report.dropped(&hs, &w, "rewrites of the upstream's response are not supported"),
            "out_preserve_server" => tr.report.dropped(&hs, &w, "the Server header is Tessera's"),
            "vary" | "out_flush" | "iocache" => tr.report.not_needed(&hs, &w, "Tessera streams upstream responses itself"),
            _ => tr.report.dropped(&hs, &w, "not supported by Tessera's proxy"),
        }
    }
    Some(opts)
}

#[cfg(test)]
mod tests {
    use crate::Options;
    use std::path::Path;

    #[test]
    fn proxy_handler_balancers_and_sources() {
        let text = concat!(
            "vserver!1!nick = default\n",
            "vserver!1!document_root = /srv\n",
            "vserver!1!rule!1!match = default\n",
            "vserver!1!rule!1!handler = file\n",
            "vserver!1!rule!100!match = directory\n",
            "vserver!1!rule!100!match!directory = /app\n",
            "vserver!1!rule!100!handler = proxy\n",
            "vserver!1!rule!100!handler!balancer = ip_hash\n",
            "vserver!1!rule!100!handler!balancer!source!1 = 1\n",
            "vserver!1!rule!100!handler!balancer!source!2 = 2\n",
            "vserver!1!rule!100!handler!in_allow_keepalive = 1\n",
            "vserver!1!rule!100!handler!in_header_hide!1 = X-Secret\n",
            "vserver!1!rule!200!match = extensions\n",
            "vserver!1!rule!200!match!extensions = php\n",
            "vserver!1!rule!200!handler = proxy\n",
            "vserver!1!rule!200!handler!balancer = failover\n",
            "vserver!1!rule!200!handler!balancer!source!1 = 3\n",
            "vserver!1!rule!200!handler!in_preserve_host = 1\n",
            "vserver!1!rule!300!match = fullpath\n",
            "vserver!1!rule!300!match!fullpath!1 = /rr\n",
            "vserver!1!rule!300!handler = proxy\n",
            "vserver!1!rule!300!handler!balancer = round_robin\n",
            "vserver!1!rule!300!handler!balancer!source!1 = 1\n",
            "vserver!1!rule!300!handler!balancer!source!2 = 2\n",
            "source!1!type = host\n",
            "source!1!host = 127.0.0.1:8081\n",
            "source!2!type = host\n",
            "source!2!host = localhost:8082\n",
            "source!3!type = interpreter\n",
            "source!3!host = /run/php.sock\n",
            "source!3!interpreter = php-cgi -b /run/php.sock\n",
            "source!4!type = interpreter\n",
            "source!4!host = 127.0.0.1:9000\n",
        );
        let out = crate::import_text(
            crate::Source::Cherokee,
            "c.conf",
            text,
            Path::new("/nonexistent"),
            &Options::default(),
        )
        .unwrap();
        let t: toml::Table = toml::from_str(&out.toml).unwrap();
        let ups = t["upstream"].as_array().unwrap();
        let up = |name: &str| {
            ups.iter()
                .find(|u| u["name"].as_str() == Some(name))
                .unwrap_or_else(|| panic!("{name}: {}", out.toml))
        };
        assert_eq!(up("default-rule100")["balance"].as_str(), Some("ip-hash"));
        assert_eq!(
            up("default-rule100")["servers"].as_array().unwrap(),
            &vec![
                toml::Value::from("127.0.0.1:8081"),
                toml::Value::from("localhost:8082")
            ]
        );
        assert_eq!(
            up("default-rule200")["servers"][0].as_str(),
            Some("unix:/run/php.sock")
        );
        // Same sources, another balancer: another upstream.
        assert_eq!(
            up("default-rule300")["balance"].as_str(),
            Some("round-robin")
        );
        assert_eq!(ups.len(), 3);
        let rules = t["vhost"][0]["rule"].as_array().unwrap();
        let proxy = |i: usize| rules[i]["proxy"].as_table().unwrap();
        // Highest priority first.
        assert_eq!(proxy(0)["upstream"].as_str(), Some("default-rule300"));
        assert_eq!(proxy(1)["upstream"].as_str(), Some("default-rule200"));
        assert!(
            proxy(1).get("host").is_none(),
            "in_preserve_host: the client's Host"
        );
        assert_eq!(proxy(2)["upstream"].as_str(), Some("default-rule100"));
        assert_eq!(proxy(2)["host"].as_str(), Some("upstream"));
        let r = &out.report;
        use crate::Outcome::*;
        let outcome = |what: &str| r.entries.iter().find(|e| e.what == what).map(|e| e.outcome);
        assert_eq!(outcome("vserver!1!rule!100!handler"), Some(Translated));
        assert_eq!(
            outcome("vserver!1!rule!100!handler!in_header_hide"),
            Some(Dropped)
        );
        assert_eq!(
            outcome("vserver!1!rule!100!handler!in_allow_keepalive"),
            Some(NotNeeded)
        );
        assert_eq!(outcome("source!1"), Some(Translated));
        assert_eq!(outcome("source!3"), Some(Approximated));
        assert_eq!(outcome("source!4"), Some(Dropped));
    }
}
