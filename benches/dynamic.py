#!/usr/bin/env python3
"""Dynamic-content benchmark (issue 14): a PHP hello through FastCGI and a CGI hello.

Usage (as root, from the repository; nginx, lighttpd, wrk, php8.2-fpm and
php8.2-cgi installed):

    python3 benches/dynamic.py --tessera /work/bench-bin/tessera-dyn            # 3 rounds of 4 s
    python3 benches/dynamic.py --tessera /work/bench-bin/tessera-dyn --quick    # 1 round of 2 s

Options: --rounds N, --duration SECONDS, --php-workers N (default 4),
--tests php-c10,php-c50,cgi-c10,cgi-c50, --servers nginx,lighttpd,tessera
(add nginx-keepconn for nginx with fastcgi_keep_conn, tessera-keepconn for
Tessera with keep-conn), --tessera-upstream
'TOML lines for Tessera's [[upstream]]' (e.g. 'keepalive = 4'),
--cgi-max-processes N (Tessera's [vhost.cgi] max-processes, default 64),
--out DIR (default target/bench-dynamic). The tessera binary must be a
release build. The exit status is 1 when a server gave errors or wrong answers.

What it does (benches/harness.py's method, whose helpers it imports):

- PHP: one document root with hello.php (`<?php echo "hello";`), served by
  - nginx + php-fpm: what Debian's `snippets/fastcgi-php.conf` does
    (`try_files` checks the script; a new connection to php-fpm per request,
    nginx's default);
  - lighttpd + php-cgi: `fastcgi.server` with `bin-path`, `max-procs` 1,
    `PHP_FCGI_CHILDREN` = N (lighttpd starts php-cgi, which forks N workers),
    `check-local`;
  - Tessera + php-fpm: `[[upstream]]` on the pool's Unix socket and
    `modules = ["fastcgi", "static-file"]` (a new connection to php-fpm
    per request, as nginx: `keep-conn` is off by default; the server
    `tessera-keepconn` turns it on with `max-connections` = the PHP workers
    per Tessera worker).
  nginx and Tessera each get their own php-fpm master with the same pool:
  `pm = static`, N workers, `pm.max_requests = 0`, a Unix socket; php-cgi
  gets `PHP_FCGI_MAX_REQUESTS = 0`, so no worker is restarted during a run
  (checked: a changed set of PHP processes is reported). Both SAPIs read
  Debian's php.ini of their own (identical on Debian 12; the meta data say).
- CGI: hello.cgi, a `#!/bin/sh` script (Content-Type, blank line, hello),
  under lighttpd mod_cgi (`cgi.assign = (".cgi" => "")`) and Tessera's `cgi`
  module (`[vhost.cgi] assign = { ".cgi" = "" }`, `max-processes` above the
  load's concurrency so that none gets 503). nginx has no CGI. When the
  tessera binary has no `cgi` module (`tessera -t` rejects the configuration)
  the CGI tests are skipped with a message.
- Web servers: harness.py's production configurations (worker count = cores,
  keep-alive, access log off). Every answer is checked before the rounds and
  after them (status 200, the body exactly "hello" or "hello\\n").
- Load: wrk keep-alive at c=10 and c=50, interleaved rounds (each round runs
  every test on every server; the servers' order rotates from round to
  round), a 1 s warm-up before the first round.
- Measured per run: req/s, p50/p99 latency, errors (socket errors and
  non-2xx, which must be 0), CPU per request from /proc ticks: the web
  server's processes (utime + stime), and the back end's: the PHP processes
  (its own php-fpm tree, or the php-cgi processes under lighttpd) and the
  children the server reaped (cutime + cstime: the CGI scripts), apart and
  summed. The ratio is to nginx for PHP and to lighttpd for CGI.
  Stalled connections: wrk counts neither a request that never gets its
  answer nor (in a run shorter than its timeout) a timeout; so Little's law
  (req/s x wrk's mean latency = connections busy) gives the connections that
  hung, reported as a problem when more than a fifth of them.
- Output: target/bench-dynamic/results.md and results.json, and readme.md,
  a short table ready to paste into the README.

Only 127.0.0.1 is loaded; every tool runs with a time limit, every wait is
bounded, and every process started is stopped at the end (process groups,
and what a server spawned into groups of its own), also on Ctrl-C or SIGTERM.
"""

