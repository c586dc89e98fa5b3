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

    python3 scripts/compare_tables.py --write-methods docs/methods docs/compare/data/*.json

The figures the docs' prose quotes from the same sweeps (run counts, drops,
coverage, band widths in README.md, docs/compare.md and docs/methods/*.md)
sit in inline blocks `<!-- compare-prose:NAME:begin -->` … `:end -->`, made
by `prose_blocks` below.  With no files named, the published sweeps
(PUBLISHED) are used:

    # rewrite every block: tables, method pages, prose
    python3 scripts/compare_tables.py --write-all
    # rewrite nothing; exit 1 naming each block that differs from the data
    python3 scripts/compare_tables.py --check

|error| = |estimate − truth| / truth, each run against the truth over its own
window.  Band coverage = share of the runs with a band (`in_band` not null)
whose band `estimate_low_bps`..`estimate_high_bps` held the truth; a band
with an open end (`estimate_high_bps` null or infinite, e.g. burst's [0, ∞),
or no `estimate_low_bps`) counts as a miss whatever `in_band` says.  Band
half-width = (`estimate_high_bps` − `estimate_low_bps`) / 2 relative to the
estimate (`estimate_bps`), over the closed bands; open bands are counted
beside it.  Drops = packets the tight link dropped because the probes were
there (`runs[].drops_caused`, docs/compare.md).
"""
import argparse
import json
import math
import os
import re
import statistics
import sys

import docblocks

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
DATA = "docs/compare/data"
# The sweeps docs/compare.md publishes (its command lists them in this order).
PUBLISHED = [f"{DATA}/{n}.json" for n in (
    "blind-fac2-300mbit", "blind-fac2-100mbit", "blind-fac2-300mbit-delay",
    "blind-fac2-100mbit-delay", "blind-fac2-300mbit-napi", "blind-300mbit", "blind-100mbit",
    "floor-300mbit", "floor-fac2-300mbit")]
# The first blind sweeps (commit 27d971d), quoted for comparison.
FIRST = [f"{DATA}/first-blind-300mbit.json", f"{DATA}/first-blind-100mbit.json"]


def is_open(r):
    """A band without an upper end (null or infinite) or without a lower one."""
    hi, lo = r.get("estimate_high_bps"), r.get("estimate_low_bps")
    return hi is None or lo is None or math.isinf(hi)


def banded(runs):
    """The runs scored against a band (`in_band` null: no band, counted neither way)."""
    return [r for r in runs if r.get("in_band") is not None]


def held(r):
    return bool(r["in_band"]) and not is_open(r)


def coverage(runs):
    """Share of the banded runs whose closed band held the truth; None without a banded run."""
    b = banded(runs)
    return (sum(1 for r in b if held(r)) / len(b)) if b else None


def half_widths(runs):
    """Each closed band's half-width relative to its estimate."""
    return [(r["estimate_high_bps"] - r["estimate_low_bps"]) / 2 / r["estimate_bps"]
            for r in banded(runs) if not is_open(r) and r.get("estimate_bps")]


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
        "open": sum(1 for r in banded(runs) if is_open(r)),
        "half_median": quantile(half_widths(runs), 0.5),
        "half_p90": quantile(half_widths(runs), 0.9),
        "drops_median": quantile(drops, 0.5),
        "drops_max": max(drops) if drops else None,
        "drops_known": len(drops),
        "dropping": sorted(d for d in drops if d > 0),
        "time": quantile([r["duration_s"] for r in runs], 0.5),
        "mb": quantile([r["probe_bytes"] / 1e6 for r in runs], 0.5),
        "intrusiveness": quantile([r["intrusiveness"] for r in runs], 0.5),
        # the sampling floor: what a perfect reader of the same probes erred by
        "floor": quantile([abs(r["sampling_error"]) for r in runs if r.get("sampling_error") is not None], 0.5),
    }


def ratio(st):
    """Median |error| over the sampling floor; None where either is missing."""
    if st["median"] is None or not st["floor"]:
        return None
    return st["median"] / st["floor"]


def fmt(x, spec):
    return "–" if x is None else format(x, spec)


def band(st):
    """A table cell: the closed bands' half-width, median / p90, and how many were open."""
    if st["half_median"] is None and not st["open"]:
        return "–"
    text = f"±{fmt(st['half_median'] and 100 * st['half_median'], '.1f')} / {fmt(st['half_p90'] and 100 * st['half_p90'], '.1f')} %"
    return text + (f" ({st['open']} open)" if st["open"] else "")


def dropping(st):
    """A table cell: runs whose probes made the tight link drop, and how many packets."""
    d = st["dropping"]
    if not st["drops_known"]:
        return "–"
    return f"{len(d)} of {st['drops_known']}" + (f" ({d[0]:.0f}–{d[-1]:.0f})" if len(d) > 1 else f" ({d[0]:.0f})" if d else "")


def drop_phrase(st):
    """Prose: in how many runs the probes made the tight link drop, and how many packets."""
    d, n = st["dropping"], st["drops_known"]
    if not d:
        return f"in none of {n} runs"
    return f"in {len(d)} of {n} runs ({d[0]:.0f}{'' if len(d) == 1 else f'–{d[-1]:.0f}'} packets)"


COVERAGE_HEAD = "band coverage (open = miss)"
BAND_HEAD = "band half-width, median / p90 (open bands)"


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
    # Sweeps stored since the sampling floor existed carry it per run.
    floors = any(r.get("sampling_error") is not None for r in sweep["runs"])
    if floors:
        out.append(
            "Sampling floor: the median \\|error\\| a reader that knew the cross traffic exactly, "
            "but only while the same probes were on the path, would have had (`sampling_error`); "
            "error / floor near 1 is as good as those probes allow.\n"
        )
    for kind in sweep["kinds"]:
        out.append(f"{kind} cross traffic:\n")
        floor_head = "| sampling floor | error / floor " if floors else ""
        out.append(
            "| load | method | C given | estimates | truth A (Mb/s) | median \\|error\\| | p90 \\|error\\| "
            f"{floor_head}| {COVERAGE_HEAD} | {BAND_HEAD} | drops caused (median, max) | time s (median) | probe MB (median) | intrusiveness (median) |"
        )
        out.append("|---" * (15 if floors else 13) + "|")
        for load in sweep["loads"]:
            for m in sweep["methods"]:
                runs = [r for r in sweep["runs"] if (r["kind"], r["load"], r["method"]) == (kind, load, m)]
                fails = [f for f in sweep["failures"] if (f["kind"], f["load"], f["method"]) == (kind, load, m)]
                s = cell_stats(runs, fails)
                out.append(
                    f"| {load:g} % | {m} | {given(sweep)} | {s['got']}/{s['made']} | "
                    f"{fmt(s['truth'] and s['truth'] / 1e6, '.1f')} | {pct(s['median'])} | {pct(s['p90'])} | "
                    + (f"{pct(s['floor'])} | {fmt(ratio(s), '.2f')} | " if floors else "")
                    + f"{fmt(s['coverage'] and 100 * s['coverage'], '.0f')}{'' if s['coverage'] is None else ' %'} | {band(s)} | "
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
        f"A band without an upper end counts as a miss; half-widths are relative to the estimate, over the closed bands.\n"
    )
    out.append(
        f"| method | estimates | median \\|error\\| | p90 \\|error\\| | {COVERAGE_HEAD} | worst cell's coverage | {BAND_HEAD} "
        "| drops caused (median, max) | runs with drops (packets) |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|")
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
            f"{pct(st['coverage'])} | {pct(worst)} | {band(st)} | {fmt(st['drops_median'], '.0f')}, {fmt(st['drops_max'], '.0f')} | "
            f"{dropping(st)} |"
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
        f"| path | cross | load | estimates | median \\|error\\| | p90 \\|error\\| | {COVERAGE_HEAD} | {BAND_HEAD} | drops caused (median) | time s | probe MB |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
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
                    f"{pct(st['median'])} | {pct(st['p90'])} | {pct(st['coverage'])} | {band(st)} | "
                    f"{fmt(st['drops_median'], '.0f')} | {fmt(st['time'], '.2f')} | {fmt(st['mb'], '.2f')} |"
                )
    st = cell_stats(all_runs, all_fails)
    out.append(
        f"\nOver all of these: {st['got']}/{st['made']} runs gave an estimate; median |error| "
        f"{pct(st['median'])}, p90 {pct(st['p90'])}; the band held the truth in {pct(st['coverage'])} of runs"
        + (f" ({st['open']} bands had no upper end and count as misses)" if st["open"] else "")
        + f"; band half-width relative to the estimate, median ±{pct(st['half_median'])}, p90 ±{pct(st['half_p90'])}"
        + (" (closed bands)" if st["open"] else "")
        + f"; the probes made the tight link drop packets {drop_phrase(st)}."
    )
    return "\n".join(out)


def method_blocks(sweeps, paths, directory="docs/methods"):
    """(file, block, text) for each method page's `compare-method:NAME` block."""
    out = []
    directory = os.path.relpath(os.path.abspath(directory), docblocks.ROOT)
    for name in sorted(os.listdir(os.path.join(docblocks.ROOT, directory))):
        if not name.endswith(".md"):
            continue
        with open(os.path.join(docblocks.ROOT, directory, name)) as f:
            doc = f.read()
        for m in re.findall(r"<!-- compare-method:([a-z0-9]+):begin -->", doc):
            out.append((os.path.join(directory, name), f"compare-method:{m}",
                        "\n" + method_block(sweeps, paths, m) + "\n"))
    return out


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


def pooled(sweeps, method):
    """cell_stats over every run and failure of one method in the given sweeps."""
    return cell_stats([r for s in sweeps for r in s["runs"] if r["method"] == method],
                      [f for s in sweeps for f in s["failures"] if f["method"] == method])


def cov(st, digits=0):
    return f"{100 * st['coverage']:.{digits}f} %"


def where_dropped(sweeps, method):
    """Prose: the packets each dropping run cost, by cell (`300/Poisson/90 %`)."""
    cells = {}
    for s in sweeps:
        for r in s["runs"]:
            if r["method"] == method and (r.get("drops_caused") or 0) > 0:
                name = f"{s['lab']['capacity'] / 1e6:g}/{r['kind'].capitalize().replace('Cbr', 'CBR')}/{r['load']:g} %"
                cells.setdefault(name, []).append(f"{r['drops_caused']:.0f}")
    said = lambda xs: xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]
    return ", ".join(f"{said(v)} packets at {k}" for k, v in cells.items())


def prose_blocks():
    """The figures the prose quotes, each an inline block `compare-prose:NAME`."""
    S = {os.path.basename(p)[:-5]: load(os.path.join(docblocks.ROOT, p)) for p in PUBLISHED + FIRST}
    fac2 = [S[n] for n in ("blind-fac2-300mbit", "blind-fac2-100mbit", "blind-fac2-300mbit-delay",
                           "blind-fac2-100mbit-delay", "blind-fac2-300mbit-napi")]
    new = pooled(fac2, "fac2")
    plain = pooled(fac2[:2], "fac2")  # without the delay line
    old = [S["blind-300mbit"], S["blind-100mbit"]]
    first = [S["first-blind-300mbit"], S["first-blind-100mbit"]]
    every = [S[os.path.basename(p)[:-5]] for p in PUBLISHED]
    half = lambda st: f"±{100 * st['half_median']:.1f} %, p90 ±{100 * st['half_p90']:.0f} %"
    floor = sum(1 for h in half_widths([r for s in fac2 for r in s["runs"] if r["method"] == "fac2"])
                if abs(h - 0.05) < 1e-9)

    def others():
        parts = []
        for i, m in enumerate(("slops", "igi", "ptr", "burst", "chirp", "pair")):
            st = pooled(old, m)
            name = {"slops": "SLoPS", "igi": "IGI", "ptr": "PTR"}.get(m, m)
            got = "" if st["got"] == st["made"] else f" ({st['got']} of {st['made']} runs gave an estimate)"
            opened = f" ({st['open']} bands with no upper end)" if st["open"] else ""
            if i == 0:
                parts.append(f"{name} {pct(st['median'])} median |error|{got}, band coverage {cov(st)}{opened}")
            else:
                parts.append(f"{name} {pct(st['median'])}{got}, {cov(st)}{opened}")
        runs = {pooled(old, m)["made"] for m in ("slops", "igi", "ptr", "burst", "chirp", "pair")}
        return (f"(commit {old[0]['commit']}, {'/'.join(str(n) for n in sorted(runs))} runs each; a band "
                f"without an upper end counts as a miss): " + "; ".join(parts))

    def bar():
        ok, short = [], []
        for m in ("igi", "ptr", "slops", "burst", "chirp", "pair"):
            st = pooled(every, m)
            name = {"slops": "SLoPS", "igi": "IGI", "ptr": "PTR"}.get(m, m)
            (ok if st["coverage"] >= 0.9 else short).append((name, st))
        return (f"band coverage over every stored sweep (a band without an upper end a miss) "
                + ", ".join(f"{n} {cov(st)}" for n, st in ok) + " meet 90 %; **"
                + " and ".join(f"{n} ({cov(st)})" for n, st in short)
                + (" does" if len(short) == 1 else " do") + " not**")

    burst, burst_first = pooled(old, "burst"), pooled(first, "burst")
    closed = [r for s in old for r in s["runs"] if r["method"] == "burst" and not is_open(r)]
    blocks = {
        "README.md": {
            "fac2": f"{new['got']} of {new['made']} runs gave an estimate, median |error| {pct(new['median'])}, "
                    f"band coverage {cov(new)} (band half-width median {half(new)} of the estimate), and "
                    f"the probes made the tight link drop packets {drop_phrase(new)}",
            "others": others(),
        },
        "docs/compare.md": {
            "fac2-all": f"{new['made']} runs, {new['got']} with an estimate; median |error| {pct(new['median'])}, "
                        f"p90 {pct(new['p90'])}, band coverage {pct(new['coverage'])}; band half-width median "
                        f"{half(new)} of the estimate, {floor} bands at the ±5 % floor, the widest "
                        f"±{100 * max(half_widths([r for s in fac2 for r in s['runs'] if r['method'] == 'fac2'])):.0f} %",
            "fac2-plain-band": f"the band held the truth in {round(plain['coverage'] * plain['got'])} of those {plain['got']} runs",
            "fac2-plain-drops": f"made the tight link drop packets in {len(plain['dropping'])} of those "
                                f"{plain['drops_known']} runs: {where_dropped(fac2[:2], 'fac2')}",
            "fac2-100d-band": f"{cov(pooled([S['blind-fac2-100mbit-delay']], 'fac2'))} coverage",
            "fac2-napi-band": (lambda st: f"bands holding the truth in {round(st['coverage'] * st['got'])} of {st['got']} runs")(
                pooled([S["blind-fac2-300mbit-napi"]], "fac2")),
            "bar-coverage": bar(),
            "burst-coverage": f"its band held the truth in {cov(burst)} of runs: {burst['open']} of its "
                              f"{burst['got']} bands had no upper end ([0, ∞)) and count as misses",
        },
        "docs/methods/fac2.md": {
            "fac2-drops": f"0 in {new['drops_known'] - len(new['dropping'])} of {new['drops_known']} runs, "
                          f"{new['dropping'][0]:.0f}–{new['dropping'][-1]:.0f} in the other {len(new['dropping'])}",
            "fac2-coverage": f"{pct(new['coverage'])} ({cov(plain)} without the delay line); half-width median {half(new)}",
        },
        "docs/methods/burst.md": {
            "burst-coverage": f"its band held the truth in {cov(burst)} of runs over both sweeps "
                              f"({cov(burst_first)} in the first blind sweep, before the floor); a band with no "
                              f"upper end counts as a miss, and {burst['open']} of its {burst['got']} bands in "
                              f"these sweeps were [0, ∞), all under Poisson cross traffic (of the closed ones "
                              f"{sum(1 for r in closed if held(r))} of {len(closed)} held the truth)",
            "burst-first": f"{cov(burst_first)}",
        },
        "docs/methods/igi.md": {
            "igi-coverage": f"{cov(pooled(old, 'igi'))} (IGI) and {cov(pooled(old, 'ptr'))} (PTR)",
            "ptr-first": cov(pooled(first, "ptr")),
        },
        "docs/methods/chirp.md": {"chirp-coverage": f"coverage {cov(pooled(old, 'chirp'))}"},
        "docs/methods/pair.md": {"pair-coverage": f"{cov(pooled(old, 'pair'))} of runs"},
    }
    return [(f, f"compare-prose:{k}", v) for f, d in blocks.items() for k, v in d.items()]


# The blind checks run beside a refactor (docs/architecture.md, "Behaviour
# after the refactor"): the same small sweep at each refactor's end, so that
# a runner or printer moved without changing what the methods read.
REFACTOR_CHECKS = [
    ("b624574", "docs/compare/data/refactor-check-b624574.json"),
    ("0b3d4e7", "docs/compare/data/refactor-check-0b3d4e7.json"),
]


def refactor_block():
    """Each method's median |error| and band coverage per cell, one column
    per refactor check, from the stored checks."""
    checks = [(c, load(os.path.join(docblocks.ROOT, p)))
              for c, p in REFACTOR_CHECKS if os.path.exists(os.path.join(docblocks.ROOT, p))]
    cells = sorted({(r["method"], r["kind"], r["load"]) for _, d in checks for r in d["runs"]},
                   key=lambda x: (["fac2", "slops", "igi", "ptr"].index(x[0])
                                  if x[0] in ("fac2", "slops", "igi", "ptr") else 9, x[1], x[2]))
    lines = ["", "_Generated by `python3 scripts/compare_tables.py --write-all` from "
             + ", ".join(f"`{p}`" for _, p in REFACTOR_CHECKS) + "; do not edit by hand._", "",
             "| method | cross | load | " + " | ".join(f"{c}: median \\|error\\| (runs, coverage)" for c, _ in checks) + " |",
             "|---|---|---|" + "---|" * len(checks)]
    for m, k, l in cells:
        row = f"| {m} | {k} | {l:g} % |"
        for _, d in checks:
            runs = [r for r in d["runs"] if (r["method"], r["kind"], r["load"]) == (m, k, l)]
            st = cell_stats(runs, [])
            covered = "–" if st["coverage"] is None else cov(st)
            row += f" {pct(st['median'])} ({st['got']}, {covered}) |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def all_blocks(paths):
    """Every block this script owns: the tables, the method pages and (for the
    published sweeps) the prose figures."""
    sweeps = [load(os.path.join(docblocks.ROOT, p)) for p in paths]
    out = [("docs/compare.md", "compare-tables", "\n" + tables(paths) + "\n")]
    out += method_blocks(sweeps, paths)
    if paths == PUBLISHED:
        out += prose_blocks()
        out.append(("docs/architecture.md", "refactor-checks", refactor_block()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", nargs=2, metavar=("COMPARE_JSON", "DEST"))
    ap.add_argument("--commit", default="?", help="commit the stored sweep was measured at")
    ap.add_argument("--drop-method", metavar="NAME", help="with --store: leave this method's runs out")
    ap.add_argument("--why", help="with --drop-method: why, recorded in the sweep")
    ap.add_argument("--write", metavar="MARKDOWN")
    ap.add_argument("--write-methods", metavar="DIR", help="rewrite each method page's block")
    ap.add_argument("--write-all", action="store_true", help="rewrite every block: tables, method pages, prose")
    ap.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 if any block differs from the data")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    if a.store:
        store(a.store[0], a.store[1], a.commit, a.drop_method, a.why)
        return
    if a.check or a.write_all:
        os.chdir(docblocks.ROOT)
        stale = docblocks.apply(all_blocks(a.files or PUBLISHED), check=a.check)
        if a.check:
            print(f"compare_tables: {stale} generated block(s) differ from the stored sweeps" if stale
                  else "compare_tables: every generated block matches the stored sweeps")
            sys.exit(1 if stale else 0)
        return
    if not a.files:
        sys.exit("compare_tables: no stored sweep given")
    blocks = []
    if a.write:
        blocks.append((os.path.relpath(a.write, docblocks.ROOT), "compare-tables", "\n" + tables(a.files) + "\n"))
    if a.write_methods:
        blocks += method_blocks([load(p) for p in a.files], a.files, a.write_methods)
    if blocks:
        docblocks.apply(blocks)
    else:
        print(tables(a.files))


if __name__ == "__main__":
    main()
