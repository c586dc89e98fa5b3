#!/usr/bin/env python3
"""FAC²'s error and band against the bytes it may spend (issue 28).

Poisson cross traffic varies over a probe's time at the tight link, so no
reader of that time does better than the *sampling floor*; spending more
bytes on probes averages more of it, and the error should fall as 1/sqrt(bytes).
This script measures that on the lab, stores the runs, and writes the table
and the figure in docs/compare.md from the stored runs only:

    sudo python3 scripts/bytes_curve.py run BINARY [--runs 5] [--loads 30,70,90]
        [--bytes 0.5,1,2,4,8,16,32] [--capacity 300mbit] --out FILE
    python3 scripts/bytes_curve.py write   # docs/compare.md block + SVG
    python3 scripts/bytes_curve.py check   # CI: the block matches the data

`run` calls `BINARY lab run --method fac2 --max-bytes MB --precision 1% --json
--no-save` once per (load, budget) cell, blind like every lab run, with a
precision FAC² cannot reach at these budgets so that the budget, not the band,
ends each run.  The stored file holds the commands, the commit and every run's
error, sampling error, band and bytes.  Standard library only.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docblocks  # noqa: E402

ROOT = docblocks.ROOT
DATA = "docs/compare/data/bytes-curve.json"
DOC = "docs/compare.md"
SVG = "docs/compare/bytes-curve.svg"
BLOCK = "bytes-curve"


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def lab_run(cmd, who):
    """Runs one `lab run --json` cell; its report and each run's stored fields."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{who}: {' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    rep = json.loads(out.stdout)
    runs = [{
        "error": r["error"],
        "sampling_error": r.get("sampling_error"),
        "estimate_bps": r["estimate_bps"],
        "low_bps": r["estimate_low_bps"],
        "high_bps": r["estimate_high_bps"],
        "truth_bps": r["truth_bps"],
        "in_band": r["in_band"],
        "probe_bytes": r["probe_bytes"],
        "drops_caused": r.get("drops_caused"),
        "converged": r["converged"],
        "honesty": r.get("honesty"),
        # Cross packets the host let leave over 1 ms late in this run (a
        # starved generator sends them in a clump), and the latest.
        "generator_late_packets": (r.get("cross_generator_lag") or {}).get("late_packets"),
        "generator_max_late_s": (r.get("cross_generator_lag") or {}).get("max_late_s"),
        "stopped": next((n for n in r["notes"] if "budget" in n or "band" in n), None),
    } for r in rep["runs"]]
    return rep, runs


def run(args):
    cells = []
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    for load in [float(x) for x in args.loads.split(",")]:
        for mb in [float(x) for x in args.bytes.split(",")]:
            cmd = [args.binary, "lab", "run", "--capacity", args.capacity,
                   "--cross", f"poisson:{load:g}%", "--runs", str(args.runs),
                   "--method", "fac2", "--max-bytes", f"{mb:g}MB", "--precision", "1%",
                   "--json", "--no-save"]
            rep, runs = lab_run(cmd, "bytes_curve")
            cells.append({"load": load, "budget_mb": mb, "command": " ".join(cmd[1:]), "runs": runs,
                          "notes": rep.get("notes", [])})
            st = stats(cells[-1])
            print(f"{load:g} % {mb:g} MB: {st['got']} runs, median |error| {fmt_pct(st['median'])}, "
                  f"floor {fmt_pct(st['floor'])}, half-width {fmt_pct(st['half'])}", file=sys.stderr, flush=True)
    with open(args.out, "w") as f:
        json.dump({"commit": commit, "binary": args.binary, "capacity": args.capacity,
                   "runs_per_cell": args.runs, "cells": cells}, f, indent=1)
        f.write("\n")