import argparse
import datetime
import hashlib
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no benches/__pycache__ from importing harness
import harness  # noqa: E402
from harness import CORES, HZ, REPO, Test  # noqa: E402

PHP_FPM = "/usr/sbin/php-fpm8.2"
PHP_CGI = "/usr/bin/php-cgi"
HELLO_PHP = '<?php echo "hello";'
HELLO_CGI = "#!/bin/sh\necho 'Content-Type: text/plain'\necho\necho hello\n"
BODY = {"php": b"hello", "cgi": b"hello\n"}

TESTS = [
    Test("php-c10", "PHP hello (FastCGI), wrk c=10, keep-alive", "wrk", "/hello.php", 10, "php"),
    Test("php-c50", "PHP hello (FastCGI), wrk c=50, keep-alive", "wrk", "/hello.php", 50, "php"),
    Test("cgi-c10", "CGI hello (sh), wrk c=10, keep-alive", "wrk", "/hello.cgi", 10, "cgi"),
    Test("cgi-c50", "CGI hello (sh), wrk c=50, keep-alive", "wrk", "/hello.cgi", 50, "cgi"),
]
# the servers of each group, the first one the base of the ratios
GROUPS = {"php": ["nginx", "lighttpd", "tessera", "nginx-keepconn", "tessera-keepconn"], "cgi": ["lighttpd", "tessera"]}
DEFAULT_SERVERS = ["nginx", "lighttpd", "tessera"]
LABELS = {("php", "nginx"): "nginx + php-fpm", ("php", "nginx-keepconn"): "nginx + php-fpm, keep_conn",
          ("php", "lighttpd"): "lighttpd + php-cgi", ("php", "tessera"): "Tessera + php-fpm",
          ("php", "tessera-keepconn"): "Tessera + php-fpm, keep-conn",
          ("cgi", "lighttpd"): "lighttpd mod_cgi", ("cgi", "tessera"): "Tessera cgi"}


# --------------------------------------------------------------------------
# Configurations: harness.py's, with the back end added


def nginx_php(w, port, root, variant, sock, workers, keepconn=False):
    target, extra, http = f"unix:{sock}", "", ""
    if keepconn:
        # nginx's keepalive is per worker process; a kept connection holds a
        # php-fpm worker, so keep no more than the pool has
        target, extra = "php", "fastcgi_keep_conn on;"
        http = f"upstream php {{ server unix:{sock}; keepalive {max(1, workers // CORES)}; }}"
    # Debian's snippets/fastcgi-php.conf, whose relative include would be
    # looked for beside this configuration
    loc = f"""location / {{ }}
        location ~ \\.php$ {{
            fastcgi_split_path_info ^(.+?\\.php)(/.*)$;
            try_files $fastcgi_script_name =404;
            set $path_info $fastcgi_path_info;
            fastcgi_param PATH_INFO $path_info;
            fastcgi_index index.php;
            include /etc/nginx/fastcgi.conf;
            fastcgi_pass {target};
            {extra}
        }}"""
    return harness.nginx_conf(w, port, root, "plain", http_extra=http, loc=loc)


def lighttpd_php(w, port, root, variant, workers):
    return harness.lighttpd_conf(w, port, root, "plain") + f"""
server.modules += ("mod_fastcgi")
fastcgi.server = ( ".php" => ((
    "socket" => "{w}/php.sock",
    "bin-path" => "{PHP_CGI}",
    "max-procs" => 1,
    "bin-environment" => ( "PHP_FCGI_CHILDREN" => "{workers}", "PHP_FCGI_MAX_REQUESTS" => "0" ),
    "check-local" => "enable",
    "broken-scriptfilename" => "enable"
)) )
"""


