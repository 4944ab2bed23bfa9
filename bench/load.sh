#!/usr/bin/env bash
# Side-by-side HTTP load on the same files, driven in turn by the same wrk client with
# `Connection: close`: nginx (keep-alive off, sendfile on), two floors and `resource-plane serve`.
# The floors are the crate `bench/floors`:
# - the read floor (`read_floor`): the least server the read rules allow, which opens the file as
#   D-2.4 to D-2.6 require, reads it into its own buffer, hashes it and writes that buffer (D-2.7),
#   on one blocking thread per core;
# - the rules floor (`rules_floor`): the read floor plus, each at its least, what the project's own
#   rules add: an async runtime with the read handed to the blocking pool and back (design.md,
#   habit 1), one trace line per request (D-6) and the headers of a 200 read.
# Prints req/s and server CPU per request (user + kernel) for each, also split into user and
# kernel time, and the ratios resource-plane / read floor (the target: <= 1.05x the floor
# measured in the same run), resource-plane / rules floor, rules floor / read floor (what the
# project's own rules cost) and resource-plane / nginx. The single-core sha256 time of the file is
# printed beside them, as the part of the floor no server can skip, with the ratio to
# 1.15 x (nginx + sha256) for comparison.
#
#   bench/load.sh [seconds-per-round] [rounds]
#
# RP_SHARDS, when set, is passed to `serve` as `--shards`. FILES names the files to load (default
# `4k.bin 1m.bin`).
# RP_BIN, FLOOR_BIN and RULES_FLOOR_BIN, when set, name the resource-plane binary and the floors
# to measure instead of this tree's (to measure another build beside this one).
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
# The binary is built on its own: built in one invocation with the examples, it would get the
# dev-dependencies' features (tokio's `test-util` among them, which wakes the runtime's driver
# once more after every blocking task) and not be the binary that ships.
cargo build --release --quiet --example sha256_rate
cargo build --release --quiet --bin resource-plane
# The floors are a crate of their own, for the same reason.
cargo build --release --quiet --manifest-path bench/floors/Cargo.toml --target-dir target/floors
RP_BIN=${RP_BIN:-./target/release/resource-plane}
FLOOR_BIN=${FLOOR_BIN:-./target/floors/release/read_floor}
RULES_FLOOR_BIN=${RULES_FLOOR_BIN:-./target/floors/release/rules_floor}

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
"$RP_BIN" serve --workdir "$WORK/wd" --manifest "$WORK/manifest.yaml" \
  --listen 127.0.0.1:18081 --trace "$WORK/trace.jsonl" ${RP_SHARDS:+--shards "$RP_SHARDS"} > "$WORK/ready.json" 2>"$WORK/rp.log" &
echo $! > "$WORK/rp.pid"
sleep 0.5
# A server that did not start (port taken by another process) would leave wrk measuring the
# wrong process: stop unless ours is up and said it is listening.
if ! kill -0 "$(cat "$WORK/rp.pid")" 2>/dev/null || ! grep -q '"listening"' "$WORK/ready.json"; then
  echo "error: resource-plane serve did not start:" >&2; cat "$WORK/rp.log" >&2; exit 1
fi

"$FLOOR_BIN" "$WORK/wd/out" 127.0.0.1:18082 > "$WORK/floor.out" 2>"$WORK/floor.log" &
echo $! > "$WORK/floor.pid"
sleep 0.3
if ! kill -0 "$(cat "$WORK/floor.pid")" 2>/dev/null || ! grep -q '^listening' "$WORK/floor.out"; then
  echo "error: the read floor did not start:" >&2; cat "$WORK/floor.log" >&2; exit 1
fi

"$RULES_FLOOR_BIN" "$WORK/wd/out" 127.0.0.1:18083 "$WORK/rules-trace.jsonl" > "$WORK/rules.out" 2>"$WORK/rules.log" &
echo $! > "$WORK/rules.pid"
sleep 0.3
if ! kill -0 "$(cat "$WORK/rules.pid")" 2>/dev/null || ! grep -q '^listening' "$WORK/rules.out"; then
  echo "error: the rules floor did not start:" >&2; cat "$WORK/rules.log" >&2; exit 1
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
FLOOR_PID=$(cat "$WORK/floor.pid")
RULES_PID=$(cat "$WORK/rules.pid")
for file in ${FILES:-4k.bin 1m.bin}; do
  rounds_file="$WORK/rounds-$file"
  : > "$rounds_file"
  for round in $(seq "$ROUNDS"); do
    read -r nq nc e nu < <(run nginx 18080 "$file" $(nginx_pids))
    [ "${e:-0}" = 0 ] || { echo "error: nginx answered $e non-2xx; the baseline is void" >&2; exit 1; }
    read -r fq fc e fu < <(run floor 18082 "$file" "$FLOOR_PID")
    [ "${e:-0}" = 0 ] || { echo "error: the read floor answered $e non-2xx; the floor is void" >&2; exit 1; }
    read -r gq gc e gu < <(run rules 18083 "$file" "$RULES_PID")
    [ "${e:-0}" = 0 ] || { echo "error: the rules floor answered $e non-2xx; the floor is void" >&2; exit 1; }
    read -r rq rc e ru < <(run rp 18081 "$file" "$RP_PID")
    [ "${e:-0}" = 0 ] || { echo "error: resource-plane answered $e non-2xx" >&2; exit 1; }
    echo "$nq $nc $rq $rc $nu $ru $fq $fc $fu $gq $gc $gu" >> "$rounds_file"
  done
  sha_us=$(./target/release/examples/sha256_rate)
  python3 - "$file" "$rounds_file" "$SECS" "$HZ" "$sha_us" <<'PY'
