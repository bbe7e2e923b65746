//! php-cgi spawned by Tessera: start, restart, reload and stop; spawn tables it refuses.

use std::process::Command;
use std::time::Duration;

use crate::util::{Response, Server};

/// A site whose PHP is php-cgi spawned by Tessera (`[upstream.spawn]`,
/// lighttpd's `bin-path`) with `procs` processes on Unix sockets in the
/// test directory.
fn spawned_config(dir: &std::path::Path, procs: usize, children: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:{}/php.sock\"]\n[upstream.spawn]\nbin-path = \"/usr/bin/php-cgi -d session.save_path=/tmp\"\nmax-procs = {procs}\nbin-environment = {{ PHP_FCGI_CHILDREN = \"{children}\", APP_MODE = \"spawned\" }}\n\n[[vhost]]\nserver-names = [\"site.test\"]\ndefault = true\ndocument-root = \"www\"\nmodules = [\"fastcgi\", \"static-file\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
        dir.display()
    )
}

fn need_php_cgi() {
    assert!(
        std::path::Path::new("/usr/bin/php-cgi").exists(),
        "php-cgi is not installed (apt-get install php-cgi)"
    );
}

/// `php-cgi` processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ..."
        let Some((comm, rest)) = stat.split_once(") ") else {
            continue;
        };
        let ppid = rest.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok());
        if comm.ends_with("(php-cgi") && ppid == Some(parent) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
}

