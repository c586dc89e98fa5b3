#!/usr/bin/env python3
"""The published tables of docs/compare.md, regenerated from stored sweeps.

Every accuracy figure pathsonde publishes comes from a `pathsonde compare`
sweep whose data is kept in docs/compare/data/ (a trimmed compare.json: the
runs, rows, failures, settings and the command, without the 100 ms series).
This script is the only thing that turns that data into tables, so a number
in the docs cannot drift from its source:

    # keep a sweep (trims OUT/compare.json into the data directory)
    python3 scripts/compare_tables.py --store OUT/compare.json docs/compare/data/NAME.json
    # withdraw a method whose code changed from a stored sweep (its runs no
    # longer describe it; the sweep records what was withdrawn and why)
    python3 scripts/compare_tables.py --store docs/compare/data/NAME.json docs/compare/data/NAME.json \
        --commit COMMIT --drop-method fac2 --why "rewritten in issue 16"
    # print the tables of stored sweeps
    python3 scripts/compare_tables.py docs/compare/data/*.json
    # rewrite the block between the markers in a markdown file
    python3 scripts/compare_tables.py --write docs/compare.md docs/compare/data/*.json

The block in a markdown file lies between `<!-- compare-tables:begin -->` and
`<!-- compare-tables:end -->`.  A method's page (docs/methods/) holds its own
block, `<!-- compare-method:NAME:begin -->` … `<!-- compare-method:NAME:end -->`,
rewritten by `--write-methods docs/methods` with that method's rows:

    python3 scripts/compare_tables.py --write-methods docs/methods docs/compare/data/*.json  |error| = |estimate − truth| / truth, each run
against the truth over its own window; band coverage = share of the runs with
an estimate whose band `estimate_low_bps`..`estimate_high_bps` held the truth;
drops = packets the tight link dropped because the probes were there
(`runs[].drops_caused`, docs/compare.md).
"""
import argparse
import json
import statistics
import sys

BEGIN = "<!-- compare-tables:begin -->"
END = "<!-- compare-tables:end -->"
# What a stored sweep keeps of compare.json; the rest (qdisc_series, each
# phase's truth_series) is 100 ms series, large and not needed for a table.
KEEP = [
    "command", "settings", "lab", "capacity_ip_bps", "probe_size_bytes", "kinds",
    "loads", "methods", "runs_per_cell", "settle_s", "tool_settle_s", "elapsed_s",
    "load_average_before", "load_average_after", "rows", "runs", "failures", "notes",
]
RUN_DROP = ["notes"]


def coverage(runs):
    """Share of the banded runs whose band held the truth; None without a banded run."""
    banded = [r for r in runs if r.get("in_band") is not None]
    return (sum(1 for r in banded if r["in_band"]) / len(banded)) if banded else None


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"compare_tables: cannot read {path}: {e}")


def store(src, dst, commit, drop=None, why=None):
    full = load(src)
    kept = {k: full.get(k) for k in KEEP}
    kept["commit"] = commit
    kept["withdrawn"] = list(full.get("withdrawn") or [])
    kept["phases"] = [
        {k: v for k, v in p.items() if k != "truth_series"} for p in full.get("phases", [])
    ]
    kept["runs"] = [
        dict({k: v for k, v in r.items() if k not in RUN_DROP}, notes=r.get("notes", [])[:3])
        for r in full["runs"]
    ]
    if drop:
        for key in ("runs", "rows", "failures"):
            kept[key] = [r for r in (kept.get(key) or []) if r.get("method") != drop]
        kept["methods"] = [m for m in kept["methods"] if m != drop]
        kept["withdrawn"].append({"method": drop, "why": why or "?"})
    with open(dst, "w") as f:
        json.dump(kept, f, separators=(",", ":"))
        f.write("\n")


def pct(x):
    return "–" if x is None else f"{100 * x:.1f} %"


def quantile(xs, q):
    """The q-quantile with linear interpolation (as pathsonde's stats::quantile)."""
    if not xs:
        return None
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def capacity_label(sweep):
    """The path as a reader names it: capacity, and the delay line or the
    threaded-NAPI receiver when the sweep had them."""
    lab = sweep.get("lab") or {}
    label = f"{lab.get('capacity', 0) / 1e6:g} Mb/s"
    if lab.get("delay"):
        label += f", {lab['delay'] / 1e6:g} ms delay"
    if lab.get("threaded_napi"):
        label += ", threaded NAPI"
    return label


