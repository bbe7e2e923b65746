#!/usr/bin/env python3
"""Side-by-side static-file benchmark: Tessera against nginx, lighttpd and h2o.

Run it through `benches/run.sh` (which installs the tools and builds Tessera);
`benches/run.sh --help` lists the options. What it does:

- writes a fair production configuration for each server into a temporary
  directory (worker count = cores, sendfile, open-file cache, keep-alive, access
  log off for throughput runs and on, buffered, for the logging runs) and serves
  one document root on 127.0.0.1 from all of them: `benches/make-docroot.sh`
  plus a tree of 10,000 small files (`/many/dNN/fNN.html`);
- checks every URL a test loads on every server (status 200, the exact bytes of
  the file, the demo pipeline's headers): a fast wrong answer is a failure;
- runs the test matrix in interleaved rounds (for each round, each test, each
  server: A B C, A B C, ...) so that drift on a noisy machine cancels;
- measures requests per second (MiB/s for the large file), p99 latency, errors
  (socket errors, non-2xx answers, short bodies), each server's CPU time per
  request and per MiB (utime + stime from /proc for all of the server's
  processes over the run) and its resident memory in the middle of the run;
- prints and writes the medians (with min-max) and each server's ratio to nginx
  as Markdown and JSON.

`--proxy` runs the reverse-proxy tests instead (target/bench-proxy): one
upstream, an nginx with 1 worker process, access log off and keep-alive,
serves the same document root on its own port; every front server proxies
every request to it with keep-alive to it where the server offers it (nginx
`upstream` + `keepalive 64`, h2o `proxy.reverse.url`, Tessera's `proxy` module
and an `[[upstream]]`; lighttpd 1.4.69's mod_proxy closes the connection after
each request whatever its configuration). nginx sends the client's Host and
the forwarding fields Tessera sends by default (`proxy_set_header` Host,
X-Forwarded-For, X-Real-IP, X-Forwarded-Proto, X-Forwarded-Host), so that both
send the upstream the same request. The answers are checked and
measured through the front; CPU per request is the front's process tree only.
The upstream's CPU per request and the connections it accepted per run (from
its stub_status) are given beside, so that a front that opens a new
connection for each request shows.

Server "floor" (the plain tests only) is `benches/floor.c`, built here with
cc: a static server in 280 lines of C that does only what every server must
(an epoll loop per core with its own SO_REUSEPORT listener, one recv and one
send per cached small file, sendfile for large ones, no logging, no checks).
It is no competitor: it shows how far the load generator, on the same cores,
lets any server go, so that a target beyond the floor reads as the machine's
limit, not the server's. "floor-shared" (named in --servers only) is the same
with one listener shared by its workers under EPOLLEXCLUSIVE, as nginx runs
without `reuseport`.

`--tessera-b PATH` adds a server "tessera-b": a second Tessera binary with the
same configuration as "tessera", for an A/B of two builds in one run;
`--tessera-b-static LINES` adds TOML lines to its [vhost.static-file] (with
the same binary twice: an A/B of two configurations).

The servers' configurations are in confs.py, the report's tables in report.py.

Only 127.0.0.1 is loaded; every tool runs with a time limit.
"""

import argparse
import datetime
import hashlib
import http.client
import json
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no benches/__pycache__ from importing its siblings
import confs  # noqa: E402
from confs import CONF_WRITERS, CORES, UPSTREAM_STATUS, server_cmd  # noqa: E402
from report import markdown, summarize  # noqa: E402
# benches/dynamic.py uses these through harness
from confs import lighttpd_conf, nginx_conf, tessera_conf  # noqa: E402,F401
from report import fmt_num  # noqa: E402,F401

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HZ = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024
# "tessera-actix" is Tessera with `http1-engine = "actix"` (actix-http's engine
# in place of Tessera's own), so that one run compares both engines.
# "tessera-b" is a second Tessera binary (--tessera-b) beside "tessera", for an
# A/B of two builds in one run.
# "floor" is benches/floor.c (built here with cc): the least work a static
# server can do per request, so that a run shows what the load generator,
# sharing the cores, leaves possible for any server (plain tests only);
# "floor-shared" (only when named in --servers) is the same with one listener
# shared by its workers (EPOLLEXCLUSIVE, as nginx) instead of SO_REUSEPORT.
# "nginx-deferred" (only when named) is nginx with `listen ... deferred`
# (TCP_DEFER_ACCEPT, as Tessera's default `defer-accept` and h2o's).
ALL_SERVERS = ["nginx", "nginx-deferred", "lighttpd", "h2o", "tessera", "tessera-actix", "tessera-b",
               "floor", "floor-shared"]
