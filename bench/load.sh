#!/usr/bin/env bash
# Side-by-side HTTP load: nginx (keep-alive off, sendfile on) and `resource-plane serve` serving
# the same files, driven alternately by the same wrk client with `Connection: close`. Prints
# req/s and server CPU per request for each (also split into user and kernel time), and the
# ratios (issue 5 targets).
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
# A server that did not start (port taken by another process) would leave wrk measuring the
# wrong process: stop unless ours is up and said it is listening.
if ! kill -0 "$(cat "$WORK/rp.pid")" 2>/dev/null || ! grep -q '"listening"' "$WORK/ready.json"; then
  echo "error: resource-plane serve did not start:" >&2; cat "$WORK/rp.log" >&2; exit 1
fi

# CPU ticks of a set of pids: "utime+stime utime".
ticks() {
  local t=0 u=0
  for p in "$@"; do
    [ -r /proc/$p/stat ] || continue
    read -r ut st < <(awk '{print $14, $15}' /proc/$p/stat)
    t=$((t + ut + st)); u=$((u + ut))
  done
  echo "$t $u"
}
nginx_pids() { pgrep -f "nginx: worker" | tr '\n' ' '; }
HZ=$(getconf CLK_TCK)

# run NAME PORT FILE -> prints "reqs cpu_ticks non2xx user_ticks"
run() {
  local port=$2 file=$3; shift 3
  local pids="$*"
  local t0 u0 t1 u1
  read -r t0 u0 < <(ticks $pids)
  local out; out=$(wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" -H "Connection: close" "http://127.0.0.1:$port/resources/files/$file")
  read -r t1 u1 < <(ticks $pids)
  local reqs; reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  local non2xx; non2xx=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  echo "$reqs $(( t1 - t0 )) ${non2xx:-0} $(( u1 - u0 ))"
}

RP_PID=$(cat "$WORK/rp.pid")
for file in ${FILES:-4k.bin 1m.bin}; do
  rounds_file="$WORK/rounds-$file"
  : > "$rounds_file"
  for round in $(seq "$ROUNDS"); do
    read -r nq nc e nu < <(run nginx 18080 "$file" $(nginx_pids))
    [ "${e:-0}" = 0 ] || { echo "error: nginx answered $e non-2xx; the baseline is void" >&2; exit 1; }
    read -r rq rc e ru < <(run rp 18081 "$file" "$RP_PID")
    [ "${e:-0}" = 0 ] || { echo "error: resource-plane answered $e non-2xx" >&2; exit 1; }
    echo "$nq $nc $rq $rc $nu $ru" >> "$rounds_file"
  done
  sha_us=$(./target/release/examples/sha256_rate)
  python3 - "$file" "$rounds_file" "$SECS" "$HZ" "$sha_us" <<'PY'
import os, statistics, sys
f, rounds_file, secs, hz, sha_per_mib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
rounds = [tuple(map(int, line.split())) for line in open(rounds_file)]
size = os.path.getsize(os.path.join(os.environ["WORK"], "wd", "out", f))
sha = sha_per_mib * size / (1 << 20)
# Each round pairs one nginx run with the resource-plane run right after it, so slow drifts
# of this shared machine cancel within a pair; the median pair is reported.
# CPU is also split into user and kernel time, to show where a difference lies.
pairs = []
for nq, nc, rq, rc, nu, ru in rounds:
    n_cpu, r_cpu = nc / hz / nq * 1e6, rc / hz / rq * 1e6
    n_user, r_user = nu / hz / nq * 1e6, ru / hz / rq * 1e6
    bound = 1.15 * (n_cpu + sha)
    pairs.append((nq / secs, n_cpu, rq / secs, r_cpu, rq / nq, r_cpu / n_cpu, r_cpu / bound,
                  n_user, n_cpu - n_user, r_user, r_cpu - r_user))
for i, p in enumerate(pairs, 1):
    print(f"{f:<6} round {i}: nginx {p[0]:8.0f} req/s {p[1]:8.1f} us | resource-plane {p[2]:8.0f} req/s "
          f"{p[3]:8.1f} us | req/s {p[4]:.2f}x cpu {p[5]:.2f}x, {p[6]:.2f}x the 1.15 x (nginx + sha256) bound")
med = lambda k: statistics.median(p[k] for p in pairs)
print(f"{f:<6} median: nginx {med(0):.0f} req/s {med(1):.1f} us; resource-plane {med(2):.0f} req/s {med(3):.1f} us; "
      f"req/s {med(4):.2f}x, cpu {med(5):.2f}x; sha256 of the file {sha:.1f} us; "
      f"{med(6):.2f}x the 1.15 x (nginx + sha256) bound")
print(f"{f:<6} median split: nginx user {med(7):.1f} us + kernel {med(8):.1f} us; "
      f"resource-plane user {med(9):.1f} us + kernel {med(10):.1f} us")
PY
done
echo "trace lines written: $(wc -l < "$WORK/trace.jsonl")"
