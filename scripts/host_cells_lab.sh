#!/bin/bash
# Measures issue 26's ten lab cells (docs/methods/fac2.md, "When the host is
# the limit") with BINARY at COMMIT and stores each as
# docs/compare/data/host-26/lab-CELL-COMMIT.json.gz; add COMMIT to COMMITS in
# scripts/host_cells.py, then `python3 scripts/host_cells.py write`.
# As root, on a quiet machine (nothing compiling beside it); `lab run` takes
# the lab lock itself.  Usage: sudo scripts/host_cells_lab.sh BINARY COMMIT
set -euo pipefail
BIN=${1:?usage: host_cells_lab.sh BINARY COMMIT}
COMMIT=${2:?usage: host_cells_lab.sh BINARY COMMIT}
OUT=$(cd "$(dirname "$0")/.." && pwd)/docs/compare/data/host-26
cell() {
    local name=$1
    shift
    echo "$name: lab run $* --runs 10" >&2
    "$BIN" lab run "$@" --runs 10 --json --no-save | gzip -c > "$OUT/lab-$name-$COMMIT.json.gz"
}
cell g1-30-3g --capacity 1gbit --cross poisson:30% --max-rate 3G
cell g1-30-def --capacity 1gbit --cross poisson:30%
cell g1-30-j --capacity 1gbit --cross poisson:30% --mtu 9000 --packet-size 9000 --max-rate 5G
cell g1-70-3g --capacity 1gbit --cross poisson:70% --max-rate 3G
cell g1-70-def --capacity 1gbit --cross poisson:70%
cell g1-70-j --capacity 1gbit --cross poisson:70% --mtu 9000 --packet-size 9000 --max-rate 5G
cell m300-30 --capacity 300mbit --cross poisson:30%
cell m300-30-delay --capacity 300mbit --cross poisson:30% --delay 10ms
cell m300-30-napi --capacity 300mbit --cross poisson:30% --threaded-napi
cell m300-70 --capacity 300mbit --cross poisson:70%
