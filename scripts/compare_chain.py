#!/usr/bin/env python3
"""`compare --hops` on lab chains (issue 29's "hop found" column): three
routers (four links), the tight link on each router's link in turn with
Poisson cross traffic on it and an idle 60 Mb/s narrow link after it or
ahead of it, `hops` beside
the end-to-end methods, blind, the routers' default ICMP limits.

    sudo python3 scripts/compare_chain.py run BINARY [--runs 5] [--only 0,2] [--commit C]
    python3 scripts/compare_chain.py write   # the docs/compare.md block
    python3 scripts/compare_chain.py check   # CI: the block matches the data

`run` calls `BINARY compare --hops 3 --tight-at K --narrow-at M … --json`
once per chain (compare takes the lab lock itself) and stores its JSON, less
each phase's 100 ms truth series, as docs/compare/data/chain-tK-nM.json,
with the commit BINARY was built from and the machine's load average before
and after.  `write` makes the table and the sentence that sums it up from
those files.  Standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docblocks  # noqa: E402
from bytes_curve import fmt, fmt_pct, quantile  # noqa: E402

ROOT = docblocks.ROOT
DATA_DIR = "docs/compare/data"
DOC = "docs/compare.md"
BLOCK = "compare-chain"
ROUTERS = 3
LOADS = "50,70"
METHODS = "hops,fac2,slops"

# (tight at, narrow at): the tight link on each router's link in turn
# (links 1-3; link 4, into the far end, is one `hops` does not measure:
# docs/hops.md), the narrow link after it and ahead of it.
CHAINS = [(1, 3), (2, 3), (2, 1), (3, 1)]


def data_path(tight, narrow):
    return f"{DATA_DIR}/chain-t{tight}-n{narrow}.json"


def command(binary, chain, runs, out):
    tight, narrow = chain
    return [binary, "compare", "--hops", str(ROUTERS), "--tight-at", str(tight),
            "--narrow-at", str(narrow), "--loads", LOADS, "--methods", METHODS,
            "--runs", str(runs), "--json", "--out", out]


def run(args):
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                           capture_output=True, text=True).stdout.strip()
    only = [int(i) for i in args.only.split(",")] if args.only else range(len(CHAINS))
    for i in only:
        chain = CHAINS[i]
        with tempfile.TemporaryDirectory() as out:
            cmd = command(args.binary, chain, args.runs, out)
            before = os.getloadavg()
            done = subprocess.run(cmd, capture_output=True, text=True)
            after = os.getloadavg()
        if done.returncode not in (0, 9):
            sys.exit(f"compare_chain: {' '.join(cmd)} failed ({done.returncode}): "
                     f"{done.stderr.strip()[-400:]}")
        rep = json.loads(done.stdout)
        for p in rep.get("phases", []):
            p.pop("truth_series", None)
        rep.pop("files", None)
        rep["command"] = " ".join(["pathsonde"] + cmd[1:-2])
        rep["commit"] = commit
        rep["loadavg_before"] = list(before)
        rep["loadavg_after"] = list(after)
        path = os.path.join(ROOT, data_path(*chain))
        with open(path, "w") as f:
            json.dump(rep, f, indent=1)
            f.write("\n")
        for r in rep["rows"]:
            print(f"chain {chain} {r['load']} % {r['method']}: {r['runs']}/{r['runs'] + r['failed']} "
                  f"hop {r.get('hop_found', '-')} med|e| {fmt_pct(r['median_abs_error'])}",
                  file=sys.stderr, flush=True)


def loaded():
    """The stored sweeps, in CHAINS order (those not measured yet left out)."""
    out = []
    for chain in CHAINS:
        path = os.path.join(ROOT, data_path(*chain))
        if os.path.exists(path):
            with open(path) as f:
                out.append((chain, json.load(f)))
    return out


def tries(row):
    return row["runs"] + row["failed"]


def prose(sweeps):
    """The sentences that sum the table up, from the same data."""
    hops = [r for _, s in sweeps for r in s["rows"] if r["method"] == "hops"]
    found = sum(r["hop_found"] for r in hops)
    total = sum(tries(r) for r in hops)
    nf = sum(r.get("narrow_found") or 0 for r in hops)
    nd = sum(r.get("narrow_differs") or 0 for r in hops)
    herr = [abs(x["error"]) for _, s in sweeps for x in s["runs"] if x["method"] == "hops"]
    words = [f"In words: `hops` named the tight link's hop in {found} of {total} tries "
             f"(a try that named no tight link counts as a miss) and the narrow link in {nf} "
             f"of the {nd} runs that named a tight link; its tight link's `available` had a "
             f"median |error| of {fmt_pct(quantile(herr, 0.5))} against that link's A."]
    for m in METHODS.split(",")[1:]:
        rs = [x for _, s in sweeps for x in s["runs"] if x["method"] == m]
        fails = sum(1 for _, s in sweeps for f in s["failures"] if f["method"] == m)
        if not rs and not fails:
            continue
        errs = [abs(x["error"]) for x in rs]
        held = sum(1 for x in rs if x["in_band"])
        words.append(f"{m} end to end: {len(rs)} of {len(rs) + fails} runs gave an estimate, "
                     f"median |error| {fmt_pct(quantile(errs, 0.5))}, band held A in {held}"
                     + worst(sweeps, m) + sides(sweeps, m) + ".")
    return " ".join(words) + disturbed(sweeps)


def sides(sweeps, method):
    """`method`'s signed median error with the narrow link after the tight
    one and ahead of it."""
    out = []
    for name, after in (("after", True), ("ahead of", False)):
        errs = [x["error"] for (t, n), s in sweeps if (n > t) == after
                for x in s["runs"] if x["method"] == method]
        if errs:
            out.append(f"{fmt_pct(quantile(errs, 0.5), '+.1f')} signed with the narrow link {name} "
                       f"the tight one ({len(errs)} runs)")
    return ("; median " + ", ".join(out)) if out else ""


# A run's own words that the sender could not send as asked: FAC²'s
# "achieved only X of the requested Y" (counted below half: at 1 Gb/s the
# opening train often reaches 80-90 %), SLoPS's "could not hold the stream
# spacing".
SHORTFALL = re.compile(r"achieved only ([0-9.]+) (k|M|G)b/s of the requested ([0-9.]+) (k|M|G)b/s")
SCALE = {"k": 1e3, "M": 1e6, "G": 1e9}


def fell_short(note):
    m = SHORTFALL.search(note)
    if m:
        got, want = float(m[1]) * SCALE[m[2]], float(m[3]) * SCALE[m[4]]
        return got < 0.5 * want
    return "could not hold the stream spacing" in note


def disturbed(sweeps):
    """Cells where some run's own notes say the sender fell short of its
    rates, with the methods' median |error| there."""
    out = []
    for (t, n), s in sweeps:
        for load in s["loads"]:
            rs = [x for x in s["runs"] if x["load"] == load]
            short = [x for x in rs if x["method"] != "hops"
                     and (x.get("host_limited") or any(fell_short(note) for note in x["notes"]))]
            if len(short) < 2:
                continue
            errs = {m: quantile([abs(x["error"]) for x in rs if x["method"] == m], 0.5)
                    for m in METHODS.split(",")}
            out.append(f"tight at {t}, narrow at {n}, {load:g} %: {len(short)} end-to-end runs say the "
                       f"sender fell short of half its rate, could not hold its spacing or set the answer; median |error| "
                       + ", ".join(f"{m} {fmt_pct(e)}" for m, e in errs.items() if e is not None))
    return (" Cells whose runs name the host: " + "; ".join(out) + ".") if out else ""


