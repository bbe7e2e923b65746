#!/usr/bin/env python3
"""Resilience benchmark: Tessera against nginx under hostile or heavy load.

Run it through `benches/resilience.sh` (which installs nginx and wrk and builds
Tessera); `benches/resilience.sh --help` lists the options. Four scenarios, each
against both servers in turn (the order alternates from one scenario to the
next), each server freshly started for each scenario, all on 127.0.0.1:

1. hold: N keep-alive connections (default 20,000, the top concurrency of the
   SilkJS / lighttpd benchmark) are opened by client processes of up to 7,000
   connections each (at most 100 connects at a time per process, spread over
   the source addresses 127.0.0.1 to 127.0.0.9), each sends one GET
   of the 151 B index.html; then all are held for 60 s while requests flow over
   them: each connection sends a GET every 10 s (random phase), so there is no
   separate wrk load. Errors: connect failures, resets (closed with a request
   outstanding and no answer), drops (an idle connection closed by the server
   inside its keep-alive time), non-2xx, short bodies, timeouts (10 s). Server
   RSS (VmRSS summed over its processes) at start, peak (sampled every second)
   and 5 s after every connection was closed.
2. slowloris: wrk (c=50, keep-alive, index.html) alone for D s (unloaded), then
   with 2,000 slow connections that trickle a request head one byte a second
   and never finish it; a slow connection the server closes is opened again
   (bounded by the phase's time). Reported: the loaded throughput as a share of
   the unloaded one, and the time from connect to the server's close of each
   slow connection (median, max; client-header-timeout 10 s on both servers).
3. descriptors: the server starts under `prlimit --nofile=512` (nginx also with
   worker_rlimit_nofile 512); 2,000 connections are opened, each sends a GET and
   is held; after 5 s they are closed, and a probe request is started every
   50 ms until one succeeds: the recovery time is from the close to the first
   successful answer. Also: did a probe succeed while descriptors were
   exhausted, the server's CPU while exhausted (a spinning accept loop shows
   here), its descriptor count before and after, and whether it stayed up.
4. reload: wrk (c=50, keep-alive, index.html) for 62 s while the configuration
   is rewritten (an `X-Gen: N` response header) and reloaded every second for
   60 s (SIGHUP to Tessera and to nginx's master). Failed requests = wrk's
   socket errors + non-2xx answers; a reload counts as applied when a probe
   0.8 s later sees its X-Gen.

Every loop is bounded in count and time, every tool runs with a timeout, and
every server started is stopped at the end, also on error or Ctrl-C. Results go
to target/bench/resilience.{md,json}.
"""

import argparse
import asyncio
import collections
import datetime
import json
import multiprocessing
import os
import random
import re
import resource
import signal
import statistics
import sys
import tempfile
import time
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import HZ, REPO, Server, Test  # noqa: E402

SOURCES = [f"127.0.0.{i}" for i in range(1, 10)]
PATH = "/index.html"
REQ = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n"
HEADER_TIMEOUT = 10  # client-header-timeout / client_header_timeout for every run
WRK_PROCS = []
CHILDREN = []

# The configuration of every run: keep-alive 65 s (harness), header timeout 10 s,
# room for 20,000 connections (nginx: 25,000 per worker, as its workers do not
# share them evenly; Tessera's own default is 25,000 per worker).
BASE_CONF = {
    "nginx": {"nofile": 60000, "connections": 25000, "http_extra": f"client_header_timeout {HEADER_TIMEOUT}s;"},
    "tessera": {"connections": 25000, "server_extra": f"client-header-timeout = {HEADER_TIMEOUT}"},
    "tessera-actix": {"connections": 25000, "server_extra": f"client-header-timeout = {HEADER_TIMEOUT}"},
}


def conf_for(name, nofile=None, gen=None):
    c = dict(BASE_CONF[name])
    if name == "nginx":
        if nofile:
            c.update(nofile=nofile, connections=4096)
        if gen is not None:
            c["http_extra"] += f"\n    add_header X-Gen {gen} always;"
    elif gen is not None:
        c.update(modules='["headers", "static-file"]',
                 vhost_extra=f'[vhost.headers]\nset = {{ "X-Gen" = "{gen}" }}')
    return c