def lighttpd_cgi(w, port, root, variant):
    return harness.lighttpd_conf(w, port, root, "plain") + 'server.modules += ("mod_cgi")\ncgi.assign = (".cgi" => "")\n'


def tessera_php(w, port, root, variant, sock, upstream_extra="", fastcgi_extra=""):
    return harness.tessera_conf(w, port, root, "plain", modules='["fastcgi", "static-file"]', vhost_extra=f"""
[vhost.fastcgi]
upstream = "php"
{fastcgi_extra}

[[upstream]]
name = "php"
servers = ["unix:{sock}"]
{upstream_extra}
""")


def tessera_cgi(w, port, root, variant, max_processes):
    return harness.tessera_conf(w, port, root, "plain", modules='["cgi", "static-file"]', vhost_extra=f"""
[vhost.cgi]
assign = {{ ".cgi" = "" }}
max-processes = {max_processes}
timeout = 30
""")


def fpm_conf(w, workers):
    return f"""[global]
pid = {w}/php-fpm.pid
error_log = {w}/php-fpm.log
daemonize = no

[bench]
listen = {w}/php.sock
listen.mode = 0666
listen.backlog = 1024
pm = static
pm.max_children = {workers}
pm.max_requests = 0
"""


# --------------------------------------------------------------------------
# Processes


def tree(server):
    """pid -> (start time, pgid, own ticks, reaped children's ticks, back end?) over
    the server's process tree (harness.Server.pids lists a parent before its
    children). The back end: a php-fpm tree (Fpm) whole; under a web server,
    the children with a name other than its own (php-cgi, CGI scripts) and
    their descendants."""
    out, name = {}, None
    for p in harness.Server.pids(server):
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        f = st[st.rindex(")") + 2:].split()
        ppid = int(f[1])
        if name is None:
            name, back = comm, isinstance(server, Fpm)
        else:
            back = comm != name or (ppid in out and out[ppid][4])
        out[p] = (f[19], int(f[2]), int(f[11]) + int(f[12]), int(f[13]) + int(f[14]), back)
    return out


def back_end(server):
    """(ticks, pids) of the back end: its processes' own ticks, plus the
    ticks of every child reaped in the tree (CGI scripts, a PHP worker that
    exited)."""
    t = tree(server)
    return sum((own if back else 0) + reaped for _, _, own, reaped, back in t.values()), \
        {p for p, v in t.items() if v[4]}


class Front(harness.Server):
    """A web server: harness.Server with this file's configuration writer
    `writer`; its pids() are the web server's own processes (so harness's CPU
    and RSS figures leave the back end out); `fpm` is its php-fpm, if any."""

    def __init__(self, label, binary, group, work, root, tessera_bin, writer, fpm=None, **conf):
        self.label, self.writer, self.fpm = label, writer, fpm
        super().__init__(binary, group, work, root, tessera_bin, conf_args=conf, tag=f"{label}-{group}")

    def write_conf(self, **conf):
        with open(self.conf, "w") as f:
            f.write(self.writer(self.dir, self.port, self.root, self.variant, **conf))

    def pids(self):
        return [p for p, v in tree(self).items() if not v[4]]

    def back_end(self):
        ticks, pids = back_end(self)
        if self.fpm and self.fpm.proc:
            t2, p2 = back_end(self.fpm)
            ticks, pids = ticks + t2, pids | p2
        return ticks, pids

    def stop(self):
        """harness's stop (SIGTERM to the group, then SIGKILL), then SIGKILL to
        the groups of what is left of the tree (lighttpd starts php-cgi in a
        group of its own)."""
        if not self.proc:
            return
        before = tree(self)
        super().stop()
        for p, (start, pgid, *_rest) in before.items():
            try:
                with open(f"/proc/{p}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            if st[st.rindex(")") + 2:].split()[19] == start and pgid != os.getpgrp():
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except OSError:
                    pass


