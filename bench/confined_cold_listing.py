"""A cold listing with the Landlock wall and without it, beside its floor, in one run.

The server: the first listing of a fresh `serve` (an empty hash cache: every file opened, read and
hashed), confined as it starts by default and with `--no-confine`; the process's start is not
timed. The floor: `listing_floor` (bench/floors), the same file work with the same system calls
and no HTTP, hash cache or body, without Landlock and under the very wall `serve` puts up. Every
run is a fresh process; each round runs all four, the order reversed every other round.

Prints each one's medians (wall-clock and CPU, user + kernel, all threads), the confined /
unconfined ratio of the server and of the floor (ratio of the medians, and the median of the
rounds' own ratios), how many milliseconds the wall adds to each, and server / floor.

    python3 bench/confined_cold_listing.py [--rounds N] [--rulesets] [--no-build]

`--rulesets` measures the floor alone under each wall it knows (`none`, `serve`, `one-rule`,
`no-truncate-ioctl`; see bench/floors/src/bin/listing_floor.rs), to see what in the ruleset
costs. Builds the release binary and the floor first, and makes the tree when it is missing:
10,000 files of 2 KiB in 100 directories under /tmp/cl/wd/out, manifest /tmp/cl/m.yaml exporting
`out`. RP_BIN and FLOOR_BIN, when set, name the binaries to measure instead of this tree's;
`--no-build` measures this tree's as last built.
"""
import argparse
import json
import os
import statistics as st
import subprocess
import time
import urllib.request

TREE = "/tmp/cl"
WORKDIR = f"{TREE}/wd"
MANIFEST = f"{TREE}/m.yaml"
FILES, DIRS, SIZE = 10_000, 100, 2048
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_tree():
    """The tree and manifest, when missing: file i is out/d{i % 100}/f{i}, 2 KiB of random bytes."""
    if os.path.exists(MANIFEST) and os.path.isdir(f"{WORKDIR}/out/d{DIRS - 1}"):
        return
    for i in range(FILES):
        d = f"{WORKDIR}/out/d{i % DIRS}"
        os.makedirs(d, exist_ok=True)
        with open(f"{d}/f{i}", "wb") as f:
            f.write(os.urandom(SIZE))
    with open(MANIFEST, "w") as f:
        f.write("name: r\nexports:\n  files: { root: out, mode: read-only }\n")


def build():
    """The binary that ships (built alone: not with the examples' dev-dependency features) and
    the floor, a crate of its own for the same reason."""
    run = lambda *a: subprocess.run(["cargo", "build", "--release", "--quiet", *a], cwd=REPO, check=True)
    run("--bin", "resource-plane")
    run("--manifest-path", "bench/floors/Cargo.toml", "--target-dir", "target/floors", "--bin", "listing_floor")


def cpu_ms(pid):
    """The process's CPU time so far (user + kernel, every thread, exited ones included): its
    CPU-time clock, MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), in nanoseconds."""
    return time.clock_gettime_ns(((~pid) << 3) | 2) / 1e6