# --------------------------------------------------------------------------
# A minimal HTTP/1.1 client on asyncio protocols (thousands of connections).


class Client(asyncio.Protocol):
    """One keep-alive connection; request() sends a GET and waits for the answer."""

    def __init__(self, body_len):
        self.body_len = body_len
        self.transport = None
        self.waiter = None
        self.lost = False
        self.lost_at = None
        self.buf = b""
        self.last_head = ""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        if self.waiter is None or self.waiter.done():
            return
        i = self.buf.find(b"\r\n\r\n")
        if i < 0:
            return
        head = self.last_head = self.buf[:i].decode("latin-1")
        m = re.search(r"(?im)^content-length:\s*(\d+)", head)
        clen = int(m.group(1)) if m else None
        if clen is not None and len(self.buf) - i - 4 < clen:
            return
        try:
            status = int(head.split(" ", 2)[1])
        except (IndexError, ValueError):
            status = 0
        if not 200 <= status < 300:
            self.waiter.set_result(f"status_{status}")
        elif clen != self.body_len:
            self.waiter.set_result("short")
        else:
            self.waiter.set_result("ok")
        self.buf = self.buf[i + 4 + (clen or 0):]

    def connection_lost(self, exc):
        self.lost = True
        self.lost_at = time.monotonic()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result("short" if self.buf else "reset")

    async def request(self, st, lat, timeout=10):
        if self.lost:  # the server closed it while idle
            st["drop"] += 1
            return False
        self.waiter = asyncio.get_running_loop().create_future()
        self.buf = b""
        t = time.monotonic()
        self.transport.write(REQ)
        try:
            res = await asyncio.wait_for(asyncio.shield(self.waiter), timeout)
        except asyncio.TimeoutError:
            res = "timeout"
        st[res] += 1
        if res == "ok":
            lat.append(time.monotonic() - t)
        return res == "ok"


async def connect(port, i, proto, timeout):
    loop = asyncio.get_running_loop()
    return await asyncio.wait_for(loop.create_connection(
        proto, "127.0.0.1", port, local_addr=(SOURCES[i % len(SOURCES)], 0)), timeout)


async def probe(port, body_len, timeout=2.0):
    """One GET on a new connection: its response head when it is answered 2xx with
    the whole body, else None."""
    st, lat = collections.Counter(), []
    try:
        tr, pr = await connect(port, random.randrange(len(SOURCES)), lambda: Client(body_len), timeout)
    except (OSError, asyncio.TimeoutError):
        return None
    try:
        return pr.last_head if await pr.request(st, lat, timeout) else None
    finally:
        tr.close()


def fd_count(server):
    n = 0
    for p in server.pids():
        try:
            n += len(os.listdir(f"/proc/{p}/fd"))
        except OSError:
            pass
    return n


async def wrk(server, conns, secs):
    """wrk on the server's index.html as an asyncio subprocess (killed on cancel)."""
    cmd = harness.wrk_cmd(server, Test("r", "", "wrk", PATH, conns), secs)
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    WRK_PROCS.append(proc.pid)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), secs + 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        WRK_PROCS.remove(proc.pid)
    return harness.parse_wrk(out.decode())


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# --------------------------------------------------------------------------
# 1. hold N keep-alive connections with requests flowing


# The hold's client runs in several processes: this machine's hard RLIMIT_NOFILE
# (20,000 without CAP_SYS_RESOURCE) is too small for 20,000 sockets in one.
PER_PROCESS = 7000


