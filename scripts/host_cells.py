#!/usr/bin/env python3
"""Issue 26's figures from their stored data (docs/compare/data/host-26/):
the lab cells (`lab run --json`, files lab-CELL-COMMIT.json.gz), the
simulator's scenarios (`sim run --seeds 10 --json`, sim-SCENARIO-COMMIT),
ten demos (demo-N-COMMIT), the same lab cell with b0bbef3's sendmmsg cars
(base-lab-...), `host --json` (host-COMMIT) and `lab run --method capacity`
(capacity-...).  Writes the markdown tables and the paragraphs that sum
them up into docs/methods/fac2.md's block `host-cells` (or checks it, as CI
does through scripts/check_docs.py), or prints them.

A cell or scenario measured at several commits has a row per commit
(COMMITS gives their order, oldest first); the sentences sum up each
commit's rows on their own, so figures from two machines' days are never
pooled.

    scripts/host_cells.py [print|check|write] [DIR]
"""
import gzip, io, json, os, statistics, sys
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docblocks  # noqa: E402

MODE = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] in ("print", "check", "write") else "print"
ARGS = sys.argv[2:] if len(sys.argv) > 1 and sys.argv[1] in ("print", "check", "write") else sys.argv[1:]
DIR = ARGS[0] if ARGS else os.path.join(
    os.path.dirname(__file__), "..", "docs", "compare", "data", "host-26")

# The commits the stored files were measured at, oldest first.
COMMITS = ["b0bbef3", "d530a67", "9904551", "680f8fb", "757ba56", "7a34ff6", "5fcbd7b", "a445fd6", "caba0a8", "fb0c35f", "abe62f0", "12d1bf5"]


def commit_of(name):
    return name[: -len(".json.gz")].rsplit("-", 1)[1]


def commit_order(c):
    return COMMITS.index(c) if c in COMMITS else len(COMMITS)


def order(name):
    return commit_order(commit_of(name))


def load(name):
    with gzip.open(os.path.join(DIR, name), "rt") as f:
        return json.load(f)


def files(prefix):
    return sorted(n for n in os.listdir(DIR) if n.startswith(prefix) and n.endswith(".json.gz"))


def q(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, max(0, int(round(p * len(xs) + 0.5)) - 1))]


def pct(x):
    return "-" if x is None else f"{x * 100:.1f} %"


def why_key(w):
    if "missed" in w:
        return "band missed"
    if "wider" in w:
        return "band > ±25 %"
    if w.startswith("capacity"):
        return "capacity > 20 % off"
    return "bound above truth"


