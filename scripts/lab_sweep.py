#!/usr/bin/env python3
"""Accuracy sweep of a method on lab paths: the tables in docs/lab.md.

Runs `pathsonde lab run --json` for each capacity and cross-traffic load and
prints one markdown table per capacity: median and p90 |error|, median
measurement time, trains, probe bytes and intrusiveness over the runs.

    sudo python3 scripts/lab_sweep.py --capacity 300mbit --loads 10,30,50,70,90 --runs 5

Each cell is one `lab run` (one lab, N measurements against the truth over each
measurement's own window).  Needs root and a release build of pathsonde.
"""
import argparse
import json
import statistics
import subprocess
import sys


def pct(x):
    return f"{100 * x:.2f} %"


def quantile(xs, q):
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo, hi = int(pos), min(int(pos) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="target/release/pathsonde")
    ap.add_argument("--capacity", action="append", required=True)
    ap.add_argument("--loads", default="10,30,50,70,90")
    ap.add_argument("--cross-kind", default="poisson")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--extra", default="", help="more lab run options, space separated")
    ap.add_argument("--raw", help="append every run's JSON here")
    a = ap.parse_args()
    for cap in a.capacity:
        print(f"\n#### {cap}, {a.cross_kind} cross traffic, {a.runs} runs per load\n")
        print("| load | truth A (median) | median \\|error\\| | p90 \\|error\\| | max \\|error\\| | converged | trains (median) | time s (median) | probe MB (median) | intrusiveness (median) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for load in a.loads.split(","):
            # One lab at a time on this machine: the same lock the tests take.
            cmd = ["flock", "/tmp/pathsonde-lab.lock", a.binary, "lab", "run", "--capacity", cap, "--cross", f"{a.cross_kind}:{load}%",
                   "--runs", str(a.runs), "--json"] + a.extra.split()
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"| {load} % | failed: {p.stderr.strip()} |")
                continue
            r = json.loads(p.stdout)
            if a.raw:
                with open(a.raw, "a") as f:
                    f.write(json.dumps({"capacity": cap, "load": load, "report": r}) + "\n")
            runs = r["runs"]
            if not runs:
                print(f"| {load} % | no run finished: {'; '.join(r['notes'])} |")
                continue
            errs = [abs(x["error"]) for x in runs]
            med = lambda k: statistics.median(x[k] for x in runs)
            print(f"| {load} % | {med('truth_bps') / 1e6:.1f} Mb/s | {pct(statistics.median(errs))} | "
                  f"{pct(quantile(errs, 0.9))} | {pct(max(errs))} | "
                  f"{sum(x['converged'] for x in runs)}/{len(runs)} | {med('trains'):.0f} | "
                  f"{med('duration_s'):.2f} | {med('probe_bytes') / 1e6:.1f} | {med('intrusiveness'):.2f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
