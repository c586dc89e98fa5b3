#!/usr/bin/env python3
"""Pools several `pathsonde compare` sweeps: the spread tables in docs/compare.md.

Reads the `compare.json` of each sweep (the `--out` directory's file, or the
`--json` output) and prints two markdown tables:

  1. per sweep, the median |error| of every method at every load (one sweep is
     `--runs` runs per cell, so this shows how much a cell moves between sweeps);
  2. pooled over all sweeps, the median |error| of every run against its own
     window's truth, with the number of runs that gave an estimate, the worst
     run, and the median measurement time.

    python3 scripts/compare_pool.py OUT1/compare.json OUT2/compare.json ...
    python3 scripts/compare_pool.py --methods fac2,slops OUT*/compare.json

|error| = |estimate − truth| / truth for each run (`runs[].error` in the JSON).
"""
import argparse
import json
import statistics
import sys


def pct(x):
    return f"{100 * x:.1f} %"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"compare_pool: cannot read {path}: {e}")


def cells(sweep, methods):
    """{(kind, load, method): [run, ...]} for the runs that gave an estimate."""
    out = {}
    for r in sweep["runs"]:
        if methods and r["method"] not in methods:
            continue
        if r.get("error") is None:
            continue
        out.setdefault((r["kind"], r["load"], r["method"]), []).append(r)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="compare.json of each sweep")
    ap.add_argument("--methods", help="comma-separated methods (default: all)")
    args = ap.parse_args()
    methods = set(args.methods.split(",")) if args.methods else None
    sweeps = [load(p) for p in args.files]
    # Each sweep's runs by (kind, load, method), read once.
    by_cell = [cells(s, methods) for s in sweeps]

    order = []
    for s in sweeps:
        for m in s["methods"]:
            if (methods is None or m in methods) and m not in order:
                order.append(m)
    kinds = sorted({k for s in sweeps for k in s["kinds"]})
    loads = sorted({l for s in sweeps for l in s["loads"]})

    for kind in kinds:
        print(f"### {kind}: median |error| per sweep\n")
        print("| sweep | time | load avg before → after | "
              + " | ".join(order) + " |")
        print("|---|---|---|" + "---|" * len(order))
        for i, (s, c) in enumerate(zip(sweeps, by_cell), 1):
            row = []
            for m in order:
                parts = []
                for l in loads:
                    runs = c.get((kind, l, m), [])
                    if runs:
                        med = statistics.median(abs(r["error"]) for r in runs)
                        parts.append(f"{l:g}: {pct(med)}")
                row.append(", ".join(parts) or "-")
            # [1 min, 5 min, 15 min]; absent where /proc/loadavg was not read.
            before = (s.get("load_average_before") or [None])[0]
            after = (s.get("load_average_after") or [None])[0]
            load_txt = (f"{before:.2f} → {after:.2f}"
                        if before is not None and after is not None else "-")
            print(f"| {i} | {s.get('elapsed_s', 0):.0f} s | {load_txt} | "
                  + " | ".join(row) + " |")
        print()

        print(f"### {kind}: pooled over {len(sweeps)} sweep(s)\n")
        print("median |error| (runs with an estimate / runs made; worst run; "
              "median time per run)\n")
        print("| method | " + " | ".join(f"{l:g} %" for l in loads) + " |")
        print("|---|" + "---|" * len(loads))
        for m in order:
            row = []
            for l in loads:
                runs, made = [], 0
                for s, c in zip(sweeps, by_cell):
                    runs += c.get((kind, l, m), [])
                    made += sum(1 for r in s["runs"]
                                if r["kind"] == kind and r["load"] == l
                                and r["method"] == m)
                    made += sum(1 for f in s.get("failures", [])
                                if f.get("kind") == kind and f.get("load") == l
                                and f.get("method") == m)
                if not runs:
                    row.append(f"- (0/{made})")
                    continue
                errs = [abs(r["error"]) for r in runs]
                t = statistics.median(r["duration_s"] for r in runs)
                row.append(f"{pct(statistics.median(errs))} ({len(runs)}/{made}; "
                           f"max {pct(max(errs))}; {t:.2f} s)")
            print(f"| {m} | " + " | ".join(row) + " |")
        print()


if __name__ == "__main__":
    main()
