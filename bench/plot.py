#!/usr/bin/env python3
"""Plots bench/scale.csv (written by `cargo bench --bench scale`) to bench/scale.png.

Needs matplotlib (pip install matplotlib). Four panels: read latency against export-tree size
(flat is the claim), cached-listing time against files (linear), uncached-listing time against
bytes (linear), and cold and repeat listings of 100,000 and 1,000,000 files (from the large-tree
rows the bench appends)."""
import csv
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

here = pathlib.Path(__file__).parent
rows = list(csv.DictReader(open(here / "scale.csv")))


def series(kind, x):
    pts = [(float(r[x]), float(r["micros"])) for r in rows if r["kind"] == kind]
    return zip(*sorted(pts)) if pts else ([], [])


fig, axes = plt.subplots(1, 4, figsize=(20, 4.2))
xs, ys = series("read_latency", "files")
axes[0].plot(list(xs), list(ys), "o-")
axes[0].set(xscale="log", xlabel="files in the export tree", ylabel="median 4 KiB read (µs)",
            title="Read latency vs tree size", ylim=(0, max(ys, default=1) * 1.5))
xs, ys = series("listing_hits", "files")
axes[1].plot(list(xs), [y / 1000 for y in ys], "o-")
axes[1].set(xlabel="files", ylabel="listing (ms)", title="Cached listing vs files")
xs, ys = series("listing_misses", "bytes")
axes[2].plot([x / 2**20 for x in xs], [y / 1000 for y in ys], "o-")
axes[2].set(xlabel="MiB hashed (200 files)", ylabel="listing (ms)", title="Uncached listing vs bytes")
for kind, label in [("large_cold", "cold (hashing)"), ("large_repeat", "repeat (cached)")]:
    xs, ys = series(kind, "files")
    axes[3].plot(list(xs), [y / 1e6 for y in ys], "o-", label=label)
axes[3].set(xscale="log", yscale="log", xlabel="files (512 B each, 1,000 dirs)",
            ylabel="listing through the router (s)", title="Listings at 100k and 1M files")
axes[3].legend()
for ax in axes:
    ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(here / "scale.png", dpi=110)
print("wrote", here / "scale.png")
