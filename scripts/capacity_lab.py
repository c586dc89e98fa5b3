#!/usr/bin/env python3
"""Lab figures for `pathsonde capacity` (issue 19; docs/capacity.md, "Lab figures").

    sudo scripts/capacity_lab.py run  [--bin PATH] [--runs 3] [--caps 100,300] [--loads 0,30,60]
    scripts/capacity_lab.py table [docs/compare/data/capacity-<commit>.json] [--write]

`run` measures, for each tight-link rate and Poisson load, RFC 9097's maximum
IP-layer capacity with
  - pathsonde: `pathsonde lab run --method capacity -t 10s --algorithm b|c`
    (one lab per algorithm, --runs tests each; the lab scores each test);
  - the reference client, OB-UDPST's `udpst -u -t 10 -f json [-A C]`, run with
    `ip netns exec` in the sender namespace of a `pathsonde lab up` path
    against pathsonde's UDPST server in the receiver namespace (198.18.2.2:24601);
    its truth is computed here from the standing lab's truth file, over its
    sub-intervals' times (wall clock mapped onto CLOCK_MONOTONIC), with the
    IP share of L2 of its own datagrams (its AtMax MaxIPLayerCapacity over
    MaxETHCapacityNoFCS, the Ethernet rate tbf counts).
Every cell holds the lab lock (/tmp/pathsonde-lab.lock), and `uptime` is
recorded before and after.  The raw results go to
docs/compare/data/capacity-<commit>.json.

`table` prints the markdown tables of docs/capacity.md's "Lab figures" from that
file; with --write it replaces the tables between the markers there.

    sudo scripts/capacity_lab.py heldout [--bin PATH] [--runs 3]
    scripts/capacity_lab.py table docs/compare/data/capacity-heldout-<commit>.json [--write]

    scripts/capacity_lab.py check        # exit 1 naming any block that differs from its data
    scripts/capacity_lab.py write-all    # rewrite every block from PUBLISHED below

`check` and `write-all` cover the three tables and the sentence on the fit's
slope t (`<!-- capacity-prose:slope-t:begin -->`), from the stored data.

`heldout` measures pathsonde alone on paths the zero-loss fit was not chosen
on (docs/capacity.md, "The zero-loss fit"): other rates, loads, queue sizes,
delays and cross-traffic kinds.  Its table goes between the heldout markers.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lablock import LabLock  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UDPST = os.path.join(ROOT, "..", "shared", "peers", "obudpst", "udpst")
BEGIN = "<!-- capacity-lab-table:begin -->"
END = "<!-- capacity-lab-table:end -->"
HELDOUT_BEGIN = "<!-- capacity-heldout-table:begin -->"
HELDOUT_END = "<!-- capacity-heldout-table:end -->"

# name, lab flags: paths unlike the 100/300 Mb/s Poisson grid
HELDOUT = [
    ("h200p30b", ["--capacity", "200mbit", "--cross", "poisson:30%", "--algorithm", "b"]),
    ("h200p30c", ["--capacity", "200mbit", "--cross", "poisson:30%", "--algorithm", "c"]),
    ("h150m40c", ["--capacity", "150mbit", "--cross", "mix:40%", "--algorithm", "c"]),
    ("h300p45q1c", ["--capacity", "300mbit", "--cross", "poisson:45%", "--queue", "1MiB", "--algorithm", "c"]),
    ("h100p50d20c", ["--capacity", "100mbit", "--cross", "poisson:50%", "--delay", "20ms", "--algorithm", "c"]),
    ("h200cbr50c", ["--capacity", "200mbit", "--cross", "cbr:100M", "--algorithm", "c"]),
    ("h200tcp2c", ["--capacity", "200mbit", "--cross", "tcp:2", "--algorithm", "c"]),
]
# A second set, measured after the band was widened on the first (another seed too).
HELDOUT2 = [
    ("k250p40c", ["--capacity", "250mbit", "--cross", "poisson:40%", "--algorithm", "c", "--seed", "7"]),
    ("k120m30c", ["--capacity", "120mbit", "--cross", "mix:30%", "--algorithm", "c", "--seed", "7"]),
    ("k400p50c", ["--capacity", "400mbit", "--cross", "poisson:50%", "--algorithm", "c", "--seed", "7"]),
    ("k200p60d5c", ["--capacity", "200mbit", "--cross", "poisson:60%", "--delay", "5ms", "--algorithm", "c", "--seed", "7"]),
    ("k200cbr40c", ["--capacity", "200mbit", "--cross", "cbr:80M", "--algorithm", "c", "--seed", "7"]),
]
HELDOUT_SETS = {1: HELDOUT, 2: HELDOUT2}


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def pathsonde_cell(bin_, cap, load, algo, runs, duration):
    name = f"c{cap}l{load}{algo}"
    cmd = [bin_, "lab", "run", "--method", "capacity", "--capacity", f"{cap}mbit",
           "--runs", str(runs), "-t", f"{duration}s", "--algorithm", algo,
           "--settle", "2", "--json", "--no-save", "--name", name]
    if load:
        cmd[3:3] = []
        cmd += ["--cross", f"poisson:{load}%"]
    p = sh(cmd)
    if p.returncode != 0:
        return {"command": " ".join(cmd[1:]), "error": p.stderr.strip()}
    rep = json.loads(p.stdout)
    rep.pop("qdisc_series", None)  # 100 ms counters: large, and the runs carry their own figures
    rep["command"] = "pathsonde " + " ".join(cmd[1:])
    return rep


def parse_wall(ts):
    # "2026-11-26T04:29:40.996636Z"
    dt = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
    epoch = datetime(1970, 1, 1)
    return int((dt - epoch).total_seconds() * 1e9)


REF_PORT = 24602  # the reference server in rcv (pathsonde's holds 24601 there)


def udpst_test(snd, server, algo, duration, port=None):
    """One reference-client test; a setup refused for want of a free
    connection (ErrorStatus 113: the server still holds the last test) is
    tried again, 0.5 s apart, up to 10 times."""
    cmd = ["ip", "netns", "exec", snd, UDPST, "-u", "-t", str(duration), "-f", "json"]
    if algo == "C":
        cmd += ["-A", "C"]
    cmd.append(server if port is None else f"{server}:{port}")
    for attempt in range(11):
        wall0, mono0 = time.time_ns(), time.monotonic_ns()
        p = sh(cmd)
        mono1 = time.monotonic_ns()
        test = {"algorithm": algo, "command": " ".join(cmd[4:]), "wall0_ns": wall0,
                "mono0_ns": mono0, "mono1_ns": mono1, "exit": p.returncode, "retries": attempt}
        try:
            test["json"] = json.loads(p.stdout)
        except ValueError:
            test["stdout"] = p.stdout[-2000:]
            test["stderr"] = p.stderr[-2000:]
        if p.returncode != 113:
            return test
        time.sleep(0.5)
    return test


def reference_cell(bin_, cap, load, runs, duration):
    name = f"r{cap}l{load}"
    up = [bin_, "lab", "up", "--name", name, "--capacity", f"{cap}mbit", "--json"]
    if load:
        up += ["--cross", f"poisson:{load}%"]
    p = sh(up)
    if p.returncode != 0:
        return {"command": " ".join(up[1:]), "error": p.stderr.strip()}
    info = json.loads(p.stdout)
    snd = info["namespaces"][0]["namespace"]
    server = info["udpst_server"].split(":")[0]
    out = {"lab_up": "pathsonde " + " ".join(up[1:]), "udpst_server": info["udpst_server"], "tests": []}
    try:
        time.sleep(3.0)  # cross traffic settles; this stretch is the drops baseline
        base = (time.monotonic_ns() - 2_500_000_000, time.monotonic_ns())
        rcv = [n["namespace"] for n in info["namespaces"] if n["role"] == "rcv"][0]
        # the reference server beside pathsonde's, for the reference's own search
        refsrv = subprocess.Popen(["ip", "netns", "exec", rcv, UDPST, "-p", str(REF_PORT)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            for target, port in [("pathsonde-server", None), ("reference-server", REF_PORT)]:
                for algo in ["B", "C"]:
                    for i in range(runs):
                        test = udpst_test(snd, server, algo, duration, port)
                        test["run"], test["server"] = i, target
                        if not os.path.exists(f"/var/run/netns/{snd}"):
                            test["lab_gone"] = True
                        out["tests"].append(test)
                        time.sleep(0.5)
        finally:
            refsrv.terminate()
            refsrv.wait()
        time.sleep(0.5)
        with open(info["truth_file"]) as f:
            out["truth_lines"] = [json.loads(l) for l in f if l.strip()]
        out["baseline"] = base
    finally:
        sh([bin_, "lab", "down", name])
    return out


def uptime():
    return sh(["uptime"]).stdout.strip()


def run(args):
    commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    data = {"commit": commit, "dirty": bool(dirty), "binary": args.bin,
            "uptime_before": uptime(), "cells": []}
    print(data["uptime_before"], file=sys.stderr)
    for cap in [int(c) for c in args.caps.split(",")]:
        for load in [int(l) for l in args.loads.split(",")]:
            cell = {"capacity_mbps": cap, "load_percent": load, "uptime_before": uptime()}
            for algo in ["b", "c"]:
                with LabLock():
                    cell[f"pathsonde_{algo}"] = pathsonde_cell(args.bin, cap, load, algo, args.runs, args.duration)
                print(f"{cap} Mb/s {load} %: pathsonde {algo} done", file=sys.stderr)
            with LabLock():
                cell["reference"] = reference_cell(args.bin, cap, load, args.runs, args.duration)
            print(f"{cap} Mb/s {load} %: reference done", file=sys.stderr)
            cell["uptime_after"] = uptime()
            data["cells"].append(cell)
    data["uptime_after"] = uptime()
    print(data["uptime_after"], file=sys.stderr)
    path = args.out or os.path.join(ROOT, "docs", "compare", "data", f"capacity-{commit}.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    print(f"wrote {path}", file=sys.stderr)


def heldout(args):
    commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).stdout.strip()
    dirty = sh(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    data = {"commit": commit, "dirty": bool(dirty), "binary": args.bin,
            "uptime_before": uptime(), "set": args.set, "heldout": []}
    for name, flags in HELDOUT_SETS[args.set]:
        cmd = [args.bin, "lab", "run", "--method", "capacity", "--runs", str(args.runs),
               "-t", f"{args.duration}s", "--settle", "2", "--json", "--no-save", "--name", name] + flags
        with LabLock():
            p = sh(cmd)
        cell = {"name": name, "command": "pathsonde " + " ".join(cmd[1:]), "uptime": uptime()}
        if p.returncode != 0:
            cell["error"] = p.stderr.strip()[-2000:]
        else:
            rep_ = json.loads(p.stdout)
            rep_.pop("qdisc_series", None)
            cell["report"] = rep_
        data["heldout"].append(cell)
        print(f"{name}: {'error' if 'error' in cell else 'done'}", file=sys.stderr)
    data["uptime_after"] = uptime()
    stem = "heldout" if args.set == 1 else f"heldout{args.set}"
    path = args.out or os.path.join(ROOT, "docs", "compare", "data", f"capacity-{stem}-{commit}.json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    print(f"wrote {path}", file=sys.stderr)


# ---------------------------------------------------------------- table

def zero_loss_cells(runs):
    """Per test: the zero-loss reading's error and band verdict, or why there is none."""
    out = []
    for r in runs:
        z = r.get("zero_loss") or {}
        if r.get("zero_loss_error") is not None:
            out.append(f"{r['zero_loss_error'] * 100:+.1f} %{'' if r.get('zero_loss_in_band') else ' (band missed)'}")
        else:
            out.append({"no_loss": "no loss", "too_few_windows": "few windows",
                        "rate_independent": "flat"}.get(z.get("reason"), "–"))
    return ", ".join(out) or "–"