async def hold_client(port, body_len, first, n, interval, pipe):
    """Opens connections first..first+n-1, reports ("ramped", connect failures), waits
    for the hold's end (a time.time()), requests until then; returns the counters."""
    loop = asyncio.get_running_loop()
    st, lat = collections.Counter(), []
    sem = asyncio.Semaphore(100)
    ramped, ramp_done, go = [0], asyncio.Event(), asyncio.Event()
    hold_end = [0.0]
    held = [0]

    async def one(i):
        tr = pr = None
        ok = False
        try:
            async with sem:
                try:
                    tr, pr = await connect(port, i, lambda: Client(body_len), 10)
                except (OSError, asyncio.TimeoutError):
                    st["connect"] += 1
            ok = pr is not None and await pr.request(st, lat)
        finally:
            ramped[0] += 1
            if ramped[0] == n:
                ramp_done.set()
        try:
            if not ok:
                return
            await go.wait()
            end = hold_end[0]
            await asyncio.sleep(random.uniform(0, interval))
            while loop.time() < end:
                if not await pr.request(st, lat):
                    return
                await asyncio.sleep(min(interval, max(0.0, end - loop.time())))
            if pr.lost:
                st["drop"] += 1
            else:
                held[0] += 1
        finally:
            if tr is not None:
                tr.close()

    tasks = [asyncio.ensure_future(one(first + i)) for i in range(n)]
    try:
        await asyncio.wait_for(ramp_done.wait(), 180)  # every connect and first request done
    except asyncio.TimeoutError:
        pass
    pipe.send(("ramped", st["connect"]))
    end = await loop.run_in_executor(None, pipe.recv)
    hold_end[0] = loop.time() + max(0.0, end - time.time())
    go.set()
    await asyncio.wait(tasks, timeout=max(0.0, end - time.time()) + 30)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"st": dict(st), "lat": lat, "held": held[0]}


def hold_process(port, body_len, first, n, interval, pipe):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    pipe.send(("done", asyncio.run(hold_client(port, body_len, first, n, interval, pipe))))


def hold(server, body_len, n, secs, interval=10.0):
    rss = {"start": server.rss_kib(), "peak": 0}
    k = -(-n // PER_PROCESS)
    ctx = multiprocessing.get_context("fork")
    pipes = []
    for j in range(k):
        here, there = ctx.Pipe()
        lo, hi = j * n // k, (j + 1) * n // k
        p = ctx.Process(target=hold_process, args=(server.port, body_len, lo, hi - lo, interval, there), daemon=True)
        p.start()
        CHILDREN.append(p)
        pipes.append(here)

    def collect(kind, deadline):
        got = {}
        while len(got) < k and time.time() < deadline:
            rss["peak"] = max(rss["peak"], server.rss_kib())
            for j, pp in enumerate(pipes):
                if j not in got and pp.poll(0):
                    msg = pp.recv()
                    if msg[0] == kind:
                        got[j] = msg[1]
            time.sleep(0.25)
        return got

    t0 = time.time()
    ramped = collect("ramped", t0 + 200)
    ramp = time.time() - t0
    rss["opened"] = server.rss_kib()
    end = time.time() + secs
    for pp in pipes:
        pp.send(end)
    done = collect("done", end + 60)
    for p in CHILDREN:
        p.join(5)
        if p.is_alive():
            p.kill()
    CHILDREN.clear()
    time.sleep(5)
    rss["after"] = server.rss_kib()
    st, lat = collections.Counter(), []
    for d in done.values():
        st.update(d["st"])
        lat += d["lat"]
    if len(done) < k:
        st["client_process_lost"] += k - len(done)
    errors = sum(v for kk, v in st.items() if kk != "ok")
    return {
        "connections": n, "client_processes": k, "opened": n - sum(ramped.values()), "ramp_s": round(ramp, 1),
        "held_to_end": sum(d["held"] for d in done.values()),
        "requests_ok": st["ok"], "errors": errors, "error_kinds": {kk: v for kk, v in st.items() if kk != "ok"},
        "p99_ms": round(pct(lat, 0.99) * 1000, 1) if lat else None,
        "max_ms": round(max(lat) * 1000, 1) if lat else None,
        "rss_mib": {kk: round(v / 1024, 1) for kk, v in rss.items()},
        "alive": server.proc.poll() is None,
    }


# --------------------------------------------------------------------------
# 2. slowloris


class Slow(asyncio.Protocol):
    def __init__(self):
        self.lost_at = None
        self.got = b""
        self.done = asyncio.get_running_loop().create_future()

    def data_received(self, data):
        self.got += data[:64 - len(self.got)]

    def connection_lost(self, exc):
        self.lost_at = time.monotonic()
        if not self.done.done():
            self.done.set_result(True)


SLOW_HEAD = b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n" + b"".join(
    b"X-Slow-%d: %s\r\n" % (i, b"a" * 20) for i in range(200))


