#!/usr/bin/env python3
"""`hops --queue` and `hops`'s end-to-end check on lab chains (issue 29): a
short tbf queue on the tight link at each position in turn, the chain's other
shaped link keeping the lab's 256 KiB, Poisson cross traffic on the tight
link, the routers' default ICMP limits, and a pathsonde server on the
receiver; each run is the whole `hops --queue` measurement and then the
end-to-end one, blind.

    sudo python3 scripts/hops_queue_e2e.py run BINARY --out FILE [--runs 8] [--only 0,2] [--commit C] [--merge]
    python3 scripts/hops_queue_e2e.py write   # the docs/hops.md block
    python3 scripts/hops_queue_e2e.py check   # CI: the block matches the data

`run` calls `BINARY lab run --method hops … --queue Q --queue-probe
--end-to-end --json --no-save` once per chain under the lab lock and stores
each run's bursts beside the chain's truth (the short queue: the shaped link
with the least limit; what it holds: limit and tbf bucket; the hop the method
said first lost a burst; its MBS bracket), its end-to-end estimate beside
the tight link's A over that measurement's window and the verdict `hops`
gave, and the run's tight-link score, so that a short queue that spoils the
main trains shows.  Copy FILE to docs/hops/data/hops-queue-e2e.json for
`write`.  Standard library only.
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
DATA = "docs/hops/data/hops-queue-e2e.json"
DOC = "docs/hops.md"
BLOCK = "hops-queue-e2e"

# (routers, tight at, narrow at or None, load % on the tight link, the tight
# link's queue).  The tight link is 100 Mb/s; the narrow link, when there is
# one, is an idle 60 Mb/s tbf with the lab's 256 KiB queue.
CHAINS = [
    (3, 1, None, 30, "30KB"),
    (3, 2, None, 30, "30KB"),
    (3, 3, None, 30, "30KB"),
    (3, 2, 3, 60, "60KB"),
]


def command(binary, chain, runs):
    routers, tight, narrow, load, queue = chain
    cmd = [binary, "lab", "run", "--method", "hops", "--hops", str(routers),
           "--tight-at", str(tight), "--cross", f"poisson:{load}%", "--queue", queue,
           "--queue-probe", "--end-to-end", "--runs", str(runs), "--json", "--no-save"]
    if narrow is not None:
        cmd += ["--narrow-at", str(narrow)]
    return cmd


def slim(r):
    q = r.get("queue") or {}
    hq = (r.get("hops") or {}).get("queue") or {}
    e = r.get("end_to_end") or {}
    return {
        "run": r["run"],
        "tight_named": r["tight_named"],
        "true_short": q.get("true_short"),
        "truth_bytes": q.get("truth_bytes"),
        "first_overflow": q.get("first_overflow"),
        "short_named": q.get("short_named"),
        "mbs_passed": q.get("mbs_passed"),
        "mbs_lost": q.get("mbs_lost"),
        "burst_bytes": q.get("probe_bytes"),
        "probe_bytes": r["probe_bytes"],
        "elapsed_s": r["elapsed_s"],
        "link_drops": [l.get("qdisc_drops") for l in r["truth"]],
        "queue_notes": hq.get("notes", []),
        "e2e_available_bps": e.get("available_bps"),
        "e2e_high_bps": e.get("high_bps"),
        "e2e_truth_bps": e.get("truth_available_bps"),
        "e2e_error": e.get("error"),
        "e2e_band_holds_truth": e.get("band_holds_truth"),
        "e2e_agreement": e.get("agreement"),
        "e2e_failed": e.get("failed"),
        # The estimate's own evidence that the hosts set its limit.
        "e2e_host_limited": e.get("host_limited"),
    }


def key(c):
    return (c["routers"], c["tight_at"], c["narrow_at"], c["load"], c["queue"])


def run(args):
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                           capture_output=True, text=True).stdout.strip()
    only = [int(i) for i in args.only.split(",")] if args.only else range(len(CHAINS))
    cells = []
    if args.merge and os.path.exists(args.out):
        with open(args.out) as f:
            cells = json.load(f)["cells"]
    for i in only:
        chain = CHAINS[i]
        cmd = command(args.binary, chain, args.runs)
        rep, load_before, load_after = run_lab_json("hops_queue_e2e", cmd)
        # A lab run whose every run failed prints only the JSON error object
        # (exit 9): keep its words, so the table's empty row says why.
        failed = [rep["error"]] if "error" in rep else []
        routers, tight, narrow, load, queue = chain
        cell = {"routers": routers, "tight_at": tight, "narrow_at": narrow, "load": load,
                "queue": queue, "command": " ".join(cmd[1:]), "commit": commit,
                "runs": [slim(r) for r in rep.get("runs", [])], "notes": failed + rep.get("notes", []),
                "loadavg_before": load_before, "loadavg_after": load_after}
        cells = [c for c in cells if key(c) != key(cell)] + [cell]
        st = stats(cell)
        print(f"{' '.join(cmd[3:])}: short queue {st['named']}/{st['got']}, "
              f"MBS {fmt(st['passed'], '.1f')}-{fmt(st['lost'], '.1f')} kB beside {fmt(st['holds'], '.1f')}; "
              f"end to end {st['e2e']}/{st['got']}, |error| {fmt_pct(st['e2e_err'])}, consistent {st['consistent']}",
              file=sys.stderr, flush=True)
    cells.sort(key=lambda c: next((i for i, ch in enumerate(CHAINS) if key(c) == (ch[0], ch[1], ch[2], ch[3], ch[4])),
                                  len(CHAINS)))
    with open(args.out, "w") as f:
        json.dump({"runs_per_chain": args.runs, "cells": cells}, f, indent=1)
        f.write("\n")


def stats(c):
    rs = c["runs"]
    kb = lambda xs: quantile([x / 1000 for x in xs if x is not None], 0.5)
    return {
        "got": len(rs),
        "named": sum(1 for r in rs if r["short_named"]),
        "tight": sum(1 for r in rs if r["tight_named"]),
        "passed": kb([r["mbs_passed"] for r in rs]),
        "lost": kb([r["mbs_lost"] for r in rs]),
        "holds": kb([r["truth_bytes"] for r in rs]),
        "burst_kb": kb([r["burst_bytes"] for r in rs]),
        "s": quantile([r["elapsed_s"] for r in rs], 0.5),
        "e2e": sum(1 for r in rs if r["e2e_available_bps"] is not None),
        "e2e_err": quantile([abs(r["e2e_error"]) for r in rs if r["e2e_error"] is not None], 0.5),
        "e2e_cover": sum(1 for r in rs if r["e2e_band_holds_truth"]),
        "consistent": sum(1 for r in rs if r["e2e_agreement"] == "consistent"),
    }


def prose(data):
    """The sentence that sums the table up, from the same data."""
    runs = [r for c in data["cells"] for r in c["runs"]]
    named = sum(1 for r in runs if r["short_named"])
    inside = sum(1 for r in runs if r["mbs_passed"] is not None and r["mbs_lost"] is not None
                 and r["truth_bytes"] is not None
                 and 0.8 * r["truth_bytes"] <= r["mbs_lost"] and r["mbs_passed"] <= 1.25 * r["truth_bytes"])
    times = [r["elapsed_s"] for r in runs]
    measured = [r for r in runs if r["e2e_available_bps"] is not None]
    consistent = sum(1 for r in runs if r["e2e_agreement"] == "consistent")
    other = sorted({r["e2e_agreement"] for r in measured if r["e2e_agreement"] != "consistent"})
    return (f"In words: the short queue's hop was named in {named} of {len(runs)} runs; the MBS bracket "
            f"lay within 0.8–1.25 times what the short queue holds (lost at least 0.8, passed at most "
            f"1.25) in {inside} of {len(runs)}; the longest `hops --queue` run took "
            f"{fmt(max(times, default=None), '.1f')} s (the end-to-end measurement not counted). End to "
            f"end, the default method measured {len(measured)} of {len(runs)} runs with a median |error| "
            f"of {fmt_pct(quantile([abs(r['e2e_error']) for r in measured], 0.5))}, and `hops` called it "
            f"consistent with the tight link named in {consistent}"
            + (f" (the others: {', '.join(other)})" if other else "") + "."
            + far_off(data) + empty(data))


def far_off(data):
    """The end-to-end readings `hops` did not call consistent, each with its
    error and whether the estimate said the host set its limit."""
    rs = [r for c in data["cells"] for r in c["runs"]
          if r["e2e_available_bps"] is not None and r["e2e_agreement"] != "consistent"]
    if not rs:
        return ""
    def one(r):
        host = r.get("e2e_host_limited")
        said = ("host-limited by its own evidence" if host else
                "not marked host-limited" if "e2e_host_limited" in r else "host evidence not kept")
        return f"{fmt_pct(r['e2e_error'], '+.0f')} ({r['e2e_agreement']}; {said})"
    return " The readings not called consistent: " + ", ".join(one(r) for r in rs) + "."


def empty(data):
    """Chains where no run gave a result, with the lab's own words when kept."""
    out = []
    for c in data["cells"]:
        if not c["runs"]:
            why = "; ".join(c["notes"]) or "no reason kept: this row ran before the script kept the error"
            out.append(f"with the short queue on link {c['tight_at']} no run gave a result ({why})")
    return (" " + "; ".join(out).capitalize() + ".") if out else ""