def zero_loss_summary(runs):
    """Median |error|, band held (n/N) and the band's half-width (median / p90,
    relative to the reading) of the tests with a zero-loss reading."""
    errs = [abs(r["zero_loss_error"]) for r in runs if r.get("zero_loss_error") is not None]
    held = [r["zero_loss_in_band"] for r in runs if r.get("zero_loss_in_band") is not None]
    if not errs:
        return "–", "–", "–"
    half = sorted((z["high_bps"] - z["low_bps"]) / 2 / z["available_ip_layer_capacity_bps"]
                  for z in (r["zero_loss"] for r in runs if r.get("zero_loss_error") is not None))
    return (f"{statistics.median(errs) * 100:.1f} %",
            f"{sum(held)}/{len(held)}",
            f"±{quantile(half, 0.5) * 100:.1f} / {quantile(half, 0.9) * 100:.1f} %")


def quantile(xs, q):
    """The q-quantile of sorted xs with linear interpolation (as compare_tables.py)."""
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def widened_held(runs):
    """How many of `runs` (measured with the old ± 2 SE, >= 1 % band) the
    current ± 3 SE, >= 2 % band holds: SE recovered from the stored band."""
    n = held = 0
    for r in runs:
        z = r.get("zero_loss") or {}
        if z.get("status") != "fitted":
            continue
        a = z["available_ip_layer_capacity_bps"]
        half = max(3 * (z["high_bps"] - a) / 2, 0.02 * a)
        n += 1
        held += a - half <= r["truth_bps"] <= a + half
    return f"{held}/{n}"


