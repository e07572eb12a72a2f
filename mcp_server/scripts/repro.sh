#!/usr/bin/env bash
# repro.sh CAPSULE_OR_RUNS_DIR OUT_DIR: re-derive a sealed capsule's test metrics.
# A capsule is runs/<run-id>/ (run.json, config.yaml, train.csv, best.pth, test/<test-id>/...);
# given a runs/ dir, every capsule in it is reproduced. Steps:
#   1 pinned env: says whether this python matches the env lock the capsule records (a finding);
#   2 validate:   exit 2 on no capsule, a missing root file, any latest.pth, no test dir, a test
#                 without metrics.json, results.parquet or vis/, a sealed file whose bytes changed;
#   3 evaluate:   for each declared test, run.json's evaluate.command (an argv list; {checkpoint}
#                 {config} {out} {test} filled in) in the current directory, writing into a FRESH
#                 temporary dir ({out}), and compare its {out}/metrics.json with the sealed one;
#                 nothing is ever written into a capsule;
#   4 report:     OUT_DIR/repro_report.json: per capsule, test and metric, reproduced within the
#                 tolerance it names, differs (absolute and relative difference) or could not run
#                 (why). Tolerance: run.json's evaluate.tolerance[metric] (absolute), else 1e-6
#                 absolute + 1e-6 relative.
# Exit 0 only when every metric reproduced, 1 when any differs or could not run, 2 on bad input.
# Needs bash 4.4+ and python3 (3.8+; RGT_REPRO_PYTHON names another); repro_onbox.py lies beside
# this file (RGT_REPRO_ONBOX names another path).
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
onbox=${RGT_REPRO_ONBOX:-$here/repro_onbox.py}
py=${RGT_REPRO_PYTHON:-$(command -v python3 || command -v python || true)}

if [ "$#" -ne 2 ]; then
  echo "usage: repro.sh CAPSULE_OR_RUNS_DIR OUT_DIR" >&2
  exit 2
fi
target=$1
out=$2
mkdir -p -- "$out"
out=$(cd -- "$out" && pwd -P)
report=$out/repro_report.json
if [ -z "$py" ] || [ ! -f "$onbox" ]; then
  echo "repro: could not run: python3 (3.8+) and repro_onbox.py beside this script are needed" >&2
  cat > "$report" <<'JSON'
{"schema": "remote-gpu-trainer/repro-report/v1", "outcome": "could_not_run", "exit_code": 1,
 "problems": ["python3 or repro_onbox.py is missing where repro.sh ran"], "capsules": []}
JSON
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/rgt-repro-work.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

problems=()
problem() { problems+=("$1: $2"); }
listing() { find "$1" -printf '%P\t%s\t%T@\t%m\n' | LC_ALL=C sort; }

is_capsule() {
  local f
  for f in run.json config.yaml train.csv best.pth last.pth latest.pth test; do
    [ -e "$1/$f" ] && return 0
  done
  return 1
}

# --- which capsules -------------------------------------------------------------------------
capsules=()
if [ ! -d "$target" ]; then
  problem "$target" "no capsule: not a directory"
elif is_capsule "$target"; then
  capsules=("$(cd -- "$target" && pwd -P)")
else
  for d in "$target"/*/; do
    [ -d "$d" ] && capsules+=("$(cd -- "$d" && pwd -P)")
  done
  [ "${#capsules[@]}" -gt 0 ] || problem "$target" "no capsule: neither a capsule (run.json, best.pth, test/) nor a runs/ dir holding one"
fi

# --- 2. validate ----------------------------------------------------------------------------
check_test_dir() {  # capsule test-dir
  local c=$1 t=$2 name
  name=${t%/}
  name=${name##*/}
  [ -f "$t/metrics.json" ] || problem "$c" "test $name has no metrics.json"
  [ -f "$t/results.parquet" ] || problem "$c" "test $name has no results.parquet"
  [ -d "$t/vis" ] || problem "$c" "test $name has no vis/ dir"
}

for c in "${capsules[@]}"; do
  case "$out/" in "$c"/*) problem "$c" "the output dir lies inside the capsule: a capsule is never written" ;; esac
  for f in run.json config.yaml train.csv best.pth; do
    [ -f "$c/$f" ] || problem "$c" "missing root file $f"
  done
  if [ -n "$(find "$c" -name latest.pth -print -quit)" ]; then
    problem "$c" "holds a latest.pth: a sealed capsule keeps best.pth (and last.pth), never latest.pth"
  fi
  if [ ! -d "$c/test" ]; then
    problem "$c" "no test/ dir: a capsule declares at least one test"
    continue
  fi
  for t in "$c"/test/*/; do
    [ -d "$t" ] && check_test_dir "$c" "$t"
  done
  if [ -f "$c/run.json" ]; then
    while IFS= read -r line; do
      case "$line" in "problem "*) problem "$c" "${line#problem }" ;; esac
    done < <("$py" "$onbox" check "$c" || true)
  fi
done

if [ "${#problems[@]}" -gt 0 ]; then
  printf 'repro: bad input: %s\n' "${problems[@]}" >&2
  "$py" "$onbox" bad "$report" "${problems[@]}" || true
  exit 2
fi

# --- 1. pinned env, 3. evaluate and compare ------------------------------------------------------
parts=$work/parts.jsonl
: > "$parts"
i=0
for c in "${capsules[@]}"; do
  i=$((i + 1))
  "$py" "$onbox" env "$c" >> "$parts"
  listing "$c" > "$work/before-$i"
  mapfile -t tests < <("$py" "$onbox" check "$c" | sed -n 's/^test //p')
  for t in "${tests[@]}"; do
    fresh=$(mktemp -d "${TMPDIR:-/tmp}/rgt-repro-$t.XXXXXX")
    log=$work/eval-$i-$t.log
    rc=0
    start=${EPOCHREALTIME:-$(date +%s)}
    if "$py" "$onbox" argv "$c" "$t" "$fresh" > "$work/argv" 2> "$log"; then
      mapfile -d '' -t argv < "$work/argv"
      echo "repro: $(basename -- "$c") test $t: evaluating into $fresh"
      "${argv[@]}" < /dev/null > "$log" 2>&1 || rc=$?
    else
      rc=$?
    fi
    "$py" "$onbox" compare "$c" "$t" "$fresh" "$rc" "$log" "$start" "${EPOCHREALTIME:-$(date +%s)}" >> "$parts"
    rm -rf -- "$fresh"
  done
  listing "$c" > "$work/after-$i"
  same=1
  cmp -s "$work/before-$i" "$work/after-$i" || same=0
  "$py" "$onbox" untouched "$c" "$same" >> "$parts"
done

# --- 4. report ---------------------------------------------------------------------------------
"$py" "$onbox" report "$parts" "$report"