async def slowloris(server, body_len, n, secs):
    loop = asyncio.get_running_loop()
    before = await wrk(server, 50, secs)
    closed, stats = [], collections.Counter()
    # long enough for the first slow connections to reach the header timeout
    phase_end = loop.time() + 3 + max(secs, HEADER_TIMEOUT + 5) + 2
    open_since = {}

    async def slow(i):
        await asyncio.sleep(random.uniform(0, 2))
        while loop.time() < phase_end:
            try:
                tr, pr = await connect(server.port, i, Slow, 5)
            except (OSError, asyncio.TimeoutError):
                stats["connect_failed"] += 1
                await asyncio.sleep(1)
                continue
            t0 = time.monotonic()
            open_since[i] = t0
            stats["connections"] += 1
            try:
                k = 0
                while loop.time() < phase_end and k < len(SLOW_HEAD):
                    tr.write(SLOW_HEAD[k:k + 1])
                    k += 1
                    try:
                        await asyncio.wait_for(asyncio.shield(pr.done), 1.0)
                        break
                    except asyncio.TimeoutError:
                        pass
                if pr.lost_at is not None:
                    closed.append(pr.lost_at - t0)
                    stats["answered_408" if pr.got.startswith(b"HTTP/1.1 408") else
                          ("answered_other" if pr.got else "closed_silently")] += 1
                else:
                    stats["open_at_end"] += 1
                    if time.monotonic() - t0 > HEADER_TIMEOUT + 5:
                        stats["open_past_timeout_plus_5s"] += 1
            finally:
                open_since.pop(i, None)
                tr.close()

    tasks = [asyncio.ensure_future(slow(i)) for i in range(n)]
    try:
        await asyncio.sleep(3)
        concurrent = len(open_since)
        loaded = await wrk(server, 50, secs)
        concurrent_end = len(open_since)
        await asyncio.wait(tasks, timeout=max(1.0, phase_end - loop.time()) + 10)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    after = await wrk(server, 50, secs)
    # the unloaded throughput: the mean of the runs before and after (drift on a shared machine)
    unloaded = {"rps": (before["rps"] + after["rps"]) / 2, "errors": before["errors"] + after["errors"],
                "p99_ms": max(before["p99_ms"], after["p99_ms"])}
    return {
        "unloaded_rps_before_after": [round(before["rps"]), round(after["rps"])],
        "unloaded_rps": round(unloaded["rps"]), "loaded_rps": round(loaded["rps"]),
        "share": round(loaded["rps"] / unloaded["rps"], 3) if unloaded["rps"] else None,
        "wrk_errors": {"unloaded": unloaded["errors"], "loaded": loaded["errors"]},
        "loaded_p99_ms": loaded["p99_ms"], "unloaded_p99_ms": unloaded["p99_ms"],
        "slow_open_at_wrk_start": concurrent, "slow_open_at_wrk_end": concurrent_end,
        "closed_by_server": len(closed),
        "close_s_median": round(statistics.median(closed), 2) if closed else None,
        "close_s_min": round(min(closed), 2) if closed else None,
        "close_s_max": round(max(closed), 2) if closed else None,
        "slow": dict(stats), "alive": server.proc.poll() is None,
    }


# --------------------------------------------------------------------------
# 3. descriptor exhaustion