def lab_cell(d):
    runs = d["runs"]
    s = d["summary"] or {}
    kind = lambda r: r["host_evidence"]["outcome"]["kind"]
    measured = [r for r in runs if kind(r) == "path"]
    errs = [abs(r["error"]) for r in measured]
    half = [(r["estimate_high_bps"] - r["estimate_low_bps"]) / 2 / r["estimate_bps"]
            for r in measured if r["estimate_high_bps"]]
    why, resources = {}, {}
    for r in runs:
        if r["honesty"] == "dishonest":
            k = why_key(r["honesty_why"])
            why[k] = why.get(k, 0) + 1
        for l in r["host_limits"]:
            if l["binds_result"]:
                resources[l["resource"]] = resources.get(l["resource"], 0) + 1
    sent = [r["host_evidence"]["figures"]["fastest_sent_bps"] / 1e6 for r in runs
            if r["host_evidence"]["figures"].get("fastest_sent_bps")]
    return {
        "runs": len(runs) + s.get("no_estimate", 0),
        "measured": len(measured),
        "bounds": sum(1 for r in runs if kind(r) == "lower_bound"),
        "above": sum(1 for r in runs if r["estimate_high_bps"] is None and r["estimate_bps"] > r["truth_bps"]),
        "none": s.get("no_estimate", 0),
        "dishonest": sum(1 for r in runs if r["honesty"] == "dishonest"),
        "why": why,
        "resources": resources,
        "conv_missed": sum(1 for r in runs if r["converged"] and not r["in_band"]),
        "med": statistics.median(errs) if errs else None,
        "p90": q(errs, 0.9),
        "half": statistics.median(half) if half else None,
        # The median |error| a perfect reader of the same probe windows
        # would have had (the lab's sampling floor), over measured runs.
        "floor": statistics.median(abs(r["sampling_error"]) for r in measured
                                   if r.get("sampling_error") is not None)
        if any(r.get("sampling_error") is not None for r in measured) else None,
        "sent": statistics.median(sent) if sent else None,
        # Runs whose cross-traffic source the lab's own host held more than
        # 1 ms off its schedule (None: not recorded at that commit), and the
        # perfect reader's signed error over every run: how much less cross
        # traffic the probes' windows held than the run's window.
        "recorded": len(runs),
        "starved": sum(1 for r in runs if (r.get("cross_generator_lag") or {}).get("late_packets", 0) > 0)
        if any("cross_generator_lag" in r for r in runs) else None,
        # FAC²'s |error| against what the probes' own windows held (its
        # error less the perfect reader's), over measured runs.
        "vs_reader": statistics.median(abs(r["error"] - r["sampling_error"]) for r in measured
                                       if r.get("sampling_error") is not None)
        if any(r.get("sampling_error") is not None for r in measured) else None,
        "floor_signed": statistics.median(r["sampling_error"] for r in runs if r.get("sampling_error") is not None)
        if any(r.get("sampling_error") is not None for r in runs) else None,
    }