def stats(cell):
    rs = cell["runs"]
    errs = [abs(r["error"]) for r in rs]
    floors = [abs(r["sampling_error"]) for r in rs if r["sampling_error"] is not None]
    halves = [(r["high_bps"] - r["low_bps"]) / 2 / r["estimate_bps"] for r in rs
              if r["high_bps"] is not None and r["estimate_bps"] > 0]
    med = quantile(errs, 0.5)
    floor = quantile(floors, 0.5)
    return {
        "got": len(rs),
        "median": med,
        "signed": statistics.mean(r["error"] for r in rs) if rs else None,
        "floor": floor,
        "ratio": med / floor if med is not None and floor else None,
        "half": quantile(halves, 0.5),
        "open": sum(1 for r in rs if r["high_bps"] is None),
        "coverage": sum(1 for r in rs if r["in_band"] and r["high_bps"] is not None) / len(rs) if rs else None,
        "mb": quantile([r["probe_bytes"] / 1e6 for r in rs], 0.5),
        "drops": sum(1 for r in rs if (r["drops_caused"] or 0) > 0),
    }


def fmt_pct(x, spec=".1f"):
    return "–" if x is None else f"{100 * x:{spec}} %"


def fmt(x, spec):
    return "–" if x is None else format(x, spec)


def table(data):
    loads = sorted({c["load"] for c in data["cells"]})
    lines = [
        "",
        f"_Generated by `python3 scripts/bytes_curve.py write` from `{DATA}` "
        f"(commit {data['commit']}, {data['runs_per_cell']} runs per cell, {data['capacity']}); do not edit by hand._",
        "",
        "| load | budget | probe MB (median) | median \\|error\\| | signed mean | sampling floor | error / floor "
        "| 1/√bytes from the smallest budget | band half-width (median) | coverage (open = miss) | runs that made drops |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for load in loads:
        cells = sorted((c for c in data["cells"] if c["load"] == load), key=lambda c: c["budget_mb"])
        base = stats(cells[0])
        for c in cells:
            st = stats(c)
            ideal = base["median"] * math.sqrt(cells[0]["budget_mb"] / c["budget_mb"]) if base["median"] else None
            signed = "–" if st["signed"] is None else f"{100 * st['signed']:+.1f} %"
            opened = f" ({st['open']} open)" if st["open"] else ""
            lines.append(
                f"| {load:g} % | {c['budget_mb']:g} MB | {fmt(st['mb'], '.2f')} | {fmt_pct(st['median'])} | "
                f"{signed} | {fmt_pct(st['floor'])} | {fmt(st['ratio'], '.2f')} | {fmt_pct(ideal)} | "
                f"{fmt_pct(st['half'])} | {fmt_pct(st['coverage'], '.0f')}{opened} | {st['drops']} of {st['got']} |"
            )
    lines += ["", summary(data), ""]
    return "\n".join(lines)


def summary(data):
    """One sentence per load: how far the error fell and how it compares with 1/sqrt(bytes)."""
    parts = []
    for load in sorted({c["load"] for c in data["cells"]}):
        cells = sorted((c for c in data["cells"] if c["load"] == load), key=lambda c: c["budget_mb"])
        a, b = stats(cells[0]), stats(cells[-1])
        if a["median"] is None or b["median"] is None:
            continue
        k = cells[-1]["budget_mb"] / cells[0]["budget_mb"]
        parts.append(
            f"at {load:g} % load the median |error| went from {fmt_pct(a['median'])} at "
            f"{cells[0]['budget_mb']:g} MB to {fmt_pct(b['median'])} at {cells[-1]['budget_mb']:g} MB "
            f"(1/√bytes would give {fmt_pct(a['median'] / math.sqrt(k))}), the sampling floor from "
            f"{fmt_pct(a['floor'])} to {fmt_pct(b['floor'])}, and the probes made the tight link drop "
            f"packets in {b['drops']} of {b['got']} runs at {cells[-1]['budget_mb']:g} MB "
            f"(in {sum(stats(c)['drops'] for c in cells)} of {sum(stats(c)['got'] for c in cells)} over every budget)"
        )
    return ("In words: " + "; ".join(parts) + ". As the windows cover more of the truth's window the "
            "floor falls towards zero, so error / floor grows at the largest budgets by construction." if parts else "")


def svg(data):
    """A log-log figure: median |error| (solid) and sampling floor (dashed) per load, with 1/sqrt lines (dotted)."""
    w, h, l, r, t, bt = 640, 400, 70, 20, 30, 50
    cells = data["cells"]
    xs = [c["budget_mb"] for c in cells]
    ys = [v for c in cells for v in (stats(c)["median"], stats(c)["floor"]) if v]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0, y1 = math.log10(min(ys) * 0.8), math.log10(max(ys) * 1.25)
    X = lambda v: l + (math.log10(v) - x0) / max(x1 - x0, 1e-9) * (w - l - r)
    Y = lambda v: t + (y1 - math.log10(v)) / max(y1 - y0, 1e-9) * (h - t - bt)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="18" text-anchor="middle">FAC² median |error| (solid), sampling floor (dashed), 1/√bytes (dotted)</text>',
           f'<line x1="{l}" y1="{h - bt}" x2="{w - r}" y2="{h - bt}" stroke="black"/>',
           f'<line x1="{l}" y1="{t}" x2="{l}" y2="{h - bt}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">probe budget (MB, log)</text>',
           f'<text x="15" y="{h / 2}" text-anchor="middle" transform="rotate(-90 15 {h / 2})">relative error (log)</text>']
    for v in sorted(set(xs)):
        out.append(f'<text x="{X(v):.1f}" y="{h - bt + 15}" text-anchor="middle">{v:g}</text>')
    for v in [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]:
        if y0 <= math.log10(v) <= y1:
            out.append(f'<text x="{l - 5}" y="{Y(v) + 4:.1f}" text-anchor="end">{100 * v:g} %</text>')
            out.append(f'<line x1="{l}" y1="{Y(v):.1f}" x2="{w - r}" y2="{Y(v):.1f}" stroke="#ddd"/>')
    for i, load in enumerate(sorted({c["load"] for c in cells})):
        col = colours[i % len(colours)]
        cs = sorted((c for c in cells if c["load"] == load), key=lambda c: c["budget_mb"])
        for key, dash in (("median", ""), ("floor", ' stroke-dasharray="6 4"')):
            pts = [(X(c["budget_mb"]), Y(stats(c)[key])) for c in cs if stats(c)[key]]
            if len(pts) > 1:
                out.append(f'<polyline fill="none" stroke="{col}" stroke-width="2"{dash} points="'
                           + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
        m0 = stats(cs[0])["median"]
        if m0:
            b0 = cs[0]["budget_mb"]
            pts = [(X(c["budget_mb"]), Y(m0 * math.sqrt(b0 / c["budget_mb"]))) for c in cs]
            out.append(f'<polyline fill="none" stroke="{col}" stroke-width="1" stroke-dasharray="2 3" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
        out.append(f'<text x="{w - r - 5}" y="{t + 15 + 15 * i}" text-anchor="end" fill="{col}">{load:g} % load</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def load_data():
    with open(os.path.join(ROOT, DATA)) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("binary")
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--loads", default="30,70,90")
    r.add_argument("--bytes", default="0.5,1,2,4,8,16,32")
    r.add_argument("--capacity", default="300mbit")
    r.add_argument("--out", required=True)
    sub.add_parser("write")
    sub.add_parser("check")
    args = ap.parse_args()
    if args.cmd == "run":
        return run(args)
    data = load_data()
    blocks = [(DOC, BLOCK, table(data))]
    figure = svg(data)
    if args.cmd == "write":
        docblocks.apply(blocks)
        with open(os.path.join(ROOT, SVG), "w") as f:
            f.write(figure)
        return
    stale = docblocks.apply(blocks, check=True)
    with open(os.path.join(ROOT, SVG)) as f:
        if f.read() != figure:
            print(f"{SVG}: differs from what {DATA} gives", file=sys.stderr)
            stale += 1
    if stale:
        sys.exit(1)


if __name__ == "__main__":
    main()
