#!/usr/bin/env bash
# Runs pathsonde's fuzz targets one after another (docs/security.md,
# "Fuzzing").  Needs a nightly toolchain and cargo-fuzz; installs them when
# missing (rustup toolchain install nightly; cargo install cargo-fuzz).
#
#   fuzz/run.sh                     every target for 25 s (what CI runs)
#   fuzz/run.sh --time 600          every target for 10 minutes
#   fuzz/run.sh --runs 10000000     every target for 10 million executions
#   fuzz/run.sh --time 60 probe_header control_client
#
# New interesting inputs go to a scratch directory (the committed corpus in
# fuzz/corpus/<target> is read, not written) unless --grow is given, which
# adds them to the committed corpus.  A crash stops the script with the
# target's non-zero status; libFuzzer prints the input's path
# (fuzz/artifacts/<target>/crash-*) and `cargo +nightly fuzz run <target>
# <that file>` replays it.
set -euo pipefail
cd "$(dirname "$0")"

limit=(-max_total_time=25)
named=0
grow=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --grow) grow=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz/run.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); named=1; shift ;;
  esac
done

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

# -a: overflow checks and debug assertions on, as in a debug build of
# pathsonde: an arithmetic overflow on hostile input is a finding.
if [ "$named" = 0 ]; then
  cargo +nightly fuzz build -a
else
  for t in "${targets[@]}"; do cargo +nightly fuzz build -a "$t"; done
fi
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  if [ "$grow" = 1 ]; then
    dirs=("corpus/$t")
  else
    scratch="$(mktemp -d "${TMPDIR:-/tmp}/pathsonde-fuzz-$t.XXXXXX")"
    dirs=("$scratch" "corpus/$t")
  fi
  echo "== fuzz $t ${limit[*]}"
  status=0
  cargo +nightly fuzz run -a "$t" "${dirs[@]}" -- "${limit[@]}" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
    grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done|==[0-9]+==|SUMMARY|.*panicked|.*Test unit written|artifact_prefix)' || true
  status="${PIPESTATUS[0]}"
  [ "$grow" = 1 ] || rm -rf "$scratch"
  if [ "$status" != 0 ]; then
    echo "fuzz/run.sh: target $t failed (status $status)" >&2
    exit "$status"
  fi
done