def given(sweep):
    return "yes" if (sweep.get("settings") or {}).get("known_capacity_bps") else "no"


def cell_stats(runs, failures):
    errs = [abs(r["error"]) for r in runs]
    drops = [r["drops_caused"] for r in runs if r.get("drops_caused") is not None]
    return {
        "made": len(runs) + len(failures),
        "got": len(runs),
        "truth": statistics.mean(r["truth_bps"] for r in runs) if runs else None,
        "median": quantile(errs, 0.5),
        "p90": quantile(errs, 0.9),
        # a run without a band (capacity: in_band null) does not count either way
        "coverage": coverage(runs),
        "drops_median": quantile(drops, 0.5),
        "drops_max": max(drops) if drops else None,
        "time": quantile([r["duration_s"] for r in runs], 0.5),
        "mb": quantile([r["probe_bytes"] / 1e6 for r in runs], 0.5),
        "intrusiveness": quantile([r["intrusiveness"] for r in runs], 0.5),
    }


def fmt(x, spec):
    return "–" if x is None else format(x, spec)


def sweep_tables(sweep, name):
    out = []
    out.append(
        f"#### {capacity_label(sweep)}: `{name}` (commit {sweep.get('commit', '?')}, "
        f"{sweep['runs_per_cell']} runs per cell, sweep {sweep['elapsed_s']:.0f} s, "
        f"load average {fmt((sweep.get('load_average_before') or [None])[0], '.2f')} before)\n"
    )
    out.append(f"Command: `{sweep.get('command', '?')}`\n")
    for w in sweep.get("withdrawn") or []:
        out.append(f"Withdrawn from this sweep: {w['method']} ({w['why']}).\n")
    for kind in sweep["kinds"]:
        out.append(f"{kind} cross traffic:\n")
        out.append(
            "| load | method | C given | estimates | truth A (Mb/s) | median \\|error\\| | p90 \\|error\\| "
            "| band coverage | drops caused (median, max) | time s (median) | probe MB (median) | intrusiveness (median) |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for load in sweep["loads"]:
            for m in sweep["methods"]:
                runs = [r for r in sweep["runs"] if (r["kind"], r["load"], r["method"]) == (kind, load, m)]
                fails = [f for f in sweep["failures"] if (f["kind"], f["load"], f["method"]) == (kind, load, m)]
                s = cell_stats(runs, fails)
                out.append(
                    f"| {load:g} % | {m} | {given(sweep)} | {s['got']}/{s['made']} | "
                    f"{fmt(s['truth'] and s['truth'] / 1e6, '.1f')} | {pct(s['median'])} | {pct(s['p90'])} | "
                    f"{fmt(s['coverage'] and 100 * s['coverage'], '.0f')}{'' if s['coverage'] is None else ' %'} | "
                    f"{fmt(s['drops_median'], '.0f')}, {fmt(s['drops_max'], '.0f')} | {fmt(s['time'], '.2f')} | "
                    f"{fmt(s['mb'], '.2f')} | {fmt(s['intrusiveness'], '.2f')} |"
                )
        out.append("")
    return out


def method_summary(sweeps):
    """Per method over every stored sweep: estimates, median and p90 |error|, coverage."""
    methods = []
    for s in sweeps:
        for m in s["methods"]:
            if m not in methods:
                methods.append(m)
    out = ["#### Per method, over every stored sweep below\n"]
    out.append(
        "| method | estimates | median \\|error\\| | p90 \\|error\\| | band coverage | worst cell's coverage | drops caused (median, max) |"
    )
    out.append("|---|---|---|---|---|---|---|")
    for m in methods:
        runs = [r for s in sweeps for r in s["runs"] if r["method"] == m]
        fails = [f for s in sweeps for f in s["failures"] if f["method"] == m]
        st = cell_stats(runs, fails)
        cells = {}
        for s in sweeps:
            for r in s["runs"]:
                if r["method"] == m:
                    cells.setdefault((capacity_label(s), r["kind"], r["load"]), []).append(r)
        worst = min(
            (c for c in (coverage(rs) for rs in cells.values()) if c is not None), default=None
        )
        out.append(
            f"| {m} | {st['got']}/{st['made']} | {pct(st['median'])} | {pct(st['p90'])} | "
            f"{pct(st['coverage'])} | {pct(worst)} | {fmt(st['drops_median'], '.0f')}, {fmt(st['drops_max'], '.0f')} |"
        )
    out.append("")
    return out


def method_block(sweeps, paths, method):
    """One method's lab figures, per stored sweep, kind and load."""
    out = [
        f"_Lab, blind; generated by `python3 scripts/compare_tables.py --write-methods docs/methods "
        + " ".join(paths)
        + "`._\n"
    ]
    out.append(
        "| path | cross | load | estimates | median \\|error\\| | p90 \\|error\\| | band coverage | drops caused (median) | time s | probe MB |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    all_runs, all_fails = [], []
    for p, s in zip(paths, sweeps):
        for kind in s["kinds"]:
            for load in s["loads"]:
                key = lambda r: (r["kind"], r["load"], r["method"]) == (kind, load, method)
                runs = [r for r in s["runs"] if key(r)]
                fails = [f for f in s["failures"] if key(f)]
                if not runs and not fails:
                    continue
                all_runs += runs
                all_fails += fails
                st = cell_stats(runs, fails)
                out.append(
                    f"| {capacity_label(s)} (commit {s.get('commit', '?')}) | {kind} | {load:g} % | {st['got']}/{st['made']} | "
                    f"{pct(st['median'])} | {pct(st['p90'])} | {pct(st['coverage'])} | "
                    f"{fmt(st['drops_median'], '.0f')} | {fmt(st['time'], '.2f')} | {fmt(st['mb'], '.2f')} |"
                )
    st = cell_stats(all_runs, all_fails)
    out.append(
        f"\nOver all of these: {st['got']}/{st['made']} runs gave an estimate; median |error| "
        f"{pct(st['median'])}, p90 {pct(st['p90'])}; the band held the truth in {pct(st['coverage'])} of runs."
    )
    return "\n".join(out)


def write_methods(directory, paths):
    import os
    import re

    sweeps = [load(p) for p in paths]
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".md"):
            continue
        path = os.path.join(directory, name)
        with open(path) as f:
            doc = f.read()
        pat = re.compile(r"(<!-- compare-method:([a-z0-9]+):begin -->)(.*?)(<!-- compare-method:\2:end -->)", re.S)
        new = pat.sub(lambda m: m.group(1) + "\n" + method_block(sweeps, paths, m.group(2)) + "\n" + m.group(4), doc)
        if new != doc:
            with open(path, "w") as f:
                f.write(new)


def tables(paths):
    sweeps = [load(p) for p in paths]
    out = [
        "_Generated by `python3 scripts/compare_tables.py --write docs/compare.md "
        + " ".join(paths)
        + "` from the stored sweeps; do not edit by hand._\n"
    ]
    out += method_summary(sweeps)
    for p, s in zip(paths, sweeps):
        out += sweep_tables(s, p)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", nargs=2, metavar=("COMPARE_JSON", "DEST"))
    ap.add_argument("--commit", default="?", help="commit the stored sweep was measured at")
    ap.add_argument("--drop-method", metavar="NAME", help="with --store: leave this method's runs out")
    ap.add_argument("--why", help="with --drop-method: why, recorded in the sweep")
    ap.add_argument("--write", metavar="MARKDOWN")
    ap.add_argument("--write-methods", metavar="DIR", help="rewrite each method page's block")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    if a.store:
        store(a.store[0], a.store[1], a.commit, a.drop_method, a.why)
        return
    if not a.files:
        sys.exit("compare_tables: no stored sweep given")
    if a.write_methods:
        write_methods(a.write_methods, a.files)
        if not a.write:
            return
    text = tables(a.files)
    if a.write:
        with open(a.write) as f:
            doc = f.read()
        if BEGIN not in doc or END not in doc:
            sys.exit(f"compare_tables: {a.write} has no {BEGIN} … {END} block")
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(a.write, "w") as f:
            f.write(head + BEGIN + "\n" + text + "\n" + END + tail)
    else:
        print(text)


if __name__ == "__main__":
    main()