class Fpm(harness.Server):
    """A php-fpm master (foreground, own session) with one static pool on a
    Unix socket; harness.Server's stop, pids and cpu_ticks."""

    def __init__(self, label, work, workers):
        self.name, self.proc, self.port = f"php-fpm-{label}", None, None
        self.dir = os.path.join(work, self.name)
        os.makedirs(self.dir, exist_ok=True)
        self.sock = os.path.join(self.dir, "php.sock")
        self.conf = os.path.join(self.dir, "php-fpm.conf")
        with open(self.conf, "w") as f:
            f.write(fpm_conf(self.dir, workers))
        # as root, the workers run as root (-R), as lighttpd's php-cgi does
        self.cmd = [PHP_FPM, "-F", "-y", self.conf] + (["-R"] if os.geteuid() == 0 else [])

    def start(self):
        err = open(os.path.join(self.dir, "stderr"), "w")
        self.proc = subprocess.Popen(self.cmd, stdout=err, stderr=err, stdin=subprocess.DEVNULL,
                                     start_new_session=True, cwd=self.dir)
        harness.STARTED.append(self)
        deadline = time.time() + 15
        while time.time() < deadline and self.proc.poll() is None:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(0.5)
                    s.connect(self.sock)
                    return True
            except OSError:
                time.sleep(0.05)
        self.stop()
        sys.stderr.write(f"dynamic: {self.name} did not start:\n")
        for f in ("stderr", "php-fpm.log"):
            p = os.path.join(self.dir, f)
            if os.path.exists(p):
                sys.stderr.write(open(p).read()[-2000:])
        return False


def check(srv, test, tries=1):
    """Problems with srv's answer to test's URL ([] = none); `tries` attempts
    0.5 s apart (a back end that is still starting)."""
    want = hashlib.sha256(BODY[test.variant]).hexdigest()
    for i in range(tries):
        try:
            status, _, sha, n = harness.fetch(srv.port, test.path)
            if status == 200 and sha == want:
                return []
            problem = f"{test.path}: status {status}, {n} bytes" + ("" if sha == want else " (not the hello body)")
        except Exception as e:  # noqa: BLE001
            problem = f"{test.path}: {e}"
        if i + 1 < tries:
            time.sleep(0.5)
    return [problem]


def config_error(tessera_bin, conf):
    """`tessera -t`'s complaint about conf, or None."""
    r = subprocess.run([tessera_bin, "-t", "-c", conf], capture_output=True, text=True, timeout=30)
    if r.returncode == 0:
        return None
    return ((r.stderr or r.stdout).strip().splitlines() or [f"exit status {r.returncode}"])[-1]


# --------------------------------------------------------------------------
# Report


def summarize(results, tests, groups):
    """harness.summarize's medians, plus p50, the back end's and the summed
    CPU per request, PHP worker restarts, and the ratios to each group's base."""
    rows = []
    for t in tests:
        servers = groups[t.variant]
        row = harness.summarize(results, [t], servers)[0]
        base = row["servers"].get(servers[0], {})
        for s, v in row["servers"].items():
            ok = [r for r in results[(t.name, s)] if "failed" not in r]
            v["label"] = LABELS[(t.variant, s)]
            v.pop("ratio", None)
            v.pop("cpu_ratio", None)
            if not ok:
                continue
            v["p50_ms"] = statistics.median(r["p50_ms"] for r in ok)
            v["back_cpu_us_per_req"] = statistics.median(r["back_cpu_us_per_req"] for r in ok)
            v["total_cpu_us_per_req"] = statistics.median(r["total_cpu_us_per_req"] for r in ok)
            v["back_pids_changed"] = sum(r["back_pids_changed"] for r in ok)
            v["stalled_conns"] = max(r["stalled_conns"] for r in ok)
            v["check_after"] = results[(t.name, s)][-1].get("check_after", [])
            if base.get("median"):
                v["ratio"] = v["median"] / base["median"]
                v["cpu_ratio"] = v["total_cpu_us_per_req"] / base["total_cpu_us_per_req"]
        row["base"] = servers[0]
        rows.append(row)
    return rows