#[test]
fn php_cgi_spawned_by_tessera_runs_restarts_reloads_and_stops() {
    need_php_cgi();
    let d = crate::util::TempDir::new("spawn");
    let config = |procs, children| {
        spawned_config(d.path(), procs, children)
            .replace("workers = 1\n", "workers = 1\nshutdown-timeout = 2\n")
    };
    let s = Server::start(&config(2, "1"), |w| {
        w.write(
            "www/who.php",
            "<?php echo getenv('APP_MODE'), ' ', getmypid();",
        );
    });
    let pid_of = |r: &Response| -> u32 {
        let t = r.text();
        let (mode, pid) = t.split_once(' ').unwrap_or_else(|| panic!("{t}"));
        assert_eq!(mode, "spawned", "bin-environment reaches PHP");
        pid.parse().unwrap()
    };
    // two processes, each on its own socket, balanced round-robin
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let r = s.get("/who.php");
        assert_eq!(r.status, 200, "{} {}", r.text(), s.stderr());
        seen.insert(pid_of(&r));
    }
    assert_eq!(seen.len(), 2, "both php-cgi processes answered: {seen:?}");
    for i in 0..2 {
        assert!(d.path().join(format!("php.sock-{i}")).exists());
    }
    let parents = children_of(s.pid());
    assert_eq!(parents.len(), 2, "two php-cgi processes under Tessera");
    // a process that crashes is started again
    let victim = parents[0];
    assert!(Command::new("kill")
        .args(["-KILL", "--", &format!("-{victim}")])
        .status()
        .unwrap()
        .success());
    let mut back = false;
    for _ in 0..250 {
        let now = children_of(s.pid());
        if now.len() == 2 && !now.contains(&victim) {
            back = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(back, "the killed process was not restarted: {}", s.stderr());
    for _ in 0..4 {
        assert_eq!(s.get("/who.php").status, 200);
    }
    assert!(s.stderr().contains("starting it again"), "{}", s.stderr());
    // a reload that does not change them keeps them
    let before = children_of(s.pid());
    s.reload(None);
    assert_eq!(children_of(s.pid()), before, "unchanged processes are kept");
    // one that changes them replaces them: the old ones stop
    // shutdown-timeout (here 2 s) later
    s.reload(Some(&config(1, "2")));
    let mut replaced = Vec::new();
    for _ in 0..500 {
        replaced = children_of(s.pid());
        if replaced.len() == 1 && before.iter().all(|p| !alive(*p)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(replaced.len(), 1, "max-procs = 1 after the reload");
    assert!(
        before.iter().all(|p| !alive(*p)),
        "the old processes stopped"
    );
    assert_eq!(s.get("/who.php").status, 200);
    // shutdown stops them, with the children php-cgi forked
    let last = replaced[0];
    // php-cgi forks its children one after the other
    let mut forked = children_of(last);
    for _ in 0..250 {
        if forked.len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        forked = children_of(last);
    }
    assert_eq!(forked.len(), 2, "PHP_FCGI_CHILDREN = 2");
    s.stop();
    for p in std::iter::once(last).chain(forked) {
        // killed before Tessera exits; reaping by init may lag a little
        for _ in 0..100 {
            if !alive(p) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(p), "php-cgi {p} outlived Tessera");
    }
    assert!(
        !d.path().join("php.sock-0").exists(),
        "the socket is removed"
    );
}

#[test]
fn a_spawn_table_that_cannot_work_is_a_configuration_error() {
    let d = crate::util::TempDir::new("spawn-bad");
    let conf = d.write(
        "server.toml",
        "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:/tmp/x.sock\", \"unix:/tmp/y.sock\"]\n[upstream.spawn]\nbin-path = \"/usr/bin/php-cgi\"\n\n[[vhost]]\ndefault = true\ndocument-root = \".\"\nmodules = [\"fastcgi\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
    );
    let out = crate::util::check_config(&conf);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("upstream[0].servers") && err.contains("exactly one"),
        "{err}"
    );
    d.write(
        "server.toml",
        "[server]\nlisten = [\"127.0.0.1:0\"]\n\n[[upstream]]\nname = \"php\"\nservers = [\"unix:/tmp/x.sock\"]\n[upstream.spawn]\nbin-path = \"/nonexistent/php-cgi\"\n\n[[vhost]]\ndefault = true\ndocument-root = \".\"\nmodules = [\"fastcgi\"]\n[vhost.fastcgi]\nupstream = \"php\"\n",
    );
    let out = crate::util::check_config(&conf);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("upstream[0].spawn.bin-path") && err.contains("/nonexistent/php-cgi"),
        "{err}"
    );
}

/// A reload that replaces the spawned processes lets the requests they are
/// answering finish: the old processes are retired, stopped only
/// `shutdown-timeout` seconds later, while new requests reach the new
/// processes on a new socket at the same path.
#[test]
fn a_reload_that_replaces_spawned_processes_lets_their_requests_finish() {
    use std::io::{Read, Write};
    need_php_cgi();
    let d = crate::util::TempDir::new("spawn-retire");
    let gate = d.path().join("gate");
    std::fs::create_dir_all(&gate).unwrap();
    // the old process is stopped shutdown-timeout s after the reload
    let config = |children| {
        spawned_config(d.path(), 1, children)
            .replace("workers = 1\n", "workers = 1\nshutdown-timeout = 10\n")
    };
    let s = Server::start(&config("1"), |w| {
        // answers once the test opens the gate: an exchange in progress
        // for as long as the test wants
        w.write(
            "www/slow.php",
            format!(
                "<?php touch('{g}/started'); $n = 0; while (!file_exists('{g}/open') && $n++ < 2000) usleep(5000); echo 'slow done ', getmypid();",
                g = gate.display()
            ),
        );
        w.write("www/pid.php", "<?php echo getmypid();");
    });
    // the supervisor starts php-cgi on its own thread
    let mut old = Vec::new();
    for _ in 0..500 {
        old = children_of(s.pid());
        if !old.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(old.len(), 1, "{}", s.stderr());
    let addr = s.addr;
    let slow = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(b"GET /slow.php HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    });
    let mut started = false;
    for _ in 0..500 {
        if gate.join("started").exists() {
            started = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(started, "slow.php never ran: {}", s.stderr());
    // PHP_FCGI_CHILDREN changes: the process is replaced
    s.reload(Some(&config("2")));
    let mut replaced = false;
    for _ in 0..500 {
        let now = children_of(s.pid());
        if now.iter().any(|p| !old.contains(p)) {
            replaced = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(replaced, "no new process: {}", s.stderr());
    // new requests go to the new process while the old one still works
    let r = s.get("/pid.php");
    assert_eq!(r.status, 200, "{} {}", r.text(), s.stderr());
    assert!(
        alive(old[0]),
        "the old process was stopped during its request"
    );
    std::fs::write(gate.join("open"), "").unwrap();
    let answer = slow.join().unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("slow done"),
        "the request in progress was lost: {answer} {}",
        s.stderr()
    );
    // then the old process goes, shutdown-timeout (10 s) after the reload
    let mut gone = false;
    for _ in 0..1500 {
        if !alive(old[0]) {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone, "the retired process still runs: {}", s.stderr());
    assert_eq!(s.get("/pid.php").status, 200);
    assert!(
        d.path().join("php.sock-0").exists(),
        "the new process's socket was removed with the old one"
    );
    s.stop();
}

/// Reloads that take a spawned address away and give it back before the
/// retired process stops, and quick back-and-forth reloads: every socket
/// stays served by the newest process (a retired supervisor removes only
/// its own socket file, and a new process takes over a retired one's path).
#[test]
fn reloads_that_take_an_address_away_and_back_keep_every_socket_served() {
    need_php_cgi();
    let d = crate::util::TempDir::new("spawn-flip");
    let config = |procs, mode: &str| {
        spawned_config(d.path(), procs, "1")
            .replace("APP_MODE = \"spawned\"", &format!("APP_MODE = \"{mode}\""))
            .replace("workers = 1\n", "workers = 1\nshutdown-timeout = 2\n")
    };
    let s = Server::start(&config(2, "a"), |w| {
        w.write("www/mode.php", "<?php echo getenv('APP_MODE');");
    });
    // php.sock-1 goes away with its process, and is wanted again while
    // that process is still retiring
    s.reload(Some(&config(1, "b")));
    s.reload(Some(&config(2, "c")));
    for _ in 0..5 {
        s.reload(Some(&config(2, "d")));
        s.reload(Some(&config(2, "c")));
    }
    // every process but the last two retires 2 s after its reload
    let before = children_of(s.pid());
    s.reload(Some(&config(2, "e")));
    let mut settled = false;
    for _ in 0..1000 {
        if before.iter().all(|p| !alive(*p)) && children_of(s.pid()).len() == 2 {
            settled = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(settled, "retired processes remain: {}", s.stderr());
    // requests keep reaching the newest processes while the retired ones'
    // supervisors finish
    for _ in 0..40 {
        let r = s.get("/mode.php");
        assert_eq!((r.status, r.text().as_str()), (200, "e"), "{}", s.stderr());
    }
    for i in 0..2 {
        assert!(d.path().join(format!("php.sock-{i}")).exists());
    }
    s.stop();
}
