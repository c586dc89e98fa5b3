#!/usr/bin/env python3
"""Check that every generated block in the docs matches the stored data.

Runs each generator in check mode; each regenerates its blocks in memory,
writes nothing, and names the file and block of any that differ.  Exits 1 if
any generator found a stale block.  CI runs this (.ci/run); after changing
stored data, `--write` rewrites every block instead:

    python3 scripts/check_docs.py            # check
    python3 scripts/check_docs.py --write    # rewrite from the stored data
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# (script, arguments to check, arguments to write)
GENERATORS = [
    ("compare_tables.py", ["--check"], ["--write-all"]),
    ("capacity_lab.py", ["check"], ["write-all"]),
    ("spoof_table.py", ["check"], ["write"]),
    ("bytes_curve.py", ["check"], ["write"]),
    ("precision_lab.py", ["check"], ["write"]),
    ("hops_lab.py", ["check"], ["write"]),
    ("hops_synthetic.py", ["check"], ["write"]),
    ("hops_queue_e2e.py", ["check"], ["write"]),
    ("compare_chain.py", ["check"], ["write"]),
    ("host_cells.py", ["check"], ["write"]),
]


def main():
    write = sys.argv[1:] == ["--write"]
    if sys.argv[1:] and not write:
        sys.exit(__doc__)
    failed = []
    for script, check, rewrite in GENERATORS:
        cmd = [sys.executable, os.path.join(HERE, script)] + (rewrite if write else check)
        if subprocess.run(cmd).returncode != 0:
            failed.append(script)
    if failed:
        sys.exit(f"check_docs: stale generated blocks from {', '.join(failed)}; "
                 "regenerate with `python3 scripts/check_docs.py --write` if the data changed")


if __name__ == "__main__":
    main()
