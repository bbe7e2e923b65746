//! The status module's dashboard (issue 15) in a real browser: headless
//! Chromium from Debian's packages loads the page while the server is
//! under load and must show non-zero figures; the screenshot is kept in
//! `target/tmp/dashboard.png`.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::util::Server;

/// The `data-value` of the element with `id` in `dom`.
fn value(dom: &str, id: &str) -> f64 {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the page"));
    let tag = &dom[dom[..at].rfind('<').unwrap()..];
    let tag = &tag[..tag.find('>').unwrap()];
    let v = tag
        .split("data-value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no data-value in {tag}"));
    v.parse().unwrap()
}

/// The `data-max` of the canvas with `id`: the largest value charted.
fn chart_max(dom: &str, id: &str) -> f64 {
    let at = dom.find(&format!("id=\"{id}\"")).unwrap();
    let tag = &dom[dom[..at].rfind('<').unwrap()..];
    let tag = &tag[..tag.find('>').unwrap()];
    tag.split("data-max=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map_or(0.0, |v| v.parse().unwrap())
}

/// The `data-points` of the canvas with `id`.
fn points(dom: &str, id: &str) -> usize {
    let at = dom.find(&format!("id=\"{id}\"")).unwrap();
    let tag = &dom[dom[..at].rfind('<').unwrap()..];
    let tag = &tag[..tag.find('>').unwrap()];
    tag.split("data-points=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map_or(0, |v| v.parse().unwrap())
}

#[test]
fn the_dashboard_charts_live_figures_in_chromium() {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("Debian's chromium is required: apt-get install -y chromium (.ci/run does it)");
    let app = Server::site("\"static-file\"", "", |d| {
        d.write("www/x", "from the upstream\n");
    });
    let s = Server::start(
        &format!(
            "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"app<i>x</i>\"\nservers = [\"{}\"]\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/api/\" }}\n[vhost.rule.proxy]\nupstream = \"app<i>x</i>\"\nmap-path = {{ \"/api/\" = \"/\" }}\n\n[[vhost.rule]]\nmatch = {{ path-prefix = \"/server-status\" }}\n[vhost.rule.status]\nallow = [\"127.0.0.1\"]\n",
            app.addr
        ),
        |d| {
            d.write("www/index.html", "<h1>home</h1>\n");
        },
    );
    // the page itself is limited like the rest of the status module
    let r = s.get("/server-status?format=html");
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    assert!(
        r.header("content-security-policy")
            .is_some_and(|c| c.contains("connect-src 'self'")),
        "the page may talk to its own origin only"
    );
    assert!(
        !r.text().contains("http://") && !r.text().contains("https://"),
        "no outside resources"
    );
    let stop = AtomicBool::new(false);
    let shot = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    let (dom, shot_ok) = std::thread::scope(|sc| {
        // load: bounded in count and time
        let load = sc.spawn(|| {
            let until = Instant::now() + Duration::from_secs(60);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 200_000 && Instant::now() < until {
                let path = match n % 5 {
                    0 => "/api/x",
                    1 => "/missing",
                    _ => "/",
                };
                let _ = s.get(path);
                n += 1;
            }
            n
        });
        let url = format!("http://{}/server-status?format=html", s.addr);
        let run = |extra: &[&str]| {
            Command::new(chromium)
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    "--window-size=1400,1000",
                    "--virtual-time-budget=8000",
                ])
                .args(extra)
                .arg(&url)
                .output()
                .expect("chromium runs")
        };
        let dom = run(&["--dump-dom"]);
        let shot_arg = format!("--screenshot={}", shot.display());
        let pic = run(&[&shot_arg]);
        stop.store(true, Ordering::Relaxed);
        let n = load.join().unwrap();
        assert!(n > 0);
        (
            String::from_utf8_lossy(&dom.stdout).into_owned(),
            pic.status.success(),
        )
    });
    // the charts' histories: under headless Chromium's virtual time the
    // polls come milliseconds apart, so a single interval may see nothing
    assert!(chart_max(&dom, "c-rps") > 0.0, "requests/s: {dom}");
    assert!(chart_max(&dom, "c-bps") > 0.0, "bytes/s");
    assert!(chart_max(&dom, "c-lat") > 0.0, "latency");
    assert!(chart_max(&dom, "c-ups") > 0.0, "upstream requests/s");
    assert!(
        value(&dom, "now-conns") >= 1.0,
        "connections (the page's own poll at least)"
    );
    assert!(points(&dom, "c-rps") >= 2, "a chart with a history");
    // names from the configuration are text, never markup
    assert!(
        dom.contains("app&lt;i&gt;x&lt;/i&gt; 127.0.0.1:"),
        "the upstream's server row"
    );
    assert!(!dom.contains("<i>x</i>"), "an upstream name became markup");
    assert!(
        shot_ok && std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000),
        "screenshot at {}",
        shot.display()
    );
}