def heldout_table(data):
    t = ["| path | type | truth (Mb/s) | maximum error (per test) | zero-loss error (per test) | zero-loss \\|error\\| median | band held | band half-width (of the reading), median / p90 | drops caused (median) |",
         "|---|---|---|---|---|---|---|---|---|"]
    for cell in data["heldout"]:
        rep_ = cell.get("report")
        if not rep_:
            t.append(f"| {cell['name']} | – | – | error: {cell.get('error', '?')[:80]} | | | | | |")
            continue
        runs = rep_["runs"]
        lab = rep_["lab"]
        path = f"{lab['capacity'] / 1e6:.0f} Mb/s, {' + '.join(rep_['cross']) or 'idle'}"
        if lab.get("queue") and lab["queue"] != 262144:
            path += f", queue {lab['queue'] // 1024} KiB"
        if lab.get("delay"):
            path += f", delay {lab['delay'] / 1e6:.0f} ms"
        med_err, held, half = zero_loss_summary(runs)
        if data.get("set", 1) == 1 and held != "–":
            held += f" / {widened_held(runs)}"
        drops = [r["drops_caused"] for r in runs if r.get("drops_caused") is not None]
        t.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            path, rep_["test"]["algorithm"].upper(),
            mb(statistics.mean(r["truth_bps"] for r in runs)),
            ", ".join(pct(r["error"]) for r in runs),
            zero_loss_cells(runs), med_err, held, half,
            f"{statistics.median(drops):.0f}" if drops else "–"))
    return "\n".join(t) + "\n"

