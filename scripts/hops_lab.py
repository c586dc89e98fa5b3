#!/usr/bin/env python3
"""Issue 29's acceptance sweep for `hops`: lab chains of 3-5 routers with the
tight link at each measured position in turn and the narrow link before or
after it, 30-70 % Poisson cross traffic on the tight link, the routers'
default ICMP rate limits, and one chain with a silent router that is not the
tight hop.

    sudo python3 scripts/hops_lab.py run BINARY --out FILE [--runs 20] [--only 0,3] [--commit C] [--merge] [--ipv6]
    python3 scripts/hops_lab.py write   # the docs/hops.md block
    python3 scripts/hops_lab.py check   # CI: the block matches the data

`run` calls `BINARY lab run --method hops … --json --no-save` once per
topology (the chain is built once and the method runs blind `--runs` times
on it), holding the lab lock (/tmp/pathsonde-lab.lock) for each, and stores
every run's score: tight link named, narrow link named, `available` against
the tight link's A, probe bytes, time, silent hops, and the machine's load
average before and after (the sweep wants a quiet machine: 13 topologies of
20 runs take about 25 s a run, some 110 minutes in all).  Copy FILE to
docs/hops/data/hops-lab.json for `write`.  Until that file exists the block
says the sweep has not been run: no figure is written from anything else.
With `--merge`, FILE's existing topologies stay and the ones run replace
theirs: each topology records the commit its binary was built from, and the
table names it per row, so a sweep can be re-run a topology at a time after
a change to the method.  With `--ipv6` the chains are dual-stack and probed
over IPv6 (`lab run --method hops --ipv6`); those rows are a family of their
own (the table's IP column), summed up apart from the IPv4 rows the issue's
acceptance counts.  Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docblocks  # noqa: E402
from lablock import run_lab_json  # noqa: E402
from bytes_curve import fmt, fmt_pct, quantile  # noqa: E402

ROOT = docblocks.ROOT
DATA = "docs/hops/data/hops-lab.json"
DOC = "docs/hops.md"
BLOCK = "hops-lab"

# (routers, tight at, narrow at, load % on the tight link, narrow rate, silent routers).
# The tight link is 100 Mb/s (tbf), so A = 100 − load; the narrow link is idle
# and slower than 100 Mb/s but above A.  The link into the far end is not
# measured by `hops` (docs/hops.md), so the tight link takes positions 1..N.
TOPOLOGIES = [
    (3, 1, 3, 60, "60mbit", []),
    (3, 2, 3, 60, "60mbit", []),
    (3, 2, 1, 50, "70mbit", []),
    (3, 3, 1, 70, "60mbit", []),
    (3, 3, 2, 30, "85mbit", []),
    (4, 1, 2, 50, "70mbit", []),
    (4, 2, 4, 70, "60mbit", []),
    (4, 3, 1, 60, "60mbit", []),
    (4, 4, 2, 40, "80mbit", []),
    (5, 2, 5, 60, "60mbit", []),
    (5, 5, 3, 60, "60mbit", []),
    (3, 2, 3, 60, "60mbit", [1]),
    (4, 3, 2, 60, "60mbit", [1]),
]

# pathneck's yardsticks (Hu et al. 2004): 33.6 KB per train, and
# bottlenecks located on almost 80 % of the Internet paths its authors probed.
PATHNECK_TRAIN_BYTES = 33_600

# The notes `hops` adds when the sender could not send its trains as asked
# (crates/pathsonde-core/src/methods/hops/{mod,narrow,pacing}.rs): a scan
# train short of its rate, clamp check trains the sender could not pace, any
# paced train more than 15 % off its plan (kept from 2026-12-02 on).
HOST_NOTES = ["the sender reached only", "could not pace them: host-limited",
              "paced trains left this host more than"]


def command(binary, topo, runs, ipv6=False):
    routers, tight, narrow, load, rate, silent = topo
    cmd = [binary, "lab", "run", "--method", "hops", "--hops", str(routers),
           "--tight-at", str(tight), "--narrow-at", str(narrow), "--narrow", rate,
           "--cross", f"poisson:{load}%", "--runs", str(runs), "--json", "--no-save"]
    if silent:
        cmd += ["--silent", ",".join(map(str, silent))]
    if ipv6:
        cmd += ["--ipv6"]
    return cmd


def slim(r):
    """What the table needs of one run, and enough to check it by hand."""
    tight = next(l for l in r["truth"] if l["link"] == r["true_tight"])
    return {
        "run": r["run"],
        "true_tight": r["true_tight"],
        "true_narrow": r["true_narrow"],
        "tight_named_as": r["tight_named_as"],
        "tight_named": r["tight_named"],
        "narrow_named_as": r["narrow_named_as"],
        "narrow": r["narrow"],
        "available_bps": r["available_bps"],
        "truth_available_bps": r["truth_available_bps"],
        "tight_cross_l2_bps": tight["cross_l2_bps"],
        # Packets each link's qdisc dropped over the run (cross traffic and
        # probes alike), link 1 first: a sweep that overflowed queues shows it.
        "link_drops": [l.get("qdisc_drops") for l in r["truth"]],
        "error": r["error"],
        "probe_bytes": r["probe_bytes"],
        "elapsed_s": r["elapsed_s"],
        "silent_reported": r["silent_reported"],
        "silent_right": r["silent_right"],
        # Why the method said what it did (which narrow-link check failed,
        # silent hops, the far end): kept so a table's misses can be read.
        "notes": (r.get("hops") or {}).get("notes", []),
        "narrow_link": (r.get("hops") or {}).get("narrow_link"),
        # How closely the sender kept the paced trains' planned rates
        # (absent before 2026-12-02).
        "pacing": (r.get("hops") or {}).get("pacing"),
    }


def run(args):
    # The commit the binary was built from: give it when the binary is not
    # this checkout's HEAD (a build kept aside while main moved on).
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                           capture_output=True, text=True).stdout.strip()
    only = [int(i) for i in args.only.split(",")] if args.only else range(len(TOPOLOGIES))
    cells = []
    if args.merge and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        cells = [dict(c, commit=c.get("commit", old["commit"])) for c in old["cells"]]
    for i in only:
        topo = TOPOLOGIES[i]
        cmd = command(args.binary, topo, args.runs, args.ipv6)
        rep, load_before, load_after = run_lab_json("hops_lab", cmd)
        runs = [slim(r) for r in rep.get("runs", [])]
        routers, tight, narrow, load, rate, silent = topo
        cell = {"routers": routers, "tight_at": tight, "narrow_at": narrow, "load": load,
                "narrow_rate": rate, "silent": silent, "family": "ipv6" if args.ipv6 else "ipv4",
                "command": " ".join(cmd[1:]),
                "commit": commit, "runs": runs, "notes": rep.get("notes", []),
                "loadavg_before": load_before, "loadavg_after": load_after}
        same = [j for j, c in enumerate(cells) if key(c) == key(cell)]
        if same:
            cells[same[0]] = cell
        else:
            cells.append(cell)
        st = stats(cell)
        print(f"{label(cell)}: tight {st['tight']}/{st['got']}, narrow {st['narrow']}/{st['differs']}, "
              f"|error| median {fmt_pct(st['median'])}, {fmt(st['kb'], '.0f')} KB, {fmt(st['s'], '.1f')} s",
              file=sys.stderr, flush=True)
        # After every topology, so that a sweep stopped part way keeps the
        # topologies it finished (one stopped on 2026-12-02 lost two).
        save(args, commit, cells)


def save(args, commit, cells):
    cells = sorted(cells, key=lambda c: (family(c) == "ipv6", TOPOLOGIES.index(topology(c))
                                         if topology(c) in TOPOLOGIES else len(TOPOLOGIES)))
    tmp = args.out + ".part"
    with open(tmp, "w") as f:
        json.dump({"commit": commit, "binary": args.binary, "runs_per_topology": args.runs,
                   "cells": cells}, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.out)


def topology(c):
    return (c["routers"], c["tight_at"], c["narrow_at"], c["load"], c["narrow_rate"], list(c["silent"]))


def family(c):
    """`ipv4` for the rows stored before the sweep took `--ipv6`."""
    return c.get("family", "ipv4")


def key(c):
    return (c["routers"], c["tight_at"], c["narrow_at"], c["load"], tuple(c["silent"]), family(c))


def label(c):
    s = f"{c['routers'] + 1} links, tight {c['tight_at']}, narrow {c['narrow_at']}"
    s += f", r{','.join(map(str, c['silent']))} silent" if c["silent"] else ""
    return s + (", IPv6" if family(c) == "ipv6" else "")


def stats(c):
    rs = c["runs"]
    errs = [abs(r["error"]) for r in rs if r["error"] is not None]
    differs = [r for r in rs if r["narrow"] != "same_as_tight"]
    return {
        "got": len(rs),
        "tight": sum(1 for r in rs if r["tight_named"]),
        "differs": len(differs),
        "narrow": sum(1 for r in differs if r["narrow"] == "named"),
        "narrow_wrong": sum(1 for r in differs if r["narrow"] == "wrong"),
        "silent": sum(1 for r in rs if r["silent_right"]),
        "median": quantile(errs, 0.5),
        "p90": quantile(errs, 0.9),
        "kb": quantile([r["probe_bytes"] / 1000 for r in rs], 0.5),
        "s": quantile([r["elapsed_s"] for r in rs], 0.5),
        "s_max": max((r["elapsed_s"] for r in rs), default=None),
        # Runs in which some link's qdisc dropped packets; None for rows
        # measured before the sweep kept the counts.
        "dropped": (sum(1 for r in rs if any(d for d in r["link_drops"] if d))
                    if all("link_drops" in r for r in rs) else None),
        # Runs whose sender fell short of the trains' rates (the method's
        # host-pacing note): their rates are the host's, not the path's.
        "host": sum(1 for r in rs if host_limited(r)),
    }


def host_limited(r):
    """Whether the run's own evidence says the sender set some train's rate."""
    return any(h in n for n in r["notes"] for h in HOST_NOTES)


def commits(data):
    """The commits the rows were measured at, in row order."""
    seen = []
    for c in data["cells"]:
        x = c.get("commit", data["commit"])
        if x not in seen:
            seen.append(x)
    return ", ".join(seen)


def sums(cells):
    """What the prose says of a set of rows."""
    runs = [r for c in cells for r in c["runs"]]
    ahead = [r for c in cells for r in c["runs"]
             if r["narrow"] != "same_as_tight" and c["narrow_at"] < c["tight_at"]]
    after = [r for c in cells for r in c["runs"]
             if r["narrow"] != "same_as_tight" and c["narrow_at"] > c["tight_at"]]
    named = lambda rs: sum(1 for r in rs if r["narrow"] == "named")
    wrong = sum(1 for r in runs if r["narrow"] == "wrong")
    signed = [r["error"] for r in runs if r["error"] is not None]
    times = [r["elapsed_s"] for r in runs]
    return (f"the tight link was named in {sum(1 for r in runs if r['tight_named'])} of "
            f"{len(runs)} runs; the narrow link ahead of it in {named(ahead)} of {len(ahead)}, after it in "
            f"{named(after)} of {len(after)}, and wrongly in {wrong}; `available`'s signed error has a median "
            f"of {fmt_pct(quantile(signed, 0.5), '+.1f')}; the longest run took "
            f"{fmt(max(times, default=None), '.1f')} s")


def prose(data):
    """The sentences that sum the table up, from the same data: the IPv4
    rows (the issue's acceptance), then the IPv6 rows apart."""
    v4 = [c for c in data["cells"] if family(c) == "ipv4"]
    v6 = [c for c in data["cells"] if family(c) == "ipv6"]
    text = f"In words: over IPv4, {sums(v4)}."
    if v6:
        text += (f" Over IPv6 ({len(v6)} topolog{'y' if len(v6) == 1 else 'ies'}, the IP column), "
                 f"{sums(v6)}.")
    return text


def block(data):
    if data is None:
        return ("\n_Generated by `python3 scripts/hops_lab.py write`: **not yet measured**. "
                f"`{DATA}` does not exist yet; the sweep (`sudo python3 scripts/hops_lab.py run "
                f"target/release/pathsonde --out {DATA}`, 20 runs per topology, release build, "
                "quiet machine) has not been run, so there is no figure here._\n")
    lines = [
        "",
        f"_Generated by `python3 scripts/hops_lab.py write` from `{DATA}` (commit {commits(data)}, "
        f"{data['runs_per_topology']} runs per topology, blind, default ICMP limits); do not edit by hand._",
        "",
        "| links | IP | tight at | narrow at | silent | load | runs | tight named (hop found) | narrow named "
        "| median \\|error\\| of `available` | p90 | median probe KB | median time s | max time s "
        "| runs with qdisc drops | host-limited runs | commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in data["cells"]:
        st = stats(c)
        narrow = f"{st['narrow']}/{st['differs']}" + (f" ({st['narrow_wrong']} wrong)" if st["narrow_wrong"] else "")
        silent = ", ".join(f"r{k}" for k in c["silent"]) or "–"
        lines.append(
            f"| {c['routers'] + 1} | {family(c)[2:]} | {c['tight_at']} | {c['narrow_at']} ({c['narrow_rate']}) | {silent} | "
            f"{c['load']} % | {st['got']} | {st['tight']}/{st['got']} | {narrow} | {fmt_pct(st['median'])} | "
            f"{fmt_pct(st['p90'])} | {fmt(st['kb'], '.0f')} | {fmt(st['s'], '.1f')} | {fmt(st['s_max'], '.1f')} | "
            f"{'not kept' if st['dropped'] is None else st['dropped']} | {st['host']} | "
            f"{c.get('commit', data['commit'])} |"
        )
    lines += ["", prose(data), "",
              f"pathneck's yardstick: {PATHNECK_TRAIN_BYTES / 1000:.1f} KB per train; bottlenecks "
              "located on almost 80 % of the Internet paths its authors probed.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("binary")
    r.add_argument("--runs", type=int, default=20)
    r.add_argument("--only", help="comma-separated topology indices (0-based) to run")
    r.add_argument("--out", required=True)
    r.add_argument("--commit", help="the commit BINARY was built from (default: this checkout's HEAD)")
    r.add_argument("--ipv6", action="store_true",
                   help="dual-stack chains, probed over IPv6 (rows of their own)")
    r.add_argument("--merge", action="store_true",
                   help="keep OUT's other topologies; the ones run replace theirs")
    sub.add_parser("write")
    sub.add_parser("check")
    args = ap.parse_args()
    if args.cmd == "run":
        return run(args)
    path = os.path.join(ROOT, DATA)
    data = None
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    blocks = [(DOC, BLOCK, block(data))]
    check = args.cmd == "check"
    if docblocks.apply(blocks, check=check) and check:
        sys.exit(1)


if __name__ == "__main__":
    main()