def markdown(meta, rows):
    fmt = harness.fmt_num
    lines = [f"Dynamic-content benchmark of {meta['date']} ({meta['mode']} mode, {meta['rounds']} interleaved "
             f"round(s) of {meta['duration']} s per test and server), on {meta['machine']}; load average "
             f"at the start {' '.join(meta['loadavg_at_start'])}. {meta['php']}",
             "",
             "Median req/s [min-max over rounds] with ×ratio to the first server of the test (nginx for PHP, "
             "lighttpd for CGI); p50 and p99 latency; CPU per request in µs: the web server's, the back end's "
             "(PHP workers; for CGI the scripts' processes) and their sum with ×ratio; errors (socket errors "
             "and non-2xx: must be 0), and connections that got no answer during a run (see benches/dynamic.py).",
             "",
             "| test | server | req/s | ×ratio | p50 / p99 ms | web CPU µs | back end CPU µs | total CPU µs | errors |",
             "|---|---|---|---|---|---|---|---|---|"]
    problems = []
    for row in rows:
        for s, v in row["servers"].items():
            if "median" not in v:
                lines.append(f"| {row['desc']} | {v['label']} | FAILED: {v['failed']} | | | | | | |")
                problems.append(f"{v['label']} in {row['test']}: {v['failed']}")
                continue
            ratio = f"×{v['ratio']:.2f}" if v.get("ratio") else ""
            cpu_ratio = f" (×{v['cpu_ratio']:.2f})" if v.get("cpu_ratio") and s != row["base"] else ""
            errors = f"**{v['errors']}**" if v["errors"] else "0"
            if v["stalled_conns"]:
                errors += f", **{v['stalled_conns']} connections stalled**"
            lines.append(f"| {row['desc']} | {v['label']} | {fmt(v['median'])} [{fmt(v['min'])}-{fmt(v['max'])}] | "
                         f"{ratio} | {v['p50_ms']:.2f} / {v['p99_ms']:.2f} | {v['cpu_us_per_req']:.1f} | "
                         f"{v['back_cpu_us_per_req']:.1f} | {v['total_cpu_us_per_req']:.1f}{cpu_ratio} | {errors} |")
            for c in v.get("check", []) + v.get("check_after", []):
                problems.append(f"wrong answer from {v['label']} in {row['test']}: {c}")
            if v["errors"]:
                problems.append(f"{v['errors']} errors from {v['label']} in {row['test']}")
            if v["stalled_conns"]:
                problems.append(f"{v['label']} in {row['test']}: up to {v['stalled_conns']} of "
                                f"{TEST_BY_NAME[row['test']].conns} connections had no answer in a run")
            if v["back_pids_changed"] and TEST_BY_NAME[row["test"]].variant == "php":
                problems.append(f"the back end of {v['label']} in {row['test']} changed processes in "
                                f"{v['back_pids_changed']} run(s)")
    if meta.get("skipped"):
        lines += ["", f"Skipped: {meta['skipped']}"]
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + "."]
    lines += [f"- {p}" for p in problems]
    return "\n".join(lines) + "\n", problems


def readme_table(meta, rows):
    """The short table for the README: req/s ×ratio and total CPU per request
    (web + back end) per test and server."""
    out = []
    for group, title in (("php", "PHP hello"), ("cgi", "CGI hello")):
        grows = [r for r in rows if r["test"].startswith(group)]
        if not grows:
            continue
        servers = [s for s in GROUPS[group] if any(s in r["servers"] for r in grows)]
        labels = [LABELS[(group, s)] for s in servers]
        out += [f"| {title} | " + " | ".join(labels) + " |", "|---|" + "---|" * len(servers)]
        for r in grows:
            cells = []
            for s in servers:
                v = r["servers"].get(s, {})
                if "median" not in v:
                    cells.append("FAILED" if v else "")
                    continue
                rate = f"{harness.fmt_num(v['median'])} req/s" if s == r["base"] else f"×{v['ratio']:.2f}"
                cpu = f"{v['total_cpu_us_per_req']:.0f} µs ({v['cpu_us_per_req']:.0f} + {v['back_cpu_us_per_req']:.0f})"
                cells.append(f"{rate} · {cpu}" + (f" · **{v['errors']} errors**" if v["errors"] else "")
                             + (f" · **{v['stalled_conns']} connections stalled**" if v["stalled_conns"] else ""))
            out.append(f"| wrk c={TEST_BY_NAME[r['test']].conns} | " + " | ".join(cells) + " |")
        out.append("")
    out.append(f"Median of {meta['rounds']} interleaved round(s) of {meta['duration']} s (wrk, keep-alive): req/s of "
               "the first server, ×ratio for the others · CPU per request in µs: total (web server + back end: the "
               f"PHP workers, or the CGI scripts' processes). {meta['php']}")
    return "\n".join(out) + "\n"