def reference_results(cell, share_by_algo):
    """Each reference test with its truth (same definition as the lab's)."""
    ref = cell.get("reference", {})
    lines = ref.get("truth_lines", [])
    cap_l2 = cell["capacity_mbps"] * 1e6
    base = ref.get("baseline")

    def drops_at(t):
        # the last line at or before t
        d = None
        for l in lines:
            if l["monotonic_ns"] <= t:
                d = l["qdisc_drops"]
        return d

    def first_after(t):
        for l in lines:
            if l["monotonic_ns"] >= t:
                return l["qdisc_drops"], l["monotonic_ns"]
        return None, None

    base_rate = 0.0
    if base:
        a = [l for l in lines if base[0] <= l["monotonic_ns"] <= base[1]]
        if len(a) >= 2:
            base_rate = (a[-1]["qdisc_drops"] - a[0]["qdisc_drops"]) / ((a[-1]["monotonic_ns"] - a[0]["monotonic_ns"]) * 1e-9)
    out = []
    for t in ref.get("tests", []):
        j = t.get("json")
        if not j or j.get("ErrorStatus") not in (0, None):
            out.append({"algorithm": t["algorithm"].lower(), "server": t.get("server", "pathsonde-server"),
                        "error": (j or {}).get("ErrorStatus", t.get("stderr"))})
            continue
        subs = j["Output"]["IncrementalResult"]
        rates = [s["IPLayerCapacity"] * 1e6 for s in subs]
        offset = t["mono0_ns"] - t["wall0_ns"]
        ends = [parse_wall(s["TimeOfSubInterval"]) + offset for s in subs]
        w0, w1 = ends[0] - 1_000_000_000, ends[-1]
        inside = [l for l in lines if w0 < l["monotonic_ns"] <= w1]
        cross = statistics.mean(l["cross_l2_bps"] for l in inside) if inside else 0.0
        at_max = j["Output"].get("AtMax", {})
        if at_max.get("MaxIPLayerCapacity") and at_max.get("MaxETHCapacityNoFCS"):
            # its own datagram mix: IP over Ethernet-without-FCS at its maximum
            share = at_max["MaxIPLayerCapacity"] / at_max["MaxETHCapacityNoFCS"]
        else:
            share = share_by_algo.get(t["algorithm"].lower(), 1250 / 1264)
        truth = (cap_l2 - cross) * share
        imax = max(range(len(rates)), key=lambda i: rates[i])
        at = [l for l in lines if ends[imax] - 1_000_000_000 < l["monotonic_ns"] <= ends[imax]]
        truth_at_max = (cap_l2 - (statistics.mean(l["cross_l2_bps"] for l in at) if at else cross)) * share
        # cross traffic the link carried: the qdisc's L2 bytes over the
        # window less this test's delivered load at L2
        carried = None
        if len(inside) >= 2:
            a, b = inside[0], inside[-1]
            span = (b["monotonic_ns"] - a["monotonic_ns"]) * 1e-9
            carried = max(0.0, (b["qdisc_bytes"] - a["qdisc_bytes"]) * 8 / span - statistics.mean(rates) / share)
        d0 = drops_at(w0)
        d1, t1 = first_after(w1 + 250_000_000)
        drops = None
        if d0 is not None and d1 is not None:
            drops = max(0.0, (d1 - d0) - base_rate * (t1 - w0) * 1e-9)
        out.append({
            "algorithm": t["algorithm"].lower(), "server": t.get("server", "pathsonde-server"), "max": max(rates), "mean": statistics.mean(rates),
            "median": statistics.median(rates), "truth": truth, "truth_at_max": truth_at_max,
            "subs": rates, "max_at_s": imax + 1, "drops": drops,
            "cross_offered_l2": cross, "cross_carried_l2": carried,
            "offered_at_max": rates[imax] / (subs[imax]["DeliveredPercent"] / 100) if subs[imax]["DeliveredPercent"] else None,
            "reported_max": (at_max.get("MaxIPLayerCapacity") or 0) * 1e6 or None, "share": share,
        })
    return out


