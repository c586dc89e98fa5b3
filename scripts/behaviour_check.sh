#!/usr/bin/env bash
# Captures the outputs a refactor must leave byte-identical (issue 31's
# done-when, as in the second wave's architecture work): `sim run` of every
# shipped scenario (text and --json, one and three seeds), every method under
# `sim run`, `sim tcp`, and `trace synth` / `trace analyze` / `trace model`
# on both oracle presets.  Run it with the binary before and after, then
# compare the two directories:
#
#   scripts/behaviour_check.sh OLD_BINARY /tmp/before
#   scripts/behaviour_check.sh target/debug/pathsonde /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
#
# Nothing here needs root or the network.
set -euo pipefail
bin="$1"
out="$2"
here="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out"
cd "$here"
for s in scenarios/*.toml; do
  n="$(basename "$s" .toml)"
  case "$n" in
    icim-fig5 | icim-table3)
      "$bin" sim tcp "$s" --json >"$out/tcp-$n.json"
      ;;
    *)
      "$bin" sim run "$s" >"$out/run-$n.txt"
      "$bin" sim run "$s" --json --seeds 3 >"$out/run-$n-3.json"
      ;;
  esac
done
for m in fac2 slops pair igi ptr chirp burst; do
  # A method may give no estimate here (exit 9): its output and exit code
  # are both part of the behaviour.
  rc=0
  "$bin" sim run scenarios/icim-fig5-probe.toml --method "$m" --json >"$out/method-$m.json" 2>"$out/method-$m.err" || rc=$?
  echo "exit $rc" >>"$out/method-$m.err"
done
for p in banded queueing; do
  "$bin" trace synth --preset "$p" -n 30000 --seed 1 -o "$out/$p.pstrace" >/dev/null
  # The outputs name the files they read and wrote: the directory is
  # written as OUT so two directories compare.
  "$bin" trace analyze "$out/$p.pstrace" | sed "s|$out|OUT|g" >"$out/analyze-$p.txt"
  "$bin" trace analyze "$out/$p.pstrace" --json | sed "s|$out|OUT|g" >"$out/analyze-$p.json"
  "$bin" trace model "$out/$p.pstrace" -k 500 --json | sed "s|$out|OUT|g" >"$out/model-$p.json"
done
echo "behaviour_check: $(ls "$out" | wc -l) files in $out"