def server(bin_path, flags):
    """Wall and CPU milliseconds of the first listing of a fresh `serve`."""
    p = subprocess.Popen(
        [bin_path, "serve", "--workdir", WORKDIR, "--manifest", MANIFEST, "--trace", f"{TREE}/t.jsonl", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = json.loads(p.stdout.readline())["url"]
        c0, t0 = cpu_ms(p.pid), time.perf_counter()
        body = urllib.request.urlopen(url + "/resources/files").read()
        wall, cpu = (time.perf_counter() - t0) * 1e3, cpu_ms(p.pid) - c0
    finally:
        p.terminate()
        p.wait()
    listed = len(json.loads(body)["entries"])
    assert listed == FILES, f"listed {listed} files, not {FILES}"
    return wall, cpu


def floor(bin_path, wall):
    """Wall and CPU milliseconds of the floor's listing under `wall`."""
    out = subprocess.run([bin_path, WORKDIR, MANIFEST, wall], capture_output=True, check=True, text=True)
    line = json.loads(out.stdout)
    assert line["files"] == FILES, f"hashed {line['files']} files, not {FILES}"
    return line["ms"], line["cpu_ms"]


def median(runs, at):
    return st.median(r[at] for r in runs)


def ratios(confined, unconfined, at):
    """confined / unconfined: of the medians, and the median of each round's own ratio."""
    of_medians = median(confined, at) / median(unconfined, at)
    per_round = [c[at] / u[at] for c, u in zip(confined, unconfined)]
    return of_medians, st.median(per_round), per_round


def show(name, runs):
    print(
        f"  {name:<24} wall median {median(runs, 0):7.1f} ms  cpu median {median(runs, 1):7.1f} ms"
        f"   walls {[round(w, 1) for w, _ in runs]}"
    )


def compare(rp, fl, rounds):
    kinds = [
        ("floor, no wall", lambda: floor(fl, "none")),
        ("floor, serve's wall", lambda: floor(fl, "serve")),
        ("server, --no-confine", lambda: server(rp, ["--no-confine"])),
        ("server, confined", lambda: server(rp, [])),
    ]
    res = {name: [] for name, _ in kinds}
    for r in range(rounds):
        for name, one in kinds if r % 2 == 0 else kinds[::-1]:
            res[name].append(one())
    print(f"{rounds} rounds, each a fresh process per line (medians; walls in round order)")
    for name, _ in kinds:
        show(name, res[name])
    summary = {}
    for who, conf, unconf in (
        ("server", "server, confined", "server, --no-confine"),
        ("floor", "floor, serve's wall", "floor, no wall"),
    ):
        for at, what in ((0, "wall"), (1, "cpu")):
            of_medians, per_round_median, per_round = ratios(res[conf], res[unconf], at)
            added = median(res[conf], at) - median(res[unconf], at)
            summary[(who, what)] = (of_medians, per_round_median, added)
            print(
                f"  {who:<6} {what:<4} confined/unconfined {of_medians:.3f}x (median of rounds"
                f" {per_round_median:.3f}x; rounds {[round(x, 2) for x in per_round]}); the wall adds"
                f" {added:+.1f} ms"
            )
    for what in ("wall", "cpu"):
        s, f = summary[("server", what)], summary[("floor", what)]
        print(
            f"  server/floor {what:<4} {s[0] / f[0]:.3f} (ratio of medians), {s[1] / f[1]:.3f}"
            f" (medians of rounds); ms the wall adds: server {s[2]:+.1f}, floor {f[2]:+.1f}"
        )


def rulesets(fl, rounds):
    walls = ["none", "serve", "one-rule", "no-truncate-ioctl"]
    res = {w: [] for w in walls}
    for r in range(rounds):
        for w in walls if r % 2 == 0 else walls[::-1]:
            res[w].append(floor(fl, w))
    print(f"the floor under each wall, {rounds} rounds (medians; walls in round order)")
    for w in walls:
        show(w, res[w])
    for w in walls[1:]:
        for at, what in ((0, "wall"), (1, "cpu")):
            of_medians, per_round_median, _ = ratios(res[w], res["none"], at)
            print(f"  {w:<18} {what:<4} /none {of_medians:.3f}x (median of rounds {per_round_median:.3f}x)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rulesets", action="store_true", help="the floor alone under each wall it knows")
    ap.add_argument("--no-build", action="store_true", help="measure the binaries built last")
    args = ap.parse_args()
    make_tree()
    rp, fl = os.environ.get("RP_BIN"), os.environ.get("FLOOR_BIN")
    if not (rp and fl or args.no_build):
        build()
    rp = rp or f"{REPO}/target/release/resource-plane"
    fl = fl or f"{REPO}/target/floors/release/listing_floor"
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if args.rulesets:
        rulesets(fl, args.rounds)
    else:
        compare(rp, fl, args.rounds)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
