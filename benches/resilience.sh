#!/usr/bin/env bash
# Resilience benchmark: Tessera against nginx on 127.0.0.1 (issue 11). Four
# scenarios, each against both servers in turn: 20,000 keep-alive connections
# held 60 s with requests flowing (errors, RSS); 2,000 slowloris connections
# next to wrk c=50 (throughput share, when the slow ones are cut off);
# descriptor exhaustion under nofile 512 (recovery time); a reload every second
# for 60 s under wrk (failed requests). About 8 minutes on 2 cores; writes
# target/bench/resilience.{md,json}. benches/resilience.py describes the method.
#
# Usage: benches/resilience.sh [--scenarios hold,slowloris,descriptors,reload]
#          [--servers tessera,nginx] [--connections N] [--hold S] [--slow N]
#          [--duration S] [--exhaust N] [--reloads N] [--out DIR]
#
# Installs nginx and wrk with apt-get when missing (as root), builds Tessera in
# release mode (CARGO_TARGET_DIR, default target/). Tessera holds all 20,000
# connections in one process: allow more than 20,100 descriptors (as root the
# script raises the limit when it may).
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in *" --help "*|*" -h "*) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac

. benches/tools.sh
install_missing resilience.sh nginx:nginx wrk:wrk prlimit:util-linux
for t in wrk prlimit python3; do command -v $t >/dev/null || { echo "resilience.sh: $t is required" >&2; exit 1; }; done

target=${CARGO_TARGET_DIR:-target}
cargo build --release --quiet -p tessera
exec python3 benches/resilience.py --tessera "$(realpath "$target/release/tessera")" "$@"