def block(data):
    if data is None:
        return ("\n_Generated by `python3 scripts/hops_queue_e2e.py write`: **not yet measured**. "
                f"`{DATA}` does not exist yet, so there is no figure here._\n")
    commits = ", ".join(dict.fromkeys(c["commit"] for c in data["cells"]))
    lines = [
        "",
        f"_Generated by `python3 scripts/hops_queue_e2e.py write` from `{DATA}` (commit {commits}, "
        f"{data['runs_per_chain']} runs per chain, blind, default ICMP limits); do not edit by hand._",
        "",
        "| links | tight (short queue) at | narrow at | load | tight link's queue | runs | short queue named "
        "| median MBS bracket kB (passed – lost) | what it holds kB | tight link named | median burst KB "
        "| median time s | end to end measured | its median \\|error\\| | band held A | consistent | commit |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in data["cells"]:
        st = stats(c)
        narrow = "–" if c["narrow_at"] is None else f"{c['narrow_at']} (60mbit)"
        lines.append(
            f"| {c['routers'] + 1} | {c['tight_at']} | {narrow} | {c['load']} % | {c['queue']} | {st['got']} | "
            f"{st['named']}/{st['got']} | {fmt(st['passed'], '.1f')} – {fmt(st['lost'], '.1f')} | "
            f"{fmt(st['holds'], '.1f')} | {st['tight']}/{st['got']} | {fmt(st['burst_kb'], '.0f')} | "
            f"{fmt(st['s'], '.1f')} | {st['e2e']}/{st['got']} | {fmt_pct(st['e2e_err'])} | "
            f"{st['e2e_cover']}/{st['got']} | {st['consistent']}/{st['got']} | {c['commit']} |"
        )
    lines += ["", prose(data), ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("binary")
    r.add_argument("--runs", type=int, default=8)
    r.add_argument("--only", help="comma-separated chain indices (0-based) to run")
    r.add_argument("--out", required=True)
    r.add_argument("--commit", help="the commit BINARY was built from (default: this checkout's HEAD)")
    r.add_argument("--merge", action="store_true", help="keep OUT's other chains; the ones run replace theirs")
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
    check = args.cmd == "check"
    if docblocks.apply([(DOC, BLOCK, block(data))], check=check) and check:
        sys.exit(1)


if __name__ == "__main__":
    main()