TEST_BY_NAME = {t.name: t for t in TESTS}


# --------------------------------------------------------------------------


def start_servers(args, work, root, tests, servers, meta):
    """The Front servers per group (and their php-fpm), started; tests a
    server could not serve get a failed result in meta['failed']."""
    groups = {g: [s for s in GROUPS[g] if s in servers] for g in GROUPS}
    fronts = {}
    n = args.php_workers
    if any(t.variant == "php" for t in tests):
        for s in groups["php"]:
            if s != "lighttpd" and not os.path.exists(PHP_FPM):
                print(f"dynamic: {PHP_FPM} missing: no {s}", flush=True)
                continue
            fpm = None
            if s != "lighttpd":
                fpm = Fpm(s, work, n)
                if not fpm.start():
                    continue
            if s.startswith("nginx"):
                f = Front(s, "nginx", "php", work, root, args.tessera, nginx_php, fpm, sock=fpm.sock, workers=n,
                          keepconn=s == "nginx-keepconn")
            elif s == "lighttpd":
                f = Front(s, "lighttpd", "php", work, root, args.tessera, lighttpd_php, workers=n)
            elif s == "tessera-keepconn":
                # FCGI_KEEP_CONN: each kept connection holds a PHP worker, so
                # at most workers / Tessera's workers connections per worker
                per = max(1, n // (os.cpu_count() or 1))
                f = Front(s, "tessera", "php", work, root, args.tessera, tessera_php, fpm, sock=fpm.sock,
                          upstream_extra=f"max-connections = {per}\n" + args.tessera_upstream,
                          fastcgi_extra="keep-conn = true")
            else:
                f = Front(s, "tessera", "php", work, root, args.tessera, tessera_php, fpm, sock=fpm.sock,
                          upstream_extra=args.tessera_upstream)
            if f.start():
                fronts[("php", s)] = f
    if any(t.variant == "cgi" for t in tests) and "tessera" in groups["cgi"]:
        f = Front("tessera", "tessera", "cgi", work, root, args.tessera, tessera_cgi,
                  max_processes=args.cgi_max_processes)
        err = config_error(args.tessera, f.conf)
        if err:
            meta["skipped"] = (f"the CGI tests: this tessera ({args.tessera}) does not take the cgi "
                               f"configuration ({err})")
            print(f"dynamic: skipping {meta['skipped']}", flush=True)
        else:
            if "lighttpd" in groups["cgi"]:
                lf = Front("lighttpd", "lighttpd", "cgi", work, root, args.tessera, lighttpd_cgi)
                if lf.start():
                    fronts[("cgi", "lighttpd")] = lf
            if f.start():
                fronts[("cgi", "tessera")] = f
    return groups, fronts


def measure(srv, test, args, root):
    """harness.measure (the web server's CPU, as Front.pids leaves the back end
    out) with the back end's CPU ticks read around it."""
    b0, pids0 = srv.back_end()
    r = harness.measure(srv, test, args, root)
    b1, pids1 = srv.back_end()
    n = max(1, r["requests"])
    r["back_cpu_us_per_req"] = (b1 - b0) / HZ * 1e6 / n
    r["total_cpu_us_per_req"] = r["cpu_us_per_req"] + r["back_cpu_us_per_req"]
    r["back_pids_changed"] = int(pids0 != pids1)
    # Little's law: connections with a request outstanding, on average. wrk
    # leaves a request that never gets its answer out of its latencies and, in
    # a run shorter than its timeout, out of its errors: a server that leaves
    # connections hanging shows here (and the req/s are those of the others).
    busy = r["rps"] * r["mean_ms"] / 1e3
    r["stalled_conns"] = round(test.conns - busy) if busy < 0.8 * test.conns else 0
    return r


def main():
    signal.signal(signal.SIGTERM, harness.on_signal)
    ap = argparse.ArgumentParser(description="PHP (FastCGI) and CGI hello benchmark; see the docstring")
    ap.add_argument("--tessera", required=True, help="the tessera binary (release build)")
    ap.add_argument("--quick", action="store_true", help="1 round, 2 s per run")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--duration", type=int, help="seconds per run")
    ap.add_argument("--php-workers", type=int, default=4, help="PHP workers per server (default 4)")
    ap.add_argument("--tests", help="comma-separated: " + ",".join(t.name for t in TESTS))
    ap.add_argument("--servers", help="comma-separated (default nginx,lighttpd,tessera; also nginx-keepconn)")
    ap.add_argument("--tessera-upstream", default="", help="TOML lines for Tessera's [[upstream]] of php-fpm "
                    "(e.g. 'keepalive = 4'; \\n between lines)")
    ap.add_argument("--cgi-max-processes", type=int, default=64, help="Tessera's [vhost.cgi] max-processes")
    ap.add_argument("--out", default=os.path.join(REPO, "target", "bench-dynamic"))
    args = ap.parse_args()
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.duration = args.duration or (2 if args.quick else 4)
    args.tessera = os.path.abspath(args.tessera)
    args.tessera_upstream = args.tessera_upstream.replace("\\n", "\n")
    tests = TESTS
    if args.tests:
        tests = [t for t in TESTS if t.name in args.tests.split(",")]
        if len(tests) != len(args.tests.split(",")):
            sys.exit(f"dynamic: unknown test in {args.tests}; known: {[t.name for t in TESTS]}")
    servers = args.servers.split(",") if args.servers else DEFAULT_SERVERS
    missing = [s for s in servers if s not in GROUPS["php"]]
    if missing:
        sys.exit(f"dynamic: unknown servers {missing}; known: {GROUPS['php']}")
    servers = [s for s in servers if s.startswith("tessera") or shutil.which(s.split("-")[0])]
    for tool in ("wrk", PHP_CGI):
        if not shutil.which(tool):
            sys.exit(f"dynamic: {tool} is required")
    if not os.access(args.tessera, os.X_OK):
        sys.exit(f"dynamic: {args.tessera} is not an executable")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    ini = [open(f"/etc/php/8.2/{sapi}/php.ini").read() if os.path.exists(f"/etc/php/8.2/{sapi}/php.ini") else None
           for sapi in ("fpm", "cgi")]
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full", "rounds": args.rounds, "duration": args.duration,
        "machine": harness.machine(), "loadavg_at_start": open("/proc/loadavg").read().split()[:3],
        "php_workers": args.php_workers,
        "php": (f"PHP: {args.php_workers} workers per server (php-fpm `pm = static`, `pm.max_requests = 0`, "
                f"a Unix socket; php-cgi `PHP_FCGI_CHILDREN={args.php_workers}`, `PHP_FCGI_MAX_REQUESTS=0`); "
                f"fpm's and cgi's php.ini are {'identical' if ini[0] == ini[1] else 'DIFFERENT'}."),
        "tessera_upstream": args.tessera_upstream,
        "versions": {
            "nginx": harness.version_of(["nginx", "-v"], r"nginx/([\d.]+)"),
            "lighttpd": harness.version_of(["lighttpd", "-v"], r"lighttpd/([\d.]+)"),
            "tessera": harness.version_of([args.tessera, "--version"]) + f" ({args.tessera})",
            "php-fpm": harness.version_of([PHP_FPM, "-v"], r"PHP ([\d.]+)"),
            "php-cgi": harness.version_of([PHP_CGI, "-v"], r"PHP ([\d.]+)"),
            "wrk": harness.version_of(["wrk", "-v"], r"wrk (\S+)"),
        },
    }
    work = tempfile.mkdtemp(prefix="tessera-bench-dyn-")
    os.chmod(work, 0o755)
    root = os.path.join(work, "www")
    os.makedirs(root)
    os.chmod(root, 0o755)
    for name, text, mode in (("hello.php", HELLO_PHP, 0o644), ("hello.cgi", HELLO_CGI, 0o755),
                             ("index.html", "static\n", 0o644)):
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(root, name), mode)
    results = {}
    try:
        groups, fronts = start_servers(args, work, root, tests, servers, meta)
        print(f"dynamic: document root {root}; started "
              f"{', '.join(f'{s}({g}):{f.port}' for (g, s), f in fronts.items())}", flush=True)
        tests = [t for t in tests if any(g == t.variant for g, _ in fronts)]
        groups = {g: [s for s in groups[g] if (g, s) in fronts] for g in groups}
        checked = {}
        for t in tests:
            for s in groups[t.variant]:
                checked[(t.name, s)] = check(fronts[(t.variant, s)], t, tries=20)
                if checked[(t.name, s)]:
                    print(f"dynamic: {s} {t.name}: WRONG ANSWER, not measured: {checked[(t.name, s)]}", flush=True)
                    results[(t.name, s)] = [{"failed": "wrong answer: " + checked[(t.name, s)][0],
                                             "check": checked[(t.name, s)]}]
        for rnd in range(args.rounds):
            for t in tests:
                order = groups[t.variant][rnd % len(groups[t.variant]):] + groups[t.variant][:rnd % len(groups[t.variant])]
                for s in order:
                    if checked[(t.name, s)]:
                        continue
                    srv = fronts[(t.variant, s)]
                    if rnd == 0:
                        harness.warm(srv, t)
                    try:
                        r = measure(srv, t, args, root)
                    except Exception as e:  # noqa: BLE001
                        r = {"failed": str(e)[:300]}
                    r["check"] = []
                    results.setdefault((t.name, s), []).append(r)
                    if "failed" in r:
                        print(f"  round {rnd + 1} {t.name:8} {s:14} FAILED: {r['failed']}", flush=True)
                    else:
                        print(f"  round {rnd + 1} {t.name:8} {s:14} {r['rps']:8.0f} req/s  p50 {r['p50_ms']:6.2f} "
                              f"p99 {r['p99_ms']:7.2f} ms  cpu web {r['cpu_us_per_req']:6.1f} + back "
                              f"{r['back_cpu_us_per_req']:6.1f} = {r['total_cpu_us_per_req']:6.1f} us/req  "
                              f"errors {r['errors']}  stalled {r['stalled_conns']}", flush=True)
        for t in tests:
            for s in groups[t.variant]:
                if not checked[(t.name, s)]:
                    results[(t.name, s)][-1]["check_after"] = check(fronts[(t.variant, s)], t)
    except KeyboardInterrupt:
        print("dynamic: interrupted; stopping the servers", flush=True)
        sys.exit(130)
    finally:
        for srv in reversed(harness.STARTED):
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)

    rows = summarize(results, tests, groups)
    md, problems = markdown(meta, rows)
    table = readme_table(meta, rows)
    md += "\n## For the README\n\n" + table
    os.makedirs(args.out, exist_ok=True)
    for name, text in (("results.md", md), ("readme.md", table)):
        with open(os.path.join(args.out, name), "w") as f:
            f.write(text)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "tests": rows, "runs": {f"{k[0]}/{k[1]}": v for k, v in results.items()}}, f, indent=1)
    print()
    print(md)
    print(f"dynamic: wrote {args.out}/results.md, results.json and readme.md")
    if problems:
        print(f"dynamic: {len(problems)} problem(s): errors, stalled connections, wrong answers or restarted "
              "back ends (see above)")
        sys.exit(1)


if __name__ == "__main__":
    main()