async def exhaust(server, body_len, n, hold_s=5):
    loop = asyncio.get_running_loop()
    fds_before = fd_count(server)
    ok_before = await probe(server.port, body_len) is not None
    held, failed = [], [0]
    sem = asyncio.Semaphore(200)

    async def one(i):
        async with sem:
            try:
                tr, _ = await connect(server.port, i, lambda: Client(body_len), 3)
            except (OSError, asyncio.TimeoutError):
                failed[0] += 1
                return
            tr.write(REQ)
            held.append(tr)

    await asyncio.gather(*(one(i) for i in range(n)))
    await asyncio.sleep(1)
    fds_full = fd_count(server)
    ok_during = await probe(server.port, body_len, 2.0) is not None
    c0 = server.cpu_ticks()
    await asyncio.sleep(hold_s)
    cpu_during = (server.cpu_ticks() - c0) / HZ / hold_s
    for tr in held:
        tr.close()
    t0 = loop.time()
    first = [None]
    probes = []

    async def one_probe():
        if await probe(server.port, body_len, 5.0) is not None and first[0] is None:
            first[0] = loop.time() - t0

    while first[0] is None and loop.time() - t0 < 30 and len(probes) < 600:
        probes.append(asyncio.ensure_future(one_probe()))
        await asyncio.sleep(0.05)
    for p in probes:
        p.cancel()
    await asyncio.gather(*probes, return_exceptions=True)
    await asyncio.sleep(3)
    ok_after = await probe(server.port, body_len) is not None
    return {
        "opened": len(held), "connect_failed": failed[0], "ok_before": ok_before,
        "request_ok_while_exhausted": ok_during, "cpu_while_exhausted": round(cpu_during, 3),
        "recovery_s": round(first[0], 3) if first[0] is not None else None,
        "probes_started": len(probes), "ok_3s_later": ok_after,
        "fds": {"before": fds_before, "exhausted": fds_full, "after": fd_count(server)},
        "alive": server.proc.poll() is None,
    }


# --------------------------------------------------------------------------
# 4. reload every second under load


async def reload(server, body_len, secs):
    loop = asyncio.get_running_loop()
    load = asyncio.ensure_future(wrk(server, 50, secs + 2))
    sent = applied = 0
    try:
        await asyncio.sleep(1)
        start = loop.time()
        for gen in range(1, secs + 1):
            server.write_conf(**conf_for(server.name, gen=gen))
            os.kill(server.proc.pid, signal.SIGHUP)
            sent += 1
            await asyncio.sleep(0.8)
            m = re.search(r"(?im)^x-gen:\s*(\d+)", await probe(server.port, body_len, 1.0) or "")
            if m and m.group(1) == str(gen):
                applied += 1
            await asyncio.sleep(max(0.0, start + gen - loop.time()))
        r = await load
    finally:
        load.cancel()
    return {
        "reloads_sent": sent, "reloads_applied": applied, "requests": r["requests"], "rps": round(r["rps"]),
        "failed_requests": r["errors"], "socket_errors": r["socket_errors"], "p99_ms": r["p99_ms"],
        "processes_at_end": len(server.pids()), "alive": server.proc.poll() is None,
    }


# --------------------------------------------------------------------------


def run_one(name, scenario, args, work, root, body_len):
    nofile = 512 if scenario == "descriptors" else None
    prefix = ["prlimit", f"--nofile={nofile}:{nofile}", "--"] if nofile else []
    srv = Server(name, "plain", work, root, args.tessera, conf_args=conf_for(name, nofile=nofile,
                 gen=0 if scenario == "reload" else None), cmd_prefix=prefix, tag=scenario)
    if not srv.start():
        return {"failed": "did not start"}
    try:
        if scenario == "hold":
            return hold(srv, body_len, args.connections, args.hold)
        elif scenario == "slowloris":
            coro = slowloris(srv, body_len, args.slow, args.duration)
        elif scenario == "descriptors":
            coro = exhaust(srv, body_len, args.exhaust)
        else:
            coro = reload(srv, body_len, args.reloads)
        return asyncio.run(coro)
    finally:
        srv.stop()
        log = os.path.join(srv.dir, "stderr")
        if os.path.exists(log):
            lines = open(log, errors="replace").read().splitlines()
            if lines:
                print(f"    {name} stderr: {len(lines)} lines, last: {lines[-1][:200]}", flush=True)


def fmt(v, unit=""):
    return "-" if v is None else f"{v}{unit}"