import os, statistics, sys
f, rounds_file, secs, hz, sha_per_mib = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
rounds = [tuple(map(int, line.split())) for line in open(rounds_file)]
size = os.path.getsize(os.path.join(os.environ["WORK"], "wd", "out", f))
sha = sha_per_mib * size / (1 << 20)
# Each round runs nginx, the floor and resource-plane one right after the other, so slow drifts
# of this shared machine cancel within a round; the median of each figure over the rounds is
# reported. CPU per request is user + kernel time; the split shows where a difference lies.
us = lambda ticks, reqs: ticks / hz / reqs * 1e6
rows = []
for nq, nc, rq, rc, nu, ru, fq, fc, fu, gq, gc, gu in rounds:
    n_cpu, f_cpu, r_cpu, g_cpu = us(nc, nq), us(fc, fq), us(rc, rq), us(gc, gq)
    n_user, f_user, r_user, g_user = us(nu, nq), us(fu, fq), us(ru, rq), us(gu, gq)
    rows.append(dict(n_rps=nq / secs, n_cpu=n_cpu, f_rps=fq / secs, f_cpu=f_cpu,
                     r_rps=rq / secs, r_cpu=r_cpu, g_rps=gq / secs, g_cpu=g_cpu,
                     g_user=g_user, g_kernel=g_cpu - g_user,
                     rps_vs_nginx=rq / nq, cpu_vs_nginx=r_cpu / n_cpu,
                     rps_vs_floor=rq / fq, cpu_vs_floor=r_cpu / f_cpu,
                     rps_vs_rules=rq / gq, cpu_vs_rules=r_cpu / g_cpu,
                     rules_vs_floor=g_cpu / f_cpu,
                     n_user=n_user, n_kernel=n_cpu - n_user, f_user=f_user, f_kernel=f_cpu - f_user,
                     r_user=r_user, r_kernel=r_cpu - r_user))
for i, r in enumerate(rows, 1):
    print(f"{f:<6} round {i}: nginx {r['n_rps']:8.0f} req/s {r['n_cpu']:8.1f} us | floor {r['f_rps']:8.0f} req/s "
          f"{r['f_cpu']:8.1f} us | rules floor {r['g_rps']:8.0f} req/s {r['g_cpu']:8.1f} us | "
          f"resource-plane {r['r_rps']:8.0f} req/s {r['r_cpu']:8.1f} us | "
          f"vs nginx req/s {r['rps_vs_nginx']:.2f}x cpu {r['cpu_vs_nginx']:.2f}x | "
          f"vs floor req/s {r['rps_vs_floor']:.2f}x cpu {r['cpu_vs_floor']:.2f}x | "
          f"vs rules floor cpu {r['cpu_vs_rules']:.2f}x")
med = lambda k: statistics.median(r[k] for r in rows)
# The ratio to 1.15 x (nginx + sha256) is printed for comparison; the target is the floor's
# ratio on the next line.
bound = statistics.median(r["r_cpu"] / (1.15 * (r["n_cpu"] + sha)) for r in rows)
print(f"{f:<6} median: nginx {med('n_rps'):.0f} req/s {med('n_cpu'):.1f} us; resource-plane {med('r_rps'):.0f} req/s "
      f"{med('r_cpu'):.1f} us; req/s {med('rps_vs_nginx'):.2f}x, cpu {med('cpu_vs_nginx'):.2f}x; "
      f"sha256 of the file {sha:.1f} us; {bound:.2f}x the 1.15 x (nginx + sha256) bound")
verdict = "within" if med("cpu_vs_floor") <= 1.05 else "over"
print(f"{f:<6} median floor: floor {med('f_rps'):.0f} req/s {med('f_cpu'):.1f} us; resource-plane / floor: "
      f"req/s {med('rps_vs_floor'):.2f}x, cpu {med('cpu_vs_floor'):.2f}x ({verdict} the 1.05x target)")
print(f"{f:<6} median rules floor: rules floor {med('g_rps'):.0f} req/s {med('g_cpu'):.1f} us "
      f"({med('rules_vs_floor'):.2f}x the read floor: what the project's own rules add); resource-plane / rules "
      f"floor: req/s {med('rps_vs_rules'):.2f}x, cpu {med('cpu_vs_rules'):.2f}x")
print(f"{f:<6} median split: nginx user {med('n_user'):.1f} us + kernel {med('n_kernel'):.1f} us; "
      f"floor user {med('f_user'):.1f} us + kernel {med('f_kernel'):.1f} us; "
      f"rules floor user {med('g_user'):.1f} us + kernel {med('g_kernel'):.1f} us; "
      f"resource-plane user {med('r_user'):.1f} us + kernel {med('r_kernel'):.1f} us")
PY
done
echo "trace lines written: $(wc -l < "$WORK/trace.jsonl")"