FLOORS = ("floor", "floor-shared")
OPT_IN = ("floor-shared", "nginx-deferred")

# --------------------------------------------------------------------------
# The test matrix. `variant` selects the server configurations: "plain" (no
# access log), "log" (Combined Log Format, buffered), "pipeline" (the demo
# pipeline: headers + expires + access log; nginx and Tessera only), "proxy"
# (every request proxied to one upstream nginx; run with --proxy).


class Test:
    def __init__(self, name, desc, tool, path=None, conns=0, variant="plain",
                 quick=False, keepalive=True, metric="rps"):
        self.name, self.desc, self.tool, self.path = name, desc, tool, path
        self.conns, self.variant, self.quick = conns, variant, quick
        self.keepalive, self.metric = keepalive, metric


TESTS = [
    Test("index-c10", "wrk c=10, 151 B index.html, keep-alive", "wrk", "/index.html", 10, quick=True),
    Test("index-c100", "wrk c=100, index.html", "wrk", "/index.html", 100, quick=True),
    Test("index-c1000", "wrk c=1000, index.html", "wrk", "/index.html", 1000, quick=True),
    Test("index-c10000", "wrk c=10000, index.html", "wrk", "/index.html", 10000),
    Test("small-c100", "wrk c=100, 468 B small.html", "wrk", "/small.html", 100),
    Test("anchor-c50", "wrk c=50, 523 B png", "wrk", "/img/anchor.png", 50),
    Test("sprite-c50", "wrk c=50, 13,263 B png", "wrk", "/img/sprite.png", 50),
    Test("logo-c50", "wrk c=50, 23,619 B png", "wrk", "/img/logo.png", 50, quick=True),
    Test("100mb-c4", "wrk c=4, 100 MiB file (MiB/s)", "wrk", "/100mb.test", 4, quick=True, metric="mibs"),
    Test("ab-c50", "ab c=50, no keep-alive, index.html", "ab", "/index.html", 50, quick=True, keepalive=False),
    Test("ab-k-c50", "ab -k c=50, 523 B png", "ab", "/img/anchor.png", 50),
    Test("httperf", "httperf 1000 conns x 100 calls, fixed rate, index.html", "httperf", "/index.html", 0, quick=True),
    Test("random10k-c100", "wrk c=100, 10,000 small files in random order", "wrk-random", None, 100, quick=True),
    Test("log-index-c100", "access log on (combined), wrk c=100, index.html", "wrk", "/index.html", 100, "log", quick=True),
    Test("log-random10k-c100", "access log on, 10,000 random small files", "wrk-random", None, 100, "log"),
    Test("pipeline-index-c100", "demo pipeline (headers+expires+access log), wrk c=100", "wrk", "/index.html", 100, "pipeline", quick=True),
    Test("proxy-index-c100", "reverse proxy, wrk c=100, index.html from the upstream", "wrk", "/index.html", 100, "proxy", quick=True),
    Test("proxy-index-c10", "reverse proxy, wrk c=10, index.html from the upstream", "wrk", "/index.html", 10, "proxy", quick=True),
]

VARIANT_SERVERS = {
    "plain": ALL_SERVERS,
    "log": [s for s in ALL_SERVERS if s not in FLOORS],
    "pipeline": ["nginx", "nginx-deferred", "tessera", "tessera-b"],
    "proxy": [s for s in ALL_SERVERS if s not in FLOORS],
}
VARIANTS = ["plain", "log", "pipeline", "proxy"]


# --------------------------------------------------------------------------
# Document root


