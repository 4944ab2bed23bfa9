#!/usr/bin/env bash
# Side-by-side HTTP load: nginx (keep-alive off, sendfile on) and `resource-plane serve` serving
# the same files, driven alternately by the same wrk client with `Connection: close`. Prints
# req/s and server CPU per request for each, and the ratios (issue 5 targets).
#
#   bench/load.sh [seconds-per-round] [rounds]
#
# Installs nginx and wrk from Debian's packages when missing. Needs root for apt only.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
ROUNDS=${2:-3}
CONNS=${CONNS:-32}
THREADS=${THREADS:-1}

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
  apt-get update -qq && apt-get install -y -qq nginx-light wrk >/dev/null
fi
cargo build --release --quiet --bin resource-plane --example sha256_rate

WORK=$(mktemp -d /tmp/rp-load.XXXXXX)
export WORK
chmod 755 "$WORK" # nginx's workers run as an unprivileged user and must reach the files
trap 'kill $(cat "$WORK"/*.pid 2>/dev/null) 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/wd/out" "$WORK/nginx"
head -c 4096 /dev/urandom > "$WORK/wd/out/4k.bin"
head -c 1048576 /dev/urandom > "$WORK/wd/out/1m.bin"

cat > "$WORK/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $WORK/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_timeout 0;
  server {
    listen 127.0.0.1:18080;
    location /resources/files/ { alias $WORK/wd/out/; }
  }
}
CONF
nginx -c "$WORK/nginx/nginx.conf"
sleep 0.3

cat > "$WORK/manifest.yaml" <<YAML
name: bench
exports:
  files: { root: out/, mode: read-only, max_bytes: 10Mi }
YAML
./target/release/resource-plane serve --workdir "$WORK/wd" --manifest "$WORK/manifest.yaml" \
  --listen 127.0.0.1:18081 --trace "$WORK/trace.jsonl" > "$WORK/ready.json" 2>"$WORK/rp.log" &
echo $! > "$WORK/rp.pid"
sleep 0.5

# CPU ticks (utime+stime) of a set of pids.
ticks() { local t=0; for p in "$@"; do [ -r /proc/$p/stat ] && t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
nginx_pids() { pgrep -f "nginx: worker" | tr '\n' ' '; }
HZ=$(getconf CLK_TCK)

# run NAME PORT FILE -> prints "reqs cpu_seconds"
run() {
  local port=$2 file=$3; shift 3
  local pids="$*"
  local before; before=$(ticks $pids)
  local out; out=$(wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" -H "Connection: close" "http://127.0.0.1:$port/resources/files/$file")
  local after; after=$(ticks $pids)
  local reqs; reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  local non2xx; non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  echo "$reqs $(( after - before )) ${non2xx:-0}"
}

RP_PID=$(cat "$WORK/rp.pid")
printf '%-6s %-14s %12s %14s\n' file server req/s cpu_us/req
for file in ${FILES:-4k.bin 1m.bin}; do
  n_req=0; n_cpu=0; r_req=0; r_cpu=0
  for round in $(seq "$ROUNDS"); do
    read -r q c e < <(run nginx 18080 "$file" $(nginx_pids)); n_req=$((n_req+q)); n_cpu=$((n_cpu+c))
    [ "${e:-0}" = 0 ] || { echo "error: nginx answered $e non-2xx; the baseline is void" >&2; exit 1; }
    read -r q c e < <(run rp 18081 "$file" "$RP_PID"); r_req=$((r_req+q)); r_cpu=$((r_cpu+c))
    [ "${e:-0}" = 0 ] || { echo "error: resource-plane answered $e non-2xx" >&2; exit 1; }
  done
  total=$((SECS*ROUNDS))
  sha_us=$(./target/release/examples/sha256_rate)
  python3 - "$file" "$n_req" "$n_cpu" "$r_req" "$r_cpu" "$total" "$HZ" "$sha_us" <<'PY'
import os, sys
f, nq, nc, rq, rc, total, hz = sys.argv[1], *map(int, sys.argv[2:8])
sha_per_mib = float(sys.argv[8])
n_rps, r_rps = nq/total, rq/total
n_cpu, r_cpu = nc/hz/nq*1e6, rc/hz/rq*1e6
print(f"{f:<6} {'nginx':<14} {n_rps:12.0f} {n_cpu:14.1f}")
print(f"{f:<6} {'resource-plane':<14} {r_rps:12.0f} {r_cpu:14.1f}")
print(f"{f:<6} {'ratio rp/nginx':<14} {r_rps/n_rps:12.2f}x {r_cpu/n_cpu:13.2f}x")
# The large-file target: CPU <= 1.15 x (nginx's CPU + sha256 of the file, measured just now).
size = os.path.getsize(os.path.join(os.environ["WORK"], "wd", "out", f))
sha = sha_per_mib * size / (1 << 20)
bound = 1.15 * (n_cpu + sha)
print(f"{f:<6} sha256 of the file {sha:.1f} us; bound 1.15 x (nginx + sha256) = {bound:.1f} us; "
      f"resource-plane at {r_cpu / bound:.2f}x the bound")
PY
done
echo "trace lines written: $(wc -l < "$WORK/trace.jsonl")"
