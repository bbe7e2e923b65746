#!/usr/bin/env bash
# Side-by-side static-file benchmark: Tessera against nginx, lighttpd and h2o on
# 127.0.0.1, over one document root (benches/make-docroot.sh plus 10,000
# small files), in interleaved rounds; writes target/bench/results.{md,json}.
#
# Usage: benches/run.sh [--quick] [--proxy] [--rounds N] [--duration SECONDS]
#                       [--tests a,b,...] [--servers nginx,tessera,...] [--out DIR]
#                       [--tessera-static 'TOML lines for [vhost.static-file]']
#                       [--tessera-b PATH]
#   --quick    10 tests, 1 round, 2 s per run (about 4 minutes; for development)
#   (default)  16 tests, 3 rounds, 4 s per run (about 25 minutes on 2 cores)
#   --proxy    the reverse-proxy run instead: every server proxies to one
#              upstream nginx (151 B index.html), wrk c=100 and c=10, 3 rounds
#              of 4 s (about 4 minutes); writes target/bench-proxy/
#   --tessera-b PATH  a second Tessera binary as server "tessera-b" (A/B)
#
# Installs nginx, lighttpd, h2o, wrk, apache2-utils (ab) and httperf with
# apt-get when one is missing (as root), builds Tessera in release mode
# (CARGO_TARGET_DIR, default target/), then runs benches/harness.py, whose
# docstring describes the method. Only loopback is loaded; every tool runs with
# a time limit.
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in *" --help "*|*" -h "*) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac

. benches/tools.sh
install_missing run.sh nginx:nginx lighttpd:lighttpd h2o:h2o wrk:wrk ab:apache2-utils httperf:httperf
for t in wrk python3; do command -v $t >/dev/null || { echo "run.sh: $t is required" >&2; exit 1; }; done

target=${CARGO_TARGET_DIR:-target}
cargo build --release --quiet -p tessera
exec python3 benches/harness.py --tessera "$(realpath "$target/release/tessera")" "$@"
