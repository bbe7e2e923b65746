#!/usr/bin/env bash
# Per-request cost of one no-op plugin in the pipeline, end to end:
# Tessera serving a 151-byte index.html with modules = ["static-file"] against
# the same with ["noop", "static-file"] (plugins/fixtures/noop), wrk on
# 127.0.0.1, keep-alive, interleaved rounds (A B, A B, ...) so drift cancels.
# Prints req/s per round, the medians, the ratio, and CPU microseconds per
# request (utime+stime of the server from /proc). Only loopback is loaded; every
# run is bounded by wrk's -d.
#
# Usage: benches/plugin-cost.sh [ROUNDS] [SECONDS] [CONNECTIONS]
# Needs: wrk (apt-get install wrk).
set -euo pipefail
rounds=${1:-5}; secs=${2:-5}; conns=${3:-10}
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is required: apt-get install wrk" >&2; exit 1; }
target=${CARGO_TARGET_DIR:-target}
cargo build --release --quiet -p tessera -p tessera-fixture-noop
work=$(mktemp -d)
# Servers are started inside process substitutions (subshells), so their pids
# are recorded in a file and killed on any exit.
trap 'kill $(cat "$work/pids" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/www"
printf '<html>\n<head>\n<title>Welcome to nginx!</title>\n</head>\n<body bgcolor="white" text="black">\n<center><h1>Welcome to nginx!</h1></center>\n</body>\n</html>\n' > "$work/www/index.html"
plugin=$(realpath "$target/release/libtessera_fixture_noop.so")
for v in base plugin; do
  {
    echo '[server]'; echo 'listen = ["127.0.0.1:0"]'; echo 'workers = 1'
    if [ $v = plugin ]; then printf '[[plugin]]\nname = "noop"\npath = "%s"\n' "$plugin"; fi
    echo '[[vhost]]'; echo 'server-names = ["localhost"]'; echo 'document-root = "www"'
    if [ $v = plugin ]; then echo 'modules = ["noop", "static-file"]'; else echo 'modules = ["static-file"]'; fi
  } > "$work/$v.toml"
done
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
run() { # $1 = variant; prints "rps cpu_us_per_req"
  rm -f "$work/$1.out"
  "$target/release/tessera" -c "$work/$1.toml" > "$work/$1.out" 2>"$work/$1.err" &
  local pid=$!
  echo "$pid" >> "$work/pids"
  for _ in $(seq 200); do grep -q listening "$work/$1.out" 2>/dev/null && break; sleep 0.05; done
  local addr; addr=$(sed -n 's/.*listening on //p' "$work/$1.out" | head -1)
  [ -n "$addr" ] || { echo "tessera did not start:" >&2; cat "$work/$1.err" >&2; exit 1; }
  wrk -t1 -c"$conns" -d1s "$addr/index.html" >/dev/null   # warm-up
  local t0; t0=$(cpu_ticks $pid)
  local out; out=$(wrk -t1 -c"$conns" -d"${secs}s" "$addr/index.html")
  local t1; t1=$(cpu_ticks $pid)
  kill $pid; wait $pid 2>/dev/null || true
  local rps; rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  local reqs; reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  local hz; hz=$(getconf CLK_TCK)
  awk -v r="$rps" -v n="$reqs" -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "%.0f %.2f\n", r, d / hz * 1e6 / n }'
}
base=(); plug=(); base_cpu=(); plug_cpu=()
for i in $(seq "$rounds"); do
  read -r r c < <(run base); base+=("$r"); base_cpu+=("$c")
  read -r r c < <(run plugin); plug+=("$r"); plug_cpu+=("$c")
  echo "round $i: no plugin ${base[-1]} req/s (${base_cpu[-1]} us CPU/req), no-op plugin ${plug[-1]} req/s (${plug_cpu[-1]} us CPU/req)"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mb=$(median "${base[@]}"); mp=$(median "${plug[@]}")
cb=$(median "${base_cpu[@]}"); cp=$(median "${plug_cpu[@]}")
echo "median: no plugin $mb req/s, no-op plugin $mp req/s, ratio $(awk -v a="$mp" -v b="$mb" 'BEGIN{printf "%.3f", a/b}')"
echo "median CPU per request: no plugin $cb us, no-op plugin $cp us"