def make_docroot(root, many=True):
    """benches/make-docroot.sh, plus (`many`) the tree of 10,000 small files."""
    # the project's copy of shared/bench/make-docroot.sh, so that a clone runs alone
    script = os.path.join(REPO, "benches", "make-docroot.sh")
    subprocess.run(["bash", script, root], check=True, stdout=subprocess.DEVNULL)
    os.chmod(root, 0o755)
    if not many:
        return
    rnd = random.Random(4)
    for d in range(100):
        dd = os.path.join(root, "many", f"d{d:02d}")
        os.makedirs(dd, exist_ok=True)
        for f in range(100):
            n = rnd.randint(100, 4000)
            head = f"<html><body><p>file {d:02d}/{f:02d}</p>"
            tail = "</body></html>\n"
            with open(os.path.join(dd, f"f{f:02d}.html"), "w") as fh:
                fh.write(head + "y" * max(0, n - len(head) - len(tail)) + tail)


# --------------------------------------------------------------------------
# Servers (their configurations: confs.py)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


STARTED = []
FLOOR_BIN = None  # set by build_floor()


def build_floor(work):
    """Compiles benches/floor.c into `work`; False (with a note) without cc."""
    global FLOOR_BIN
    cc = shutil.which("cc") or shutil.which("gcc")
    out = os.path.join(work, "floor")
    if not cc or subprocess.run([cc, "-O2", "-o", out, os.path.join(HERE, "floor.c")]).returncode != 0:
        print("harness: no C compiler (cc) or floor.c did not build: servers \"floor\" left out", flush=True)
        return False
    FLOOR_BIN = out
    return True


class Server:
    """`conf_args` go to the configuration writer, `cmd_prefix` before the
    command (e.g. prlimit), `tag` names the directory (default: the variant)."""

    def __init__(self, name, variant, work, root, tessera_bin, conf_args=None, cmd_prefix=(), tag=None):
        self.name, self.variant, self.root = name, variant, root
        self.dir = os.path.join(work, f"{name}-{tag or variant}")
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o777)
        self.port = free_port()
        ext = "toml" if name.startswith("tessera") else "conf"
        self.conf = os.path.join(self.dir, f"{name}.{ext}")
        self.write_conf(**(conf_args or {}))
        self.cmd = list(cmd_prefix) + server_cmd(name, self.conf, tessera_bin)
        if name in FLOORS:  # no configuration file: its port and document root
            self.cmd = [FLOOR_BIN, str(self.port), root, str(CORES), "shared" if name == "floor-shared" else "reuseport"]
        self.proc = None
        self.upstream = None  # the upstream Server of a proxy run

    def write_conf(self, **conf_args):
        """(Re)writes the configuration file atomically (a reload reads it whole)."""
        with open(self.conf + ".new", "w") as f:
            f.write(CONF_WRITERS[self.name](self.dir, self.port, self.root, self.variant, **conf_args))
        os.replace(self.conf + ".new", self.conf)

    def start(self):
        out = open(os.path.join(self.dir, "stdout"), "w")
        err = open(os.path.join(self.dir, "stderr"), "w")
        self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                     start_new_session=True, cwd=self.dir)
        STARTED.append(self)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    time.sleep(0.2)  # let every worker come up
                    return True
            except OSError:
                time.sleep(0.05)
        self.stop()
        sys.stderr.write(f"harness: {self.name} ({self.variant}) did not start:\n")
        for f in ("stderr", "stdout", "error.log"):
            p = os.path.join(self.dir, f)
            if os.path.exists(p):
                sys.stderr.write(open(p).read()[-2000:])
        return False

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def pids(self):
        """The server's process and all its descendants."""
        children = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(d))
        out, todo = [], [self.proc.pid]
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(children.get(p, []))
        return out

    def cpu_ticks(self):
        total = 0
        for p in self.pids():
            try:
                with open(f"/proc/{p}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            fields = st[st.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total

    def rss_kib(self):
        total = 0
        for p in self.pids():
            try:
                with open(f"/proc/{p}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except OSError:
                continue
        return total


def upstream_accepts(upstream):
    """Connections the upstream nginx has accepted so far (its stub_status)."""
    c = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=10)
    try:
        c.request("GET", UPSTREAM_STATUS)
        body = c.getresponse().read().decode()
    finally:
        c.close()
    m = re.search(r"server accepts handled requests\s+(\d+)", body)
    return int(m.group(1)) if m else 0


# --------------------------------------------------------------------------
# Correctness checks


def fetch(port, path, keep=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path, headers={"Host": "localhost"})
        r = c.getresponse()
        h = hashlib.sha256()
        n = 0
        while True:
            b = r.read(1 << 20)
            if not b:
                break
            h.update(b)
            n += len(b)
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), h.hexdigest(), n
    finally:
        c.close()


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def check(server, test, root, shas):
    """Problems with the answers of `server` for the URLs of `test` ([] = none)."""
    paths = [test.path] if test.path else [f"/many/d{random.randrange(100):02d}/f{random.randrange(100):02d}.html" for _ in range(20)]
    problems = []
    for p in paths:
        fpath = os.path.join(root, p.lstrip("/"))
        if fpath not in shas:
            shas[fpath] = file_sha(fpath)
        try:
            status, hdr, sha, n = fetch(server.port, p)
        except Exception as e:  # noqa: BLE001
            problems.append(f"{p}: {e}")
            continue
        if status != 200:
            problems.append(f"{p}: status {status}")
        elif sha != shas[fpath]:
            problems.append(f"{p}: body differs from the file ({n} bytes)")
        if test.variant == "pipeline":
            if hdr.get("x-content-type-options") != "nosniff" or hdr.get("x-frame-options") != "SAMEORIGIN":
                problems.append(f"{p}: demo headers missing")
            if "max-age=300" not in hdr.get("cache-control", ""):
                problems.append(f"{p}: Cache-Control {hdr.get('cache-control')!r}, want max-age=300")
    return problems