# The report's rows: scenario, label (formatted with the run's parameters), cell.
ROWS = [
    ("hold", "{connections:,} keep-alive conns held {hold} s, a GET per conn every 10 s: conns opened (ramp)",
     lambda r: f"{r['opened']:,} ({r['ramp_s']} s)"),
    ("hold", "  requests answered · errors (kinds)",
     lambda r: f"{r['requests_ok']:,} · **{r['errors']}** {r['error_kinds'] or ''}"),
    ("hold", "  latency p99 / max", lambda r: f"{r['p99_ms']} / {r['max_ms']} ms"),
    ("hold", "  server RSS start / all open / peak / 5 s after close (MiB)",
     lambda r: "{start} / {opened} / {peak} / {after}".format(**r["rss_mib"])),
    ("slowloris", "{slow:,} slowloris conns + wrk c=50 ({duration} s runs): req/s unloaded (mean of before, after) "
     "→ loaded (share)", lambda r: f"{r['unloaded_rps']:,} → {r['loaded_rps']:,} (**{r['share'] * 100:.0f}%**)"),
    ("slowloris", "  wrk errors loaded · p99 unloaded → loaded",
     lambda r: f"{r['wrk_errors']['loaded']} · {r['unloaded_p99_ms']:.1f} → {r['loaded_p99_ms']:.1f} ms"),
    ("slowloris", "  slow conns closed by the server: count, s after connect median / max (timeout {timeout} s)",
     lambda r: f"{r['closed_by_server']:,}: {fmt(r['close_s_median'])} / {fmt(r['close_s_max'])} s"),
    ("slowloris", "  how closed; slow conns open at wrk start / end",
     lambda r: f"{r['slow']} ; {r['slow_open_at_wrk_start']} / {r['slow_open_at_wrk_end']}"),
    ("descriptors", "nofile 512, {exhaust:,} conns opened and held 5 s: connects ok · request ok while exhausted",
     lambda r: f"{r['opened']:,} · {r['request_ok_while_exhausted']}"),
    ("descriptors", "  server CPU while exhausted (cores)", lambda r: f"{r['cpu_while_exhausted']}"),
    ("descriptors", "  recovery: close → first answered request", lambda r: f"**{fmt(r['recovery_s'], ' s')}**"),
    ("descriptors", "  descriptors before / exhausted / after · stayed up",
     lambda r: "{before} / {exhausted} / {after}".format(**r["fds"]) + f" · {r['alive'] and r['ok_3s_later']}"),
    ("reload", "reload every 1 s for {reloads} s under wrk c=50: failed requests (socket errors, non-2xx)",
     lambda r: f"**{r['failed_requests']}** of {r['requests']:,} {r['socket_errors']}"),
    ("reload", "  reloads sent / seen applied 0.8 s later · req/s",
     lambda r: f"{r['reloads_sent']} / {r['reloads_applied']} · {r['rps']:,}"),
]


def markdown(meta, res, servers):
    rows = []
    for scn, label, cell in ROWS:
        if scn in res:
            rows.append((label.format(timeout=HEADER_TIMEOUT, **meta),
                         [cell(res[scn][s]) if "failed" not in res[scn].get(s, {"failed": 1}) else "FAILED"
                          for s in servers]))
    lines = [f"Resilience benchmark of {meta['date']} on {meta['machine']}; load average at start "
             f"{' '.join(meta['loadavg_at_start'])}; RLIMIT_NOFILE of the servers (except under nofile 512) "
             f"{meta['rlimit_nofile']:,}.", "",
             "| scenario | " + " | ".join(servers) + " |", "|---|" + "---|" * len(servers)]
    lines += [f"| {k} | " + " | ".join(v) + " |" for k, v in rows]
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + "."]
    return "\n".join(lines) + "\n"