def pct(x):
    return "–" if x is None else f"{x * 100:+.1f} %"


def mb(x):
    return "–" if x is None else f"{x / 1e6:.1f}"


def reach_s(subs, frac=0.98):
    """The first sub-interval (its end, in seconds of load) at ≥ frac of the test's maximum."""
    m = max(subs)
    for i, r in enumerate(subs):
        if r >= frac * m:
            return i + 1
    return None


def table(path):
    with open(path) as f:
        data = json.load(f)
    med = lambda xs: statistics.median(xs) if xs else None
    t1 = ["| tight link | Poisson load | type | truth (Mb/s) | P→P max (Mb/s, per test) | P→P error (median) | R→P max | R→P error | R→R max | R→R error | P→P − R→P (means) | P→P − R→R (means) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    t2 = ["| tight link | Poisson load | type | median sub-interval error (P→P; R→P; R→R) | max error vs truth over its own second (P→P; R→P; R→R) | ≥ 98 % of max after s (P→P; R→P; R→R) | drops caused (P→P; R→P; R→R) | cross offered → carried, L2 Mb/s (P→P; R→P; R→R) | load offered in the max's second, Mb/s (P→P; R→P; R→R) |",
          "|---|---|---|---|---|---|---|---|---|"]
    t0 = ["| tight link | Poisson load | type | truth (Mb/s) | maximum error (median) | zero-loss error (per test) | zero-loss \\|error\\| median | band held | band half-width (of the reading), median / p90 |",
          "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for cell in data["cells"]:
        shares = {}
        for a in ["b", "c"]:
            rep = cell.get(f"pathsonde_{a}", {})
            s_ = [r["ip_share"] for r in rep.get("runs", [])]
            if s_:
                shares[a] = statistics.median(s_)
        refs = reference_results(cell, shares)
        link = f"{cell['capacity_mbps']} Mb/s"
        load = f"{cell['load_percent']} %" if cell["load_percent"] else "idle"
        for a in ["b", "c"]:
            rep = cell.get(f"pathsonde_{a}", {})
            runs = rep.get("runs", [])
            rp = [r for r in refs if r.get("algorithm") == a and r.get("server") == "pathsonde-server" and "max" in r]
            rr = [r for r in refs if r.get("algorithm") == a and r.get("server") == "reference-server" and "max" in r]
            truth_all = [r["truth_bps"] for r in runs] + [r["truth"] for r in rp + rr]
            p_max = [r["max_ip_layer_capacity_bps"] for r in runs]
            err = lambda xs, key: med([(x[key] - x["truth"]) / x["truth"] for x in xs])
            diff = lambda xs: (statistics.mean(p_max) / statistics.mean([x["max"] for x in xs]) - 1) if p_max and xs else None
            med_err, held, half = zero_loss_summary(runs)
            t0.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                link, load, a.upper(), mb(statistics.mean(r["truth_bps"] for r in runs)) if runs else "–",
                pct(med([r["error"] for r in runs])), zero_loss_cells(runs), med_err, held, half))
            t1.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                link, load, a.upper(), mb(statistics.mean(truth_all)) if truth_all else "–",
                ", ".join(mb(x) for x in p_max) or "–", pct(med([r["error"] for r in runs])),
                ", ".join(mb(x["max"]) for x in rp) or "–", pct(err(rp, "max")),
                ", ".join(mb(x["max"]) for x in rr) or "–", pct(err(rr, "max")),
                pct(diff(rp)), pct(diff(rr))))
            three = lambda p, f: " ; ".join([p] + [f(xs) for xs in (rp, rr)])
            reach = lambda xs: ",".join(str(reach_s(x["subs"])) for x in xs) or "–"
            fmt0 = lambda v: "–" if v is None else f"{v:.0f}"
            t2.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                link, load, a.upper(),
                three(pct(med([r["median_error"] for r in runs])), lambda xs: pct(err(xs, "median"))),
                three(pct(med([r["error_at_max"] for r in runs])),
                      lambda xs: pct(med([(x["max"] - x["truth_at_max"]) / x["truth_at_max"] for x in xs]))),
                three(",".join(str(reach_s(r["sub_interval_bps"])) for r in runs) or "–", reach),
                three(fmt0(med([r["drops_caused"] for r in runs if r.get("drops_caused") is not None])),
                      lambda xs: fmt0(med([x["drops"] for x in xs if x["drops"] is not None]))),
                three(f"{mb(med([r['truth_cross_traffic_l2_bps'] for r in runs]))} → {mb(med([r['cross_delivered_l2_bps'] for r in runs if r.get('cross_delivered_l2_bps') is not None]))}",
                      lambda xs: f"{mb(med([x['cross_offered_l2'] for x in xs]))} → {mb(med([x['cross_carried_l2'] for x in xs if x['cross_carried_l2'] is not None]))}"),
                three(mb(med([r["offered_at_max_bps"] for r in runs])),
                      lambda xs: mb(med([x["offered_at_max"] for x in xs if x["offered_at_max"]]))),
            ))
        for k in ["pathsonde_b", "pathsonde_c"]:
            v = cell.get(k, {})
            if "error" in v:
                notes.append(f"{link} {load} {k}: {v['error']}")
            for n in v.get("notes", []):
                notes.append(f"{link} {load} {k}: {n}")
            for r in v.get("runs", []):
                for n in r.get("notes", []):
                    notes.append(f"{link} {load} {k} run {r['run']}: {n}")
        for r in refs:
            if "error" in r:
                notes.append(f"{link} {load} reference client → {r['server']} type {r['algorithm'].upper()}: ErrorStatus / error {r['error']}")
    text = "\n".join(t1) + "\n\n" + "\n".join(t2) + "\n"
    if any("zero_loss" in r for c in data["cells"] for a in "bc" for r in c.get(f"pathsonde_{a}", {}).get("runs", [])):
        text = "\n".join(t0) + "\n\n" + text
    if notes:
        text += "\n" + "\n".join(f"- {x}" for x in notes) + "\n"
    return data, text


