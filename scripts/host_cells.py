#!/usr/bin/env python3
"""Issue 26's lab cells: reads `lab run --json` outputs (one file per cell,
named CELL.json) and prints, per cell, what the host verdict made of each run
— measured, host-limited lower bound, no estimate, dishonest (and why) — the
converged runs whose band missed the truth, and the error of the measured
runs; then one paragraph that sums the table up.  Usage:
    scripts/host_cells.py DIR [--markdown]
"""
import json, os, sys, statistics

def q(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, max(0, int(round(p * len(xs) + 0.5)) - 1))]

def cell(path):
    d = json.load(open(path))
    runs = d["runs"]
    s = d["summary"] or {}
    measured = [r for r in runs if r["host_evidence"]["outcome"]["kind"] == "path"]
    errs = [abs(r["error"]) for r in measured]
    half = [((r["estimate_high_bps"] - r["estimate_low_bps"]) / 2 / r["estimate_bps"]) for r in measured if r["estimate_high_bps"]]
    why = {}
    for r in runs:
        if r["honesty"] == "dishonest":
            w = r["honesty_why"]
            key = ("band missed" if "missed" in w else "band > ±25 %" if "wider" in w
                   else "capacity > 20 % off" if w.startswith("capacity") else "bound above truth")
            why[key] = why.get(key, 0) + 1
    resources = {}
    for r in runs:
        for l in r["host_limits"]:
            if l["binds_result"]:
                resources[l["resource"]] = resources.get(l["resource"], 0) + 1
    return {
        "runs": len(runs) + s.get("no_estimate", 0),
        "measured": len(measured),
        "lower_bounds": sum(1 for r in runs if r["host_evidence"]["outcome"]["kind"] == "lower_bound"),
        "bounds_above_truth": sum(1 for r in runs if r["estimate_high_bps"] is None and r["estimate_bps"] > r["truth_bps"]),
        "no_estimate": s.get("no_estimate", 0),
        "dishonest": sum(1 for r in runs if r["honesty"] == "dishonest"),
        "why": why,
        "resources": resources,
        "converged_missed": sum(1 for r in runs if r["converged"] and not r["in_band"]),
        "median_err": statistics.median(errs) if errs else None,
        "p90_err": q(errs, 0.9),
        "median_half_width": statistics.median(half) if half else None,
        "sent_max_median_mbps": statistics.median([r["host_evidence"]["figures"]["fastest_sent_bps"] / 1e6 for r in runs if r["host_evidence"]["figures"].get("fastest_sent_bps")]) if runs else None,
    }

def pct(x):
    return "-" if x is None else f"{x*100:.1f} %"

def main():
    d = sys.argv[1]
    names = sorted(n[:-5] for n in os.listdir(d) if n.endswith(".json"))
    rows = [(n, cell(os.path.join(d, n + ".json"))) for n in names]
    print("| cell | runs | measured | host-limited bounds (resource) | bounds above truth | no estimate | dishonest (why) | converged & band missed | measured median / p90 \\|error\\| | median band half-width | fastest train sent (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, c in rows:
        res = ", ".join(f"{k} {v}" for k, v in c["resources"].items()) or "-"
        why = ", ".join(f"{k} {v}" for k, v in c["why"].items()) or "-"
        print(f"| {n} | {c['runs']} | {c['measured']} | {c['lower_bounds']} ({res}) | {c['bounds_above_truth']} | {c['no_estimate']} | {c['dishonest']} ({why}) | {c['converged_missed']} | {pct(c['median_err'])} / {pct(c['p90_err'])} | {pct(c['median_half_width'])} | {c['sent_max_median_mbps']:.0f} Mb/s |")
    total = sum(c["runs"] for _, c in rows)
    dis = sum(c["dishonest"] for _, c in rows)
    above = sum(c["bounds_above_truth"] for _, c in rows)
    cm = sum(c["converged_missed"] for _, c in rows)
    lb = sum(c["lower_bounds"] for _, c in rows)
    worst = [n for n, c in rows if c["dishonest"] > 0]
    print()
    print(f"Over {len(rows)} cells and {total} runs, {lb} answers were host-limited lower bounds, {above} of them above the truth; "
          f"{dis} runs were dishonest by the issue's rule (a band that missed the truth or was wider than ±25 %, a capacity more than 20 % off, or a bound above the truth), "
          f"in the cells {', '.join(worst) if worst else 'none'}; {cm} runs said converged with the truth outside their band.")

main()