def worst(sweeps, method):
    """The chain where `method`'s median |error| was largest, when it is
    more than twice its median over every chain."""
    per = []
    for (t, n), s in sweeps:
        errs = [abs(x["error"]) for x in s["runs"] if x["method"] == method]
        if errs:
            per.append((quantile(errs, 0.5), t, n))
    every = quantile([abs(x["error"]) for _, s in sweeps for x in s["runs"]
                      if x["method"] == method], 0.5)
    if not per or every is None:
        return ""
    e, t, n = max(per)
    if e <= 2 * every:
        return ""
    side = "after" if n > t else "ahead of"
    return (f"; its largest median, {fmt_pct(e)}, on the chain with the narrow link "
            f"{side} the tight one (tight at {t}, narrow at {n})")


def block(sweeps):
    if not sweeps:
        return ("\n_Generated by `python3 scripts/compare_chain.py write`: **not yet measured**. "
                f"No `{DATA_DIR}/chain-*.json` exists yet, so there is no figure here._\n")
    commits = ", ".join(dict.fromkeys(s["commit"] for _, s in sweeps))
    runs = ", ".join(dict.fromkeys(str(s["runs_per_cell"]) for _, s in sweeps))
    lines = [
        "",
        f"_Generated by `python3 scripts/compare_chain.py write` from `{DATA_DIR}/chain-*.json` "
        f"(commit {commits}; {ROUTERS} routers, tight link 100 Mb/s with Poisson cross traffic, "
        f"idle narrow link 60 Mb/s; {runs} runs per method and load, blind, default ICMP limits); "
        "do not edit by hand._",
        "",
        "| tight at | narrow at | load | method | runs | hop found | narrow found | truth A Mb/s "
        "| median \\|error\\| | p90 \\|error\\| | band | time s | probe KB | load avg before |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (t, n), s in sweeps:
        for r in s["rows"]:
            hop = f"{r['hop_found']}/{tries(r)}" if r.get("hop_found") is not None else "–"
            narrow = (f"{r['narrow_found']}/{r['narrow_differs']}"
                      if r.get("narrow_differs") is not None else "–")
            truth = r["truth_mean_bps"]
            band = r["band_coverage"]
            lines.append(
                f"| {t} | {n} | {r['load']:g} % | {r['method']} | {r['runs']}/{tries(r)} | {hop} | "
                f"{narrow} | {fmt(truth / 1e6 if truth else None, '.1f')} | "
                f"{fmt_pct(r['median_abs_error'])} | {fmt_pct(r['p90_abs_error'])} | "
                f"{'–' if band is None else f'{band * 100:.0f} %'} | {fmt(r['time_mean_s'], '.1f')} | "
                f"{fmt(r['probe_bytes_mean'] / 1e3 if r['probe_bytes_mean'] else None, '.0f')} | "
                f"{s['loadavg_before'][0]:.2f} |")
    lines += ["", prose(sweeps), ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("binary")
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--only", help="comma-separated chain indices (0-based) to run")
    r.add_argument("--commit", help="the commit BINARY was built from (default: this checkout's HEAD)")
    sub.add_parser("write")
    sub.add_parser("check")
    args = ap.parse_args()
    if args.cmd == "run":
        return run(args)
    check = args.cmd == "check"
    if docblocks.apply([(DOC, BLOCK, block(loaded()))], check=check) and check:
        sys.exit(1)


if __name__ == "__main__":
    main()