# The stored runs docs/capacity.md publishes, and the trials the fit was chosen on.
DATA = os.path.join(ROOT, "docs", "compare", "data")
PUBLISHED = ["capacity-ef5e7d3.json", "capacity-heldout-ef5e7d3.json", "capacity-heldout2-d0568b0.json"]


def slope_sentence(grid_path):
    """The zero-loss fit's slope t by type, on the trials it was chosen on and on the grid."""
    import math
    import zero_loss_fit
    chosen = zero_loss_fit.slope_ts()
    cb = [t for a, load, t in chosen if a == "b" and t is not None]
    cc = [t for a, load, t in chosen if a == "c" and load and t is not None]
    with open(grid_path) as f:
        grid = json.load(f)
    gb, gc = [], []
    for cell in grid["cells"]:
        for a, into in (("b", gb), ("c", gc)):
            if a == "c" and not cell["load_percent"]:
                continue
            for r in cell.get(f"pathsonde_{a}", {}).get("runs", []):
                into.append((r["zero_loss"]["slope_t"], r.get("zero_loss_error") is not None))
    b_high = [read for t, read in gb if t >= 3]
    c_low = [read for t, read in gc if t < 3]
    said = lambda reads, what: f"{len(reads)} of them {what}" if reads else ""
    return (f"on the trials the fit was chosen on (6bddc70, `scripts/zero_loss_fit.py`), t ≤ "
            f"{math.ceil(max(cb) * 10) / 10:.1f} in all {len(cb)} Type B tests and t ≥ "
            f"{math.floor(min(cc) * 10) / 10:.1f} in all {len(cc)} loaded Type C tests; on the grid below "
            f"(`{os.path.basename(grid_path)}`) the two overlap: Type B's t runs from "
            f"{min(t for t, _ in gb):.2f} to {max(t for t, _ in gb):.2f} over its {len(gb)} tests "
            f"({len(b_high)} at 3 or more, {sum(b_high)} of them with a reading), loaded Type C's from "
            f"{min(t for t, _ in gc):.2f} to {max(t for t, _ in gc):.2f} over its {len(gc)} "
            f"({len(c_low)} below 3, {sum(c_low)} of them with a reading)")