def lab_table():
    rows = [(n[len("lab-"):].rsplit("-", 1)[0], commit_of(n), lab_cell(load(n))) for n in files("lab-")]
    rows.sort(key=lambda r: (r[0], commit_order(r[1])))
    print("| cell | commit | runs | measured | host-limited bounds (resource) | bounds above truth | no estimate | dishonest (why) | converged, truth outside band | measured \\|error\\| median / p90 | band half-width (median) | fastest train sent (median) | cross source > 1 ms late | perfect reader's signed error (median) | measured \\|error\\| against the probes' windows (median) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, commit, c in rows:
        res = ", ".join(f"{k} {v}" for k, v in c["resources"].items()) or "-"
        why = ", ".join(f"{k} {v}" for k, v in c["why"].items()) or "-"
        starved = "-" if c["starved"] is None else f"{c['starved']} of {c['recorded']}"
        signed = "-" if c["floor_signed"] is None else f"{c['floor_signed'] * 100:+.1f} %"
        print(f"| {n} | {commit} | {c['runs']} | {c['measured']} | {c['bounds']} ({res}) | {c['above']} | {c['none']} | {c['dishonest']} ({why}) | {c['conv_missed']} | {pct(c['med'])} / {pct(c['p90'])} | {pct(c['half'])} | {c['sent']:.0f} Mb/s | {starved} | {signed} | {pct(c['vs_reader'])} |")
    print()
    commits = sorted({r[1] for r in rows}, key=lambda c: commit_order(c))
    for commit in commits:
        mine = [(n, c) for n, k, c in rows if k == commit]
        total = sum(c["runs"] for _, c in mine)
        lb = sum(c["bounds"] for _, c in mine)
        above = sum(c["above"] for _, c in mine)
        dis = [(n, c["dishonest"]) for n, c in mine if c["dishonest"]]
        clean = [n for n, c in mine if not c["dishonest"]]
        cm = sum(c["conv_missed"] for _, c in mine)
        print(f"At {commit}, over {len(mine)} cells and {total} runs the run's own evidence turned {lb} answers into host-limited lower bounds, "
              f"{above} of them above the truth. Honest in every run (a band holding the truth no wider than ±25 % with the capacity within 20 %, "
              f"or a bound at or below the truth): {', '.join(clean) if clean else 'no cell'}. "
              f"Dishonest runs by that rule: {', '.join(f'{n} {k}' for n, k in dis) if dis else 'none'}; "
              f"{cm} runs said converged with the truth outside their band.")
        print()
    latest = commits[-1] if commits else None
    return {n: c for n, k, c in rows if k == latest}, latest


def sim_table():
    print("| scenario | commit | estimates | path | lower bound | binding resource | band or bound missed the truth | converged and missed | path \\|error\\| median | capacity reported, range |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    out = []
    for n in sorted(files("sim-"), key=lambda n: (n[len("sim-"):].rsplit("-", 1)[0], order(n))):
        d = load(n)
        name = n[len("sim-"):].rsplit("-", 1)[0]
        kinds, res, missed, cm, errs, total, caps = {}, {}, 0, 0, [], 0, []
        for run in d["runs"]:
            for smp in run["samples"]:
                total += 1
                e, t = smp["estimate"], smp["truth"]
                if e is None:
                    kinds["none"] = kinds.get("none", 0) + 1
                    continue
                k = e["host_evidence"]["outcome"]["kind"]
                kinds[k] = kinds.get(k, 0) + 1
                for l in e["host_evidence"]["limits"]:
                    if l["binds_result"]:
                        res[l["resource"]] = res.get(l["resource"], 0) + 1
                ok = e["low"] <= t * (1 + 1e-9) if e["high"] is None else e["low"] <= t <= e["high"]
                missed += not ok
                cm += e["converged"] and not ok
                if k == "path":
                    errs.append(abs(e["available"] - t) / t)
                if e.get("capacity"):
                    caps.append(e["capacity"] / 1e9)
        out.append((name, commit_of(n), missed, cm, kinds.get("lower_bound", 0), total))
        cap = f"{len(caps)}, {min(caps):.1f}–{max(caps):.1f} Gb/s" if caps else "0"
        print(f"| {name} | {commit_of(n)} | {total} | {kinds.get('path', 0)} | {kinds.get('lower_bound', 0)} | {', '.join(f'{k} {v}' for k, v in res.items()) or '-'} | {missed} | {cm} | {pct(statistics.median(errs)) if errs else '-'} | {cap} |")
    print()
    for commit in sorted({o[1] for o in out}, key=lambda c: commit_order(c)):
        slow = [o for o in out if "slow" in o[0] and o[1] == commit]
        fast = [o for o in out if "slow" not in o[0] and o[1] == commit]
        slow_text = (f"with hosts that cannot keep up ({', '.join(o[0] for o in slow)}), {sum(o[4] for o in slow)} of {sum(o[5] for o in slow)} estimates were host-limited lower bounds naming the resource, "
                     f"and {sum(o[2] for o in slow)} answers missed the truth. " if slow else "")
        print(f"At {commit}: {slow_text}"
              f"With fast hosts and coalescing NICs ({', '.join(o[0] for o in fast)}), {sum(o[2] for o in fast)} estimates' bands missed the truth, "
              f"{sum(o[3] for o in fast)} of them converged: FAC²'s reading under receive bunching, which the evidence does not judge (the bunching is reported as coalescing).")
        print()


def demo_table():
    by_commit = {}
    for n in files("demo-"):
        r = load(n)["runs"][0]
        half = (r["estimate_high_bps"] - r["estimate_low_bps"]) / 2 / r["estimate_bps"] if r["estimate_high_bps"] else None
        kind = r["host_evidence"]["outcome"]["kind"]
        by_commit.setdefault(commit_of(n), []).append((r["error"], r["in_band"], r["converged"], half, r["honesty"], kind))
    for commit in sorted(by_commit, key=lambda c: commit_order(c)):
        rows = by_commit[commit]
        path = [x for x in rows if x[5] == "path"]
        errs = [abs(x[0]) for x in path]
        bounds = [x for x in rows if x[5] == "lower_bound"]
        honest_bounds = sum(1 for x in bounds if x[4] == "lower_bound")
        halves = [x[3] for x in path if x[3]]
        print(f"At {commit}, {len(rows)} demos in a row: {len(path)} measured the path, "
              f"|error| median {pct(statistics.median(errs)) if errs else '-'}, max {pct(max(errs)) if errs else '-'}, "
              f"{sum(1 for x in path if x[1])} of {len(path)} bands holding the truth, the widest ±{max(halves) * 100:.1f} %, "
              f"{sum(1 for x in path if x[2])} converged; {len(bounds)} host-limited lower bounds, {honest_bounds} of them at or below the truth.")
        print()


def capacity():
    names = sorted(files("capacity-"), key=lambda n: (n.rsplit("-", 1)[0], commit_order(commit_of(n))))
    for n in names:
        d = load(n)
        runs = d["runs"]
        errs = [r["error"] for r in runs]
        within = sum(1 for e in errs if abs(e) <= 0.05)
        lossless = sum(1 for r in runs if r["loss_count"] == 0)
        print(f"- {n.rsplit('-', 1)[0]} at {commit_of(n)}: {len(runs)} tests, maxima {min(errs) * 100:+.1f} to {max(errs) * 100:+.1f} % of the truth, "
              f"{within} within 5 %; {lossless} lossless (only a lossless test can be sender-held); "
              f"loss {', '.join(str(r['loss_count']) for r in runs)} datagrams; drops caused {', '.join(str(r['drops_caused']) for r in runs)}")


def reading(cells, latest):
    def get(name):
        return cells.get(name)
    g3, gd = get("g1-30-3g"), get("g1-30-def")
    jumbo = [(n, c) for n, c in cells.items() if n.endswith("-j")]
    caps_off, caps_by = {}, {}
    for n in files("lab-"):
        if n.startswith("lab-g1-") and "-j-" in n:
            d = load(n)
            for r in d["runs"]:
                if r["capacity_estimate_bps"]:
                    caps_by.setdefault(commit_of(n), []).append(r["capacity_estimate_bps"] / d["capacity_ip_bps"] - 1)
                if r["honesty"] == "dishonest" and r["honesty_why"].startswith("capacity"):
                    caps_off.setdefault(commit_of(n), []).append(r["capacity_estimate_bps"] / d["capacity_ip_bps"] - 1)
    napi, delay = get("m300-30-napi"), get("m300-30-delay")
    print(f"Reading them (the rows at {latest}):\n")
    if g3 and gd:
        print(f"* At 1 Gb/s with 1500-byte probes and 30 % Poisson cross traffic: with `--max-rate 3G`, "
              f"{g3['measured']} of {g3['runs']} runs measured the path (|error| median {pct(g3['med'])}) and {g3['bounds']} gave a host-limited bound; "
              f"with the default 1 Gb/s ceiling {gd['bounds']} of {gd['runs']} said the sender's reach was too close to A, "
              f"as bounds ({gd['above']} above the truth), and {gd['measured']} measured it ({pct(gd['med'])}).")
    if jumbo:
        why = {}
        for _, c in jumbo:
            for k, v in c["why"].items():
                why[k] = why.get(k, 0) + v
        runs = sum(c["runs"] for _, c in jumbo)
        old = [(k, v) for k, v in caps_off.items() if k != latest]
        print(f"* The jumbo cells ({', '.join(n for n, _ in jumbo)}) had {sum(c['dishonest'] for _, c in jumbo)} dishonest runs of "
              f"{runs} ({', '.join(f'{k} {v}' for k, v in why.items()) or 'none'}), none called host-limited; "
              f"a capacity was reported in {len(caps_by.get(latest, []))} of them"
              + (f", {sum(1 for x in caps_off.get(latest, []))} more than 20 % off" if caps_by.get(latest) else "")
              + "".join(f" (at {k}, {len(v)} runs' capacities were {min(v) * 100:+.0f} to {max(v) * 100:+.0f} % off: the fluid line of four-packet trains)" for k, v in old)
              + ". Their measured runs erred by a median "
              + " and ".join(pct(c["med"]) for _, c in jumbo)
              + " with bands of a median ±" + " and ±".join(pct(c["half"]) for _, c in jumbo)
              + ", where a perfect reader of the same probe windows would have erred by "
              + " and ".join(pct(c["floor"]) for _, c in jumbo)
              + " (the sampling floor): FAC² erred "
              + " and ".join(f"{c['med'] / c['floor']:.1f}" if c["med"] is not None and c["floor"] else "-" for _, c in jumbo)
              + " times that floor there, a reading short of what the probes saw, not hosts that limited it.")
    busy = [(n, c) for n, c in cells.items() if n.startswith("g1-70-") and not n.endswith("-j")
            and c["floor_signed"] is not None and c["measured"]]
    if busy:
        print("* At 1 Gb/s and 70 % load (" + ", ".join(n for n, _ in busy) + ") the lab's cross-traffic source, on the same two cores as the probes, fell more than 1 ms behind in "
              + " and ".join(f"{c['starved']} of {c['recorded']}" for _, c in busy) + " runs with an estimate, and a perfect reader of the probes' windows would have read A "
              + " and ".join(f"{c['floor_signed'] * 100:+.1f} %" for _, c in busy)
              + " off the window's truth (median, signed): the probes met less cross traffic than the run's window held. The measured runs erred by a median "
              + " and ".join(pct(c["med"]) for _, c in busy) + " against that truth, and by "
              + " and ".join(pct(c["vs_reader"]) for _, c in busy)
              + " against what the probes' windows held: most of their misses are the lab host's, which this machine cannot take out of the cell.")
    if napi and delay:
        print(f"* Converged runs with the truth outside their band: threaded NAPI {napi['conv_missed']}, delay line {delay['conv_missed']} "
              f"(|error| p90 {pct(napi['p90'])} and {pct(delay['p90'])}).")
    print()


def sending():
    for n in files("base-lab-"):
        base = load(n)
        ours = load("lab-g1-30-3g-d530a67.json.gz")
        for label, d in (("b0bbef3, sendmmsg cars", base), ("d530a67, GSO cars", ours)):
            fast = [max(t["sending_rate"] for t in r["trace"]) / 1e6 for r in d["runs"]]
            errs = [abs(r["error"]) for r in d["runs"]]
            print(f"- {label}: fastest train sent, median {statistics.median(fast):.0f} Mb/s (range {min(fast):.0f}–{max(fast):.0f}); "
                  f"|error| median {pct(statistics.median(errs))}; bands held the truth in {sum(r['in_band'] for r in d['runs'])} of {len(d['runs'])}")
    for n in files("host-"):
        h = load(n)
        for s in h["pacing"]["sizes"]:
            g, b = s.get("paced_train_bps_gso"), s.get("paced_train_bps_batch")
            if isinstance(g, (int, float)) and isinstance(b, (int, float)):
                print(f"- `host`, {s['packet_bytes']} B: paced trains {g / 1e9:.2f} Gb/s with GSO cars, {b / 1e9:.2f} Gb/s with sendmmsg cars (×{g / b:.2f}); back to back {s['max_rate_bps'] / 1e9:.2f} Gb/s")


def report():
    print("#### Lab cells\n")
    cells, latest = lab_table()
    reading(cells, latest)
    print("#### Simulator, 10 seeds\n")
    sim_table()
    print("#### Demo\n")
    demo_table()
    print("#### Paced train rate\n")
    sending()
    print("\n#### Capacity (RFC 9097), 1 Gb/s, 30 % Poisson\n")
    capacity()


def main():
    buf = io.StringIO()
    with redirect_stdout(buf):
        report()
    text = buf.getvalue()
    if MODE == "print":
        sys.stdout.write(text)
        return
    stale = docblocks.apply([("docs/methods/fac2.md", "host-cells", "\n" + text)], check=MODE == "check")
    if stale and MODE == "check":
        sys.exit(1)


if __name__ == "__main__":
    main()
