#!/usr/bin/env python3
"""FAC² on the simulator's 10, 40 and 100 Gb/s paths: run the cells, or
print the table of docs/sim.md from stored results.

    # run every cell (10 seeds, one estimate each) and store the results
    python3 scripts/sim_fac2_table.py --run target/release/pathsonde docs/sim/data/fac2-COMMIT.json
    # print the table from stored results
    python3 scripts/sim_fac2_table.py docs/sim/data/fac2-COMMIT.json

Each cell is `pathsonde sim run scenarios/fac2-SPEED.toml --cross
poisson:LOAD% --seeds 10 --estimates 1 --json` (9000 B cross packets at 40
and 100 Gb/s); |error| is against the truth over each estimate's window.
"""
import json
import statistics
import subprocess
import sys

SPEEDS = ["10g", "40g", "100g"]
LOADS = [30, 50, 70]


def run(binary, dest):
    out = {}
    for s in SPEEDS:
        for load in LOADS:
            pkt = ":packet=9000" if s != "10g" else ""
            cmd = [binary, "sim", "run", f"scenarios/fac2-{s}.toml", "--cross",
                   f"poisson:{load}%{pkt}", "--seeds", "10", "--estimates", "1", "--json"]
            d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            errs, sizes, held = [], [], 0
            for r in d["runs"]:
                for smp in r["samples"]:
                    if smp.get("relative_error") is not None:
                        errs.append(abs(smp["relative_error"]))
                    sizes.append(((smp.get("estimate") or {}).get("cost") or {}).get("bytes", 0))
                    held += 1 if smp.get("in_band") else 0
            out[f"new {s} {load}"] = dict(
                cmd=" ".join(cmd[1:]), n=len(sizes), estimates=len(errs),
                median=statistics.median(errs) if errs else None,
                best=min(errs, default=None), worst=max(errs, default=None),
                bytes_median=statistics.median(sizes), in_band=held)
    with open(dest, "w") as f:
        json.dump(out, f, indent=1)


def table(path):
    d = json.load(open(path))
    print("| tight link | 30 % load | 50 % load | 70 % load |")
    print("| --- | --- | --- | --- |")
    for s in SPEEDS:
        cells = []
        for load in LOADS:
            c = d[f"new {s} {load}"]
            cells.append(f"{100 * c['median']:.1f} % ({100 * c['best']:.1f}–{100 * c['worst']:.1f}), "
                         f"{c['in_band']}/{c['n']} in band, {c['bytes_median'] / 1e6:.1f} MB")
        print(f"| {s[:-1]} Gb/s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--run":
        run(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2:
        table(sys.argv[1])
    else:
        sys.exit(__doc__)
