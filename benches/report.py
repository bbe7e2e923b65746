"""The report of benches/harness.py: the medians over rounds, with min-max and
each server's ratio to nginx (summarize), as Markdown (markdown)."""

import statistics


def fmt_num(x):
    if x is None:
        return "-"
    if x >= 100000:
        return f"{x / 1000:.0f}k"
    if x >= 1000:
        return f"{x / 1000:.1f}k"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def summarize(results, tests, servers):
    summary = []
    for t in tests:
        row = {"test": t.name, "desc": t.desc, "metric": t.metric, "servers": {}}
        for s in servers:
            runs = results.get((t.name, s))
            if not runs:
                continue
            ok = [r for r in runs if "failed" not in r]
            if not ok:
                row["servers"][s] = {"failed": runs[0]["failed"], "errors": None}
                continue
            vals = [r[t.metric] for r in ok]
            p99 = [r["p99_ms"] for r in ok if r.get("p99_ms") is not None]
            cpu = [r["cpu_us_per_req"] for r in ok]
            cpum = [r["cpu_ms_per_mib"] for r in ok if r.get("cpu_ms_per_mib")]
            row["servers"][s] = {
                "median": statistics.median(vals), "min": min(vals), "max": max(vals),
                "p99_ms": statistics.median(p99) if p99 else None,
                "errors": sum(r["errors"] for r in ok),
                "cpu_us_per_req": statistics.median(cpu),
                "cpu_ms_per_mib": statistics.median(cpum) if cpum else None,
                # the first round's: later rounds follow c=10000, whose buffers
                # some servers keep
                "rss_mib": ok[0]["rss_mib"],
                "check": runs[0].get("check", []),
                "rounds": vals,
            }
            if any("upstream_conns" in r for r in ok):
                row["servers"][s]["upstream_conns"] = statistics.median(r["upstream_conns"] for r in ok)
                row["servers"][s]["upstream_reqs_per_conn"] = statistics.median(
                    r["requests"] / max(1, r["upstream_conns"]) for r in ok)
                row["servers"][s]["upstream_cpu_us_per_req"] = statistics.median(
                    r["upstream_cpu_us_per_req"] for r in ok)
        base = row["servers"].get("nginx", {}).get("median")
        for s, v in row["servers"].items():
            if base and v.get("median") is not None:
                v["ratio"] = v["median"] / base
            if base and v.get("cpu_us_per_req") is not None and row["servers"]["nginx"].get("cpu_us_per_req"):
                v["cpu_ratio"] = v["cpu_us_per_req"] / row["servers"]["nginx"]["cpu_us_per_req"]
        summary.append(row)
    return summary


def markdown(meta, summary, servers):
    lines = [f"Benchmark of {meta['date']} ({meta['mode']} mode, {meta['rounds']} interleaved round(s) of "
             f"{meta['duration']} s per test and server), on {meta['machine']}.",
             "",
             "Throughput: median req/s (MiB/s for the 100 MiB file) [min-max over rounds], ×ratio to nginx.",
             "",
             "| test | " + " | ".join(servers) + " |",
             "|---|" + "---|" * len(servers)]
    for row in summary:
        cells = []
        for s in servers:
            v = row["servers"].get(s)
            if not v:
                cells.append("")
            elif "median" not in v:
                cells.append("FAILED")
            else:
                c = f"{fmt_num(v['median'])} [{fmt_num(v['min'])}-{fmt_num(v['max'])}]"
                if s != "nginx" and v.get("ratio"):
                    c += f" ×{v['ratio']:.2f}"
                if v["errors"]:
                    c += f" **{v['errors']} errors**"
                if v.get("check"):
                    c += " **wrong answers**"
                cells.append(c)
        lines.append(f"| {row['desc']} | " + " | ".join(cells) + " |")
    lines += ["", "p99 latency (ms) · server CPU per request (µs; per MiB in ms for the 100 MiB file) with ×ratio to nginx · RSS in the middle of the first round's run (MiB).", "",
              "| test | " + " | ".join(servers) + " |", "|---|" + "---|" * len(servers)]
    for row in summary:
        cells = []
        for s in servers:
            v = row["servers"].get(s)
            if not v or "median" not in v:
                cells.append("")
                continue
            lat = f"{v['p99_ms']:.2f}" if v.get("p99_ms") is not None else "-"
            if row["metric"] == "mibs":
                cpu = f"{v['cpu_ms_per_mib']:.2f} ms/MiB" if v.get("cpu_ms_per_mib") else "-"
            else:
                cpu = f"{v['cpu_us_per_req']:.1f} µs"
            if s != "nginx" and v.get("cpu_ratio") and row["metric"] != "mibs":
                cpu += f" (×{v['cpu_ratio']:.2f})"
            cells.append(f"{lat} · {cpu} · {v['rss_mib']:.0f}")
        lines.append(f"| {row['desc']} | " + " | ".join(cells) + " |")
    if any("upstream_conns" in v for row in summary for v in row["servers"].values()):
        lines += ["", "The upstream nginx (1 worker, not counted above): connections it accepted from the front during "
                  "a run (those opened in the warm-up and kept are not counted) · requests per new connection · "
                  "its CPU per request (µs); medians over rounds.", "",
                  "| test | " + " | ".join(servers) + " |", "|---|" + "---|" * len(servers)]
        for row in summary:
            cells = []
            for s in servers:
                v = row["servers"].get(s)
                if not v or "upstream_conns" not in v:
                    cells.append("")
                    continue
                per = fmt_num(v["upstream_reqs_per_conn"]) if v["upstream_conns"] else "all reused"
                cells.append(f"{v['upstream_conns']:.0f} · {per} · {v['upstream_cpu_us_per_req']:.1f} µs")
            lines.append(f"| {row['desc']} | " + " | ".join(cells) + " |")
    if meta.get("idle_rss_mib"):
        lines += ["", "Idle RSS after start (MiB): " + ", ".join(f"{k} {v}" for k, v in meta["idle_rss_mib"].items()) + "."]
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + "."]
    problems = [(row["test"], s, v["check"]) for row in summary for s, v in row["servers"].items() if v.get("check")]
    for t, s, p in problems:
        lines.append(f"- wrong answers from {s} in {t}: {'; '.join(p[:3])}")
    return "\n".join(lines) + "\n"
