#!/usr/bin/env python3
"""How the zero-loss fit was chosen (docs/capacity.md, "The zero-loss fit").

    python3 scripts/zero_loss_fit.py [docs/compare/data/capacity-trials-6bddc70.json.gz]

Reads the 50 ms trial counts of 36 lab tests (P->P, 100/300 Mb/s, idle/30/60 %
Poisson, Type B and C, 3 each; dumped at 6bddc70 with a temporary print in the
client, the file says how) and prints, per test, the error against the truth of
three regressions of the one model D = (C - X) + X*p, each over 100 ms windows
after the first 200 ms whose loss ratio is above 0.5 %:

  topp: L/D = 1/(1-p) on L (TOPP's form), read where L/D = 1;
  inv:  1/D on 1/L, read as C - X;
  Dp:   D on p, read at p = 0 (the one pathsonde uses), with the slope's t.

It uses no code of pathsonde's: it re-derives the figures from the counts.
"""
import gzip
import json
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRIALS = os.path.join(ROOT, "docs", "compare", "data", "capacity-trials-6bddc70.json.gz")


def windows(trials):
    """(L, D, p) per 100 ms window (two 50 ms trials), the first 200 ms left out."""
    out = []
    for i in range(0, len(trials) - 1, 2):
        a, b = trials[i], trials[i + 1]
        if b[0] <= 4:
            continue
        rx, by, loss, el = a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4]
        if rx == 0 or el == 0:
            continue
        size = by / rx + 28
        d = rx * size * 8 / el  # Mb/s, el in us
        l = (rx + loss) * size * 8 / el
        out.append((l, d, loss / (rx + loss)))
    return out


def ols(pts):
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx
    a = my - b * mx
    s2 = sum((y - a - b * x) ** 2 for x, y in pts) / max(n - 2, 1)
    t = b / math.sqrt(s2 / sxx) if s2 > 0 else float("inf")
    return a, b, t


def slope_ts(path=TRIALS):
    """(algorithm, load %, t of the Dp fit's slope or None) per test of the trial dump."""
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    out = []
    for c in data["cells"]:
        for r in c["runs"]:
            w = [x for x in windows(r["trials_seq_rx_bytes_loss_elapsed_us"]) if x[2] > 0.005]
            f = ols([(p, d) for _, d, p in w]) if len(w) > 3 else None
            out.append((c["algorithm"], c["load_percent"], f[2] if f else None))
    return out


def main():
    with gzip.open(sys.argv[1] if len(sys.argv) > 1 else TRIALS, "rt") as f:
        data = json.load(f)
    print(f"trials dumped at {data['commit']}: {data['patch']}")
    print(f"{'cell':>10} {'max':>7} {'topp':>7} {'inv':>7} {'Dp':>7} {'t':>6}")
    for c in data["cells"]:
        for r in c["runs"]:
            truth = r["truth_bps"] / 1e6
            w = [x for x in windows(r["trials_seq_rx_bytes_loss_elapsed_us"]) if x[2] > 0.005]
            cells = []
            f = ols([(l, l / d) for l, d, _ in w]) if len(w) > 3 else None
            cells.append((1 - f[0]) / f[1] if f and f[1] > 0 else None)
            f = ols([(1 / l, 1 / d) for l, d, _ in w]) if len(w) > 3 else None
            # 1/D = 1/C + (X/C)(1/L): intercept 1/C, slope X/C, read C - X.
            cells.append((1 - f[1]) / f[0] if f and f[0] > 0 else None)
            f = ols([(p, d) for _, d, p in w]) if len(w) > 3 else None
            cells.append(f[0] if f else None)
            t = f[2] if f else None
            pct = lambda v: "    –" if v is None else f"{(v / truth - 1) * 100:+6.1f}%"
            name = f"{c['capacity_mbps']}/{c['load_percent']}{c['algorithm']}"
            print(f"{name:>10} {r['max_error'] * 100:+6.1f}% " + " ".join(pct(v) for v in cells)
                  + ("" if t is None else f" {t:6.1f}"))


if __name__ == "__main__":
    main()
