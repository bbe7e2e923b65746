//! Fixtures shared by the criterion benchmarks: a configuration with many
//! vhosts and rules, loaded through the real loader and the real registry, over
//! a small document root that is old enough for the open-file cache.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tessera_core::config::Config;
use tessera_core::Registry;

/// `std::env::temp_dir()/tessera-criterion`: the document root `www/` (an
/// index.html, a 23,619-byte logo.png) and `server.toml`. Kept between runs; on
/// the first run, waits until the files are older than the open-file cache's
/// 2 s "racily changed" window, so that the cached path is what is measured.
pub fn fixture_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("tessera-criterion");
    let www = dir.join("www");
    if !www.join("img/logo.png").exists() {
        std::fs::create_dir_all(www.join("img")).unwrap();
        std::fs::write(www.join("index.html"), INDEX).unwrap();
        let logo: Vec<u8> = (0..23_619u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(www.join("img/logo.png"), logo).unwrap();
    }
    let age = SystemTime::now()
        .duration_since(
            std::fs::metadata(www.join("img/logo.png"))
                .unwrap()
                .modified()
                .unwrap(),
        )
        .unwrap_or_default();
    if age < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_secs(3) - age);
    }
    std::fs::write(dir.join("server.toml"), config_text()).unwrap();
    dir
}

const INDEX: &str = "<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body bgcolor=\"white\" text=\"black\">\n<center><h1>Welcome to nginx!</h1></center>\n</body>\n</html>\n";

/// 3 vhosts used by the benchmarks, 40 filler vhosts with exact names, a
/// wildcard and a regular-expression vhost. The first vhost has the demo
/// pipeline (headers, expires, static-file) and three rules.
fn config_text() -> String {
    let mut c = String::from(
        r#"
[[vhost]]
server-names = ["localhost", "127.0.0.1"]
default = true
document-root = "www"
modules = ["headers", "expires", "static-file"]
[vhost.headers]
set = { "X-Content-Type-Options" = "nosniff", "X-Frame-Options" = "SAMEORIGIN" }
[vhost.expires]
mime-types = { "text/css" = "access plus 1 days", "text/html" = "access plus 5 minutes" }
[[vhost.rule]]
name = "images"
match = { path-prefix = "/img/" }
final = false
[vhost.rule.expires]
url = { "/" = "access plus 30 days" }
[[vhost.rule]]
name = "scripts"
match = { extensions = ["php", "cgi"] }
[vhost.rule.static-file]
exclude-extensions = ["php", "cgi"]
[[vhost.rule]]
name = "api"
match = { path-regex = "^/api/v[0-9]+/" }
[vhost.rule.headers]
set = { "Cache-Control" = "no-store" }

[[vhost]]
server-names = ["nocache.test"]
document-root = "www"
modules = ["static-file"]
[vhost.static-file]
open-file-cache = 0

[[vhost]]
server-names = ["cache.test"]
document-root = "www"
modules = ["static-file"]

[[vhost]]
server-names = ["cachevalid.test"]
document-root = "www"
modules = ["static-file"]
[vhost.static-file]
open-file-cache-valid = 1000

[[vhost]]
server-names = ["*.cdn.example.com", ".static.example.com"]
document-root = "www"
modules = ["static-file"]

[[vhost]]
server-names = ["~^app[0-9]+\\.example\\.net$"]
document-root = "www"
modules = ["static-file"]
"#,
    );
    for i in 0..40 {
        c.push_str(&format!(
            "\n[[vhost]]\nserver-names = [\"site{i}.example.org\", \"www.site{i}.example.org\"]\ndocument-root = \"www\"\nmodules = [\"static-file\"]\n"
        ));
    }
    c
}

/// The fixture configuration, loaded with every built-in module registered.
pub fn config() -> Config {
    let dir = fixture_dir();
    let mut reg = Registry::new();
    tessera_modules::register_all(&mut reg).unwrap();
    tessera_core::config::load(&dir.join("server.toml"), &reg).unwrap()
}