def blocks():
    """(file, block, text) for every generated block of docs/capacity.md."""
    out = []
    for name in PUBLISHED:
        path = os.path.join(DATA, name)
        with open(path) as f:
            data = json.load(f)
        if "heldout" in data:
            n = data.get("set", 1)
            block = "capacity-heldout-table" if n == 1 else f"capacity-heldout{n}-table"
            text = heldout_table(data)
        else:
            block, text = "capacity-lab-table", table(path)[1]
        out.append(("docs/capacity.md", block, "\n" + text))
    out.append(("docs/capacity.md", "capacity-prose:slope-t", slope_sentence(os.path.join(DATA, PUBLISHED[0]))))
    return out


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "pathsonde"))
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--duration", type=int, default=10)
    r.add_argument("--caps", default="100,300")
    r.add_argument("--loads", default="0,30,60")
    r.add_argument("--out")
    h = sub.add_parser("heldout")
    h.add_argument("--bin", default=r.get_default("bin"))
    h.add_argument("--runs", type=int, default=3)
    h.add_argument("--duration", type=int, default=10)
    h.add_argument("--out")
    h.add_argument("--set", type=int, choices=sorted(HELDOUT_SETS), default=1)
    t = sub.add_parser("table")
    t.add_argument("path", nargs="?")
    t.add_argument("--write", action="store_true")
    sub.add_parser("check", help="exit 1 if a generated block of docs/capacity.md differs from the stored data")
    sub.add_parser("write-all", help="rewrite every generated block of docs/capacity.md from the stored data")
    args = ap.parse_args()
    if args.cmd in ("check", "write-all"):
        import docblocks
        stale = docblocks.apply(blocks(), check=args.cmd == "check")
        if args.cmd == "check":
            print(f"capacity_lab: {stale} generated block(s) differ from the stored data" if stale
                  else "capacity_lab: every generated block matches the stored data")
            sys.exit(1 if stale else 0)
        return
    if args.cmd == "run":
        run(args)
        return
    if args.cmd == "heldout":
        heldout(args)
        return
    path = args.path
    if not path:
        d = os.path.join(ROOT, "docs", "compare", "data")
        files = sorted((os.path.join(d, f) for f in os.listdir(d) if f.startswith("capacity-") and not f.startswith("capacity-heldout-")), key=os.path.getmtime)
        path = files[-1]
    with open(path) as f:
        head = json.load(f)
        if "heldout" in head:
            n = head.get("set", 1)
            begin = HELDOUT_BEGIN if n == 1 else HELDOUT_BEGIN.replace("heldout", f"heldout{n}")
            end = HELDOUT_END if n == 1 else HELDOUT_END.replace("heldout", f"heldout{n}")
            with open(path) as g:
                text = heldout_table(json.load(g))
        else:
            begin, end = BEGIN, END
            _, text = table(path)
    if not args.write:
        print(text, end="")
        return
    doc = os.path.join(ROOT, "docs", "capacity.md")
    s = open(doc).read()
    a, b = s.index(begin) + len(begin), s.index(end)
    s = s[:a] + "\n" + text + s[b:]
    open(doc, "w").write(s)
    print(f"wrote the table into {doc} from {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