def main():
    signal.signal(signal.SIGTERM, harness.on_signal)
    ap = argparse.ArgumentParser(description="Resilience benchmark, Tessera against nginx (see benches/resilience.sh)")
    ap.add_argument("--tessera", required=True, help="the tessera binary (release build)")
    ap.add_argument("--scenarios", default="hold,slowloris,descriptors,reload")
    ap.add_argument("--servers", default="tessera,nginx")
    ap.add_argument("--connections", type=int, default=20000, help="keep-alive connections held (hold)")
    ap.add_argument("--hold", type=int, default=60, help="seconds they are held")
    ap.add_argument("--slow", type=int, default=2000, help="slowloris connections")
    ap.add_argument("--duration", type=int, default=15, help="seconds of each wrk run (slowloris)")
    ap.add_argument("--exhaust", type=int, default=2000, help="connections opened against nofile 512")
    ap.add_argument("--reloads", type=int, default=60, help="reloads, one a second")
    ap.add_argument("--out", default=os.path.join(REPO, "target", "bench"))
    args = ap.parse_args()
    args.tessera = os.path.realpath(args.tessera)  # servers run in their own directories
    for k in ("connections", "hold", "slow", "duration", "exhaust", "reloads"):
        setattr(args, k, max(1, min(getattr(args, k), {"connections": 30000, "slow": 10000, "exhaust": 10000}.get(k, 300))))

    # as high as allowed: the servers inherit it (nginx also asks for 60,000 per worker)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(hard, 60000), max(hard, 60000)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    BASE_CONF["nginx"]["nofile"] = min(60000, nofile)
    if nofile < max(args.slow, args.exhaust, PER_PROCESS) + 1000:
        sys.exit(f"resilience: RLIMIT_NOFILE is {nofile}; this needs more (run as root)")
    if nofile < args.connections + 100:
        print(f"resilience: RLIMIT_NOFILE is {nofile} (no CAP_SYS_RESOURCE to raise it): a single-process "
              f"server cannot hold {args.connections:,} connections here", flush=True)
    servers = [s for s in args.servers.split(",") if s.startswith("tessera") or shutil.which(s)]
    scenarios = [s for s in args.scenarios.split(",") if s in ("hold", "slowloris", "descriptors", "reload")]

    work = tempfile.mkdtemp(prefix="tessera-resilience-")
    os.chmod(work, 0o755)
    root = os.path.join(work, "www")
    harness.make_docroot(root, many=False)
    body_len = os.path.getsize(os.path.join(root, PATH.lstrip("/")))
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": harness.machine(), "loadavg_at_start": open("/proc/loadavg").read().split()[:3],
        "connections": args.connections, "hold": args.hold, "slow": args.slow, "duration": args.duration,
        "exhaust": args.exhaust, "reloads": args.reloads, "rlimit_nofile": nofile,
        "versions": {
            "nginx": harness.version_of(["nginx", "-v"], r"nginx/([\d.]+)"),
            "tessera": harness.version_of([args.tessera, "--version"]),
            "wrk": harness.version_of(["wrk", "-v"], r"wrk (\S+)"),
        },
    }
    print(f"resilience: {', '.join(scenarios)} x {', '.join(servers)}; document root {root}", flush=True)
    res = {}
    t_start = time.time()
    try:
        for k, scn in enumerate(scenarios):
            order = servers if k % 2 == 0 else servers[::-1]  # interleave: A B, B A, ...
            res[scn] = {}
            for name in order:
                t = time.time()
                try:
                    r = run_one(name, scn, args, work, root, body_len)
                except KeyboardInterrupt:
                    raise
                except Exception as e:  # noqa: BLE001
                    r = {"failed": f"{type(e).__name__}: {e}"[:300]}
                res[scn][name] = r
                print(f"  {scn:11} {name:8} {time.time() - t:5.0f} s  {json.dumps(r)}", flush=True)
    finally:
        for p in CHILDREN:
            p.kill()
        for pid in WRK_PROCS:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for srv in harness.STARTED:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    meta["total_s"] = round(time.time() - t_start)
    os.makedirs(args.out, exist_ok=True)
    md = markdown(meta, res, servers)
    with open(os.path.join(args.out, "resilience.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "resilience.json"), "w") as f:
        json.dump({"meta": meta, "results": res}, f, indent=1)
    print()
    print(md)
    print(f"resilience: {meta['total_s']} s; wrote {args.out}/resilience.md and resilience.json")


if __name__ == "__main__":
    main()