def file_size(root, test):
    if not test.path:
        return 100  # the smallest file of the random tree
    return os.path.getsize(os.path.join(root, test.path.lstrip("/")))


# --------------------------------------------------------------------------
# Load generators


def wrk_cmd(server, test, secs):
    url = f"http://127.0.0.1:{server.port}{test.path or '/'}"
    script = os.path.join(HERE, "wrk", "random.lua" if test.tool == "wrk-random" else "report.lua")
    threads = max(1, min(CORES, test.conns))
    return ["wrk", f"-t{threads}", f"-c{test.conns}", f"-d{secs}s", "--timeout", "5s", "-s", script, url]


def run_wrk(server, test, secs, timeout):
    out = subprocess.run(wrk_cmd(server, test, secs), capture_output=True, text=True, timeout=timeout).stdout
    return parse_wrk(out)


def parse_wrk(out):
    """wrk's output (with benches/wrk/report.lua) as a dict; errors = socket errors + non-2xx."""
    m = re.search(r"WRKJSON (\{.*\})", out)
    if not m:
        raise RuntimeError(f"wrk printed no summary: {out[-500:]}")
    j = json.loads(m.group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    dur = j["duration_us"] / 1e6
    errors = j["connect"] + j["read"] + j["write"] + j["timeout"] + j["status"]
    if non2xx:
        errors = max(errors, j["connect"] + j["read"] + j["write"] + j["timeout"] + int(non2xx.group(1)))
    return {
        "requests": j["requests"], "bytes": j["bytes"], "secs": dur,
        "rps": j["requests"] / dur, "mibs": j["bytes"] / dur / MIB,
        "p50_ms": j["p50"] / 1000, "p99_ms": j["p99"] / 1000, "mean_ms": j["mean"] / 1000, "errors": errors,
        "socket_errors": {k: j[k] for k in ("connect", "read", "write", "timeout")},
    }


def run_ab(server, test, secs, timeout):
    url = f"http://127.0.0.1:{server.port}{test.path}"
    cmd = ["ab", "-q", "-r", "-t", str(secs), "-n", "100000000", "-c", str(test.conns)]
    if test.keepalive:
        cmd.append("-k")
    cmd.append(url)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout

    def num(pat, default=0.0):
        m = re.search(pat, out)
        return float(m.group(1)) if m else default

    reqs = int(num(r"Complete requests:\s+(\d+)"))
    dur = num(r"Time taken for tests:\s+([\d.]+)", 1.0)
    failed = int(num(r"Failed requests:\s+(\d+)"))
    non2xx = int(num(r"Non-2xx responses:\s+(\d+)"))
    total = num(r"Total transferred:\s+(\d+)")
    if reqs == 0:
        raise RuntimeError(f"ab completed no request: {out[-500:]}")
    return {
        "requests": reqs, "bytes": total, "secs": dur, "rps": reqs / dur,
        "mibs": total / dur / MIB, "p99_ms": num(r"\n\s+99%\s+(\d+)"),
        "errors": failed + non2xx,
    }


def run_httperf(server, test, conns, timeout):
    rate = max(1, conns // 4)  # about four seconds at full size
    cmd = ["httperf", "--hog", "--server", "127.0.0.1", "--port", str(server.port), "--uri", test.path,
           f"--num-conns={conns}", "--num-calls=100", f"--rate={rate}", "--timeout=5"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout

    def num(pat, default=0.0):
        m = re.search(pat, out)
        return float(m.group(1)) if m else default

    replies = int(num(r"replies (\d+)"))
    dur = num(r"test-duration ([\d.]+) s", 1.0)
    errors = int(num(r"Errors: total (\d+)"))
    status_ok = int(num(r"2xx=(\d+)"))
    errors += replies - status_ok
    errors += int(num(r"requests (\d+)")) - replies
    if replies == 0:
        raise RuntimeError(f"httperf got no reply: {out[-500:]}")
    return {
        "requests": replies, "bytes": 0, "secs": dur,
        "rps": replies / dur, "mibs": 0.0,
        "p99_ms": None, "reply_ms": num(r"Reply time \[ms\]: response ([\d.]+)"),
        "errors": errors,
    }


def measure(server, test, args, root):
    secs = args.duration
    limit = secs + 60
    up = server.upstream
    if up:
        a0, u0 = upstream_accepts(up), up.cpu_ticks()
    t0 = server.cpu_ticks()
    start = time.time()
    rss = [0]

    # sample RSS in the middle of the run from a helper thread
    import threading

    def sample():
        time.sleep(secs / 2)
        rss[0] = server.rss_kib()

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    if test.tool in ("wrk", "wrk-random"):
        r = run_wrk(server, test, secs, limit)
    elif test.tool == "ab":
        r = run_ab(server, test, secs, limit)
    else:
        r = run_httperf(server, test, args.httperf_conns, limit)
    th.join(timeout=5)
    cpu_s = (server.cpu_ticks() - t0) / HZ
    if up:
        # the front's connections to the upstream over the run (the status
        # request's own connection not counted), and the upstream's CPU
        r["upstream_conns"] = upstream_accepts(up) - a0 - 1
        r["upstream_cpu_us_per_req"] = (up.cpu_ticks() - u0) / HZ * 1e6 / max(1, r["requests"])
    r["wall"] = time.time() - start
    r["cpu_s"] = cpu_s
    r["cpu_us_per_req"] = cpu_s * 1e6 / max(1, r["requests"])
    r["cpu_ms_per_mib"] = cpu_s * 1e3 / (r["bytes"] / MIB) if r["bytes"] else None
    r["rss_mib"] = rss[0] / 1024
    # A short body is a wrong answer: every response must carry the whole file.
    if test.tool in ("wrk",) and test.path and r["requests"]:
        need = file_size(root, test)
        got = r["bytes"] / r["requests"]
        if got < need:
            r["errors"] += r["requests"]
            r["short_bodies"] = True
    return r


def warm(server, test):
    if test.tool in ("wrk", "wrk-random", "ab"):
        t = Test(test.name, "", "wrk" if test.tool == "ab" else test.tool, test.path, max(4, min(test.conns, 100)))
        try:
            run_wrk(server, t, 1, 30)
        except Exception:  # noqa: BLE001
            pass


# --------------------------------------------------------------------------
# The machine and the versions (the report: report.py)


def version_of(cmd, pat=r"([\d.]+)"):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        m = re.search(pat, out.stdout + out.stderr)
        return m.group(1) if m else "?"
    except Exception:  # noqa: BLE001
        return "?"


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) // 1024 // 1024
    return f"{CORES} cores ({model}), {mem} GiB, Linux {platform.release()}; the load generator runs on the same cores"


# --------------------------------------------------------------------------


def on_signal(signum, frame):
    raise KeyboardInterrupt


def main():
    signal.signal(signal.SIGTERM, on_signal)
    ap = argparse.ArgumentParser(description="Side-by-side static-file benchmark (see benches/run.sh)")
    ap.add_argument("--tessera", required=True, help="the tessera binary (release build)")
    ap.add_argument("--tessera-b", help="a second tessera binary, run as server \"tessera-b\" with "
                    "tessera's configuration (A/B of two builds in one run)")
    ap.add_argument("--proxy", action="store_true", help="the reverse-proxy tests (every server proxies "
                    "to one upstream nginx) instead of the static-file ones; --out default target/bench-proxy")
    ap.add_argument("--quick", action="store_true", help="fewer tests, 1 round, 2 s per run")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--duration", type=int, help="seconds per run")
    ap.add_argument("--tests", help="comma-separated test names (default: the mode's set)")
    ap.add_argument("--servers", help="comma-separated servers (default: every installed one)")
    ap.add_argument("--tessera-static", help="TOML lines for Tessera's [vhost.static-file] "
                    f"(default {confs.TESSERA_STATIC!r})")
    ap.add_argument("--tessera-b-static", help="TOML lines added to tessera-b's [vhost.static-file] "
                    "(with --tessera-b: the same binary for an A/B of two configurations)")
    ap.add_argument("--out", help="directory for results.md/json (default target/bench, with --proxy "
                    "target/bench-proxy)")
    args = ap.parse_args()
    args.out = args.out or os.path.join(REPO, "target", "bench-proxy" if args.proxy else "bench")
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.duration = args.duration or (2 if args.quick else 4)
    args.httperf_conns = 300 if args.quick else 1000
    if args.tessera_static is not None:
        confs.TESSERA_STATIC = args.tessera_static.replace("\\n", "\n")
    if args.tessera_b_static is not None:
        confs.TESSERA_B_STATIC = args.tessera_b_static.replace("\\n", "\n")

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tests = [t for t in TESTS if (t.quick or not args.quick) and (t.variant == "proxy") == args.proxy]
    if args.tests:
        want = args.tests.split(",")
        unknown = [w for w in want if w not in {t.name for t in TESTS}]
        if unknown:
            sys.exit(f"harness: unknown tests {unknown}; known: {[t.name for t in TESTS]}")
        tests = [t for t in TESTS if t.name in want]
    if hard < 20100:
        tests = [t for t in tests if t.conns < 10000] if hard < 10100 else tests
    installed = [s for s in ALL_SERVERS if (s.startswith("tessera") and s != "tessera-b") or s == "floor"
                 or shutil.which(s)]
    for s in OPT_IN:
        if args.servers and s in args.servers.split(",") and (s != "nginx-deferred" or "nginx" in installed):
            installed.append(s)
    if args.tessera_b:
        installed.append("tessera-b")
    servers = args.servers.split(",") if args.servers else installed
    servers = [s for s in ALL_SERVERS if s in servers and s in installed]

    work = tempfile.mkdtemp(prefix="tessera-bench-")
    os.chmod(work, 0o755)
    root = os.path.join(work, "www")
    print(f"harness: document root {root}; {len(tests)} tests x {len(servers)} servers x {args.rounds} rounds of {args.duration} s", flush=True)
    make_docroot(root, many=not args.proxy)
    if any(s in FLOORS for s in servers) and not build_floor(work):
        servers = [s for s in servers if s not in FLOORS]
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full", "rounds": args.rounds, "duration": args.duration,
        "machine": machine(), "loadavg_at_start": open("/proc/loadavg").read().split()[:3],
        "versions": {
            "nginx": version_of(["nginx", "-v"], r"nginx/([\d.]+)"),
            "lighttpd": version_of(["lighttpd", "-v"], r"lighttpd/([\d.]+)"),
            "h2o": version_of(["h2o", "-v"], r"h2o version ([\d.]+)"),
            "tessera": version_of([args.tessera, "--version"]),
            "tessera-b": version_of([args.tessera_b, "--version"]) if args.tessera_b else "?",
            "wrk": version_of(["wrk", "-v"], r"wrk (\S+)"),
        },
    }
    meta["versions"] = {k: v for k, v in meta["versions"].items() if k in servers or k == "wrk"}
    meta["binaries"] = {"tessera": args.tessera}
    if "tessera-b" in servers:
        meta["binaries"]["tessera-b"] = args.tessera_b
        meta["versions"]["tessera-b"] += f" ({args.tessera_b})"
        meta["versions"]["tessera"] += f" ({args.tessera})"
    results = {}
    shas = {}
    try:
        for variant in VARIANTS:
            vtests = [t for t in tests if t.variant == variant]
            vservers = [s for s in servers if s in VARIANT_SERVERS[variant]]
            if not vtests or not vservers:
                continue
            upstream, conf_args = None, {}
            if variant == "proxy":
                upstream = Server("nginx", "plain", work, root, args.tessera, tag="upstream",
                                  conf_args={"workers": 1, "status": True})
                if not upstream.start():
                    sys.exit("harness: the upstream nginx did not start")
                conf_args = {"upstream": upstream.port}
                print(f"harness: proxy: upstream nginx on 127.0.0.1:{upstream.port}", flush=True)
            running = []
            for s in vservers:
                srv = Server(s, variant, work, root, args.tessera_b if s == "tessera-b" else args.tessera,
                             conf_args=conf_args)
                srv.upstream = upstream
                if srv.start():
                    running.append(srv)
                else:
                    for t in vtests:
                        results[(t.name, s)] = [{"failed": "did not start"}]
            print(f"harness: {variant}: started {', '.join(f'{s.name}:{s.port}' for s in running)}", flush=True)
            if variant == "plain":
                meta["idle_rss_mib"] = {s.name: round(s.rss_kib() / 1024, 1) for s in running}
            checked = {}
            for t in vtests:
                for srv in running:
                    checked[(t.name, srv.name)] = check(srv, t, root, shas)
                    if checked[(t.name, srv.name)]:
                        print(f"harness: {srv.name} {t.name}: WRONG ANSWERS: {checked[(t.name, srv.name)][:3]}", flush=True)
            for rnd in range(args.rounds):
                for t in vtests:
                    for srv in running:
                        if rnd == 0:
                            warm(srv, t)
                        try:
                            r = measure(srv, t, args, root)
                        except Exception as e:  # noqa: BLE001
                            r = {"failed": str(e)[:300]}
                        r["check"] = checked[(t.name, srv.name)]
                        results.setdefault((t.name, srv.name), []).append(r)
                        if "failed" in r:
                            print(f"  round {rnd + 1} {t.name:22} {srv.name:9} FAILED: {r['failed']}", flush=True)
                        else:
                            val = r[t.metric]
                            unit = "MiB/s" if t.metric == "mibs" else "req/s"
                            p99 = f"{r['p99_ms']:.2f} ms" if r.get("p99_ms") is not None else "-"
                            print(f"  round {rnd + 1} {t.name:22} {srv.name:9} {val:10.0f} {unit}  p99 {p99:>9}  "
                                  f"cpu {r['cpu_us_per_req']:6.1f} us/req  errors {r['errors']}  rss {r['rss_mib']:.0f} MiB", flush=True)
            for srv in running:
                srv.stop()
            if upstream:
                upstream.stop()
    finally:
        for srv in STARTED:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)

    summary = summarize(results, tests, servers)
    os.makedirs(args.out, exist_ok=True)
    md = markdown(meta, summary, servers)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"meta": meta, "tests": summary,
                   "runs": {f"{k[0]}/{k[1]}": v for k, v in results.items()}}, f, indent=1)
    print()
    print(md)
    print(f"harness: wrote {args.out}/results.md and results.json")


if __name__ == "__main__":
    main()
