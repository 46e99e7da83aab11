#!/usr/bin/env bash
# The long runs for a nightly job: every soak of the suite (the ctest entries labelled `soak`: the
# lock's nemesis soak, the semaphore's and the read-write lock's) for a given time each, one after
# another, then the deterministic simulation (test/sim) on every core for the same time, each
# process on random seeds. The suite (scripts/test.sh) runs the soaks for 8 to 20 s and the
# simulation on fixed seeds; this script is where they run for hours.
#
#   scripts/soak.sh                        600 s each (the soaks, then the simulation)
#   scripts/soak.sh --seconds N            N seconds each
#   scripts/soak.sh --simulation-only      only the simulation
#   scripts/soak.sh --soaks-only           only the soaks
#   scripts/soak.sh --build DIR            use (or make) the build in DIR (default build/release)
#
# A failing soak prints its checker's verdict; a failing simulation seed prints the shrunk history
# and the command that replays it (redlock_sim --replay SEED). The exit status is non-zero if any
# run failed.
set -euo pipefail

usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

seconds=600
build=build/release
soaks=1
simulation=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)
      [ $# -ge 2 ] || { echo "soak.sh: --seconds needs a number" >&2; exit 2; }
      seconds="$2"
      shift 2
      ;;
    --build)
      [ $# -ge 2 ] || { echo "soak.sh: --build needs a directory" >&2; exit 2; }
      build="$2"
      shift 2
      ;;
    --simulation-only) soaks=0; shift ;;
    --soaks-only) simulation=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *)
      echo "soak.sh: unknown argument \"$1\"" >&2
      usage >&2
      exit 2
      ;;
  esac
done
case "$seconds" in
  '' | *[!0-9]* | 0)
    echo "soak.sh: --seconds \"$seconds\" is not a positive whole number of seconds" >&2
    exit 2
    ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/bootstrap.sh

if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "== configure $build"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
echo "== build $build"
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target integration_tests redlock_sim

# Every server the soaks start lives in a directory under TMPDIR; this run's are removed with it.
run_tmp="$(mktemp -d "${TMPDIR:-/tmp}/redlock-soak-XXXXXX")"
trap 'rm -rf "$run_tmp"' EXIT
export TMPDIR="$run_tmp"

failed=0
if [ "$soaks" = 1 ]; then
  echo "== every soak for $seconds s (REDLOCK_SOAK_SECONDS)"
  # Run directly rather than through ctest, whose time limit in the suite is made for its short
  # lengths; ctest only says which commands the entries labelled `soak` run.
  soak_commands="$(ctest --test-dir "$build" -L soak --show-only=json-v1 | python3 -c '
import json, shlex, sys
for test in json.load(sys.stdin)["tests"]:
    if "command" not in test:
        sys.exit("soak.sh: %s has no program (not built?)" % test["name"])
    print(test["name"], shlex.join(test["command"]))')"
  [ -n "$soak_commands" ] || { echo "soak.sh: no ctest entry is labelled soak" >&2; exit 1; }
  while read -r name command; do
    echo "-- $name"
    REDLOCK_SOAK_SECONDS="$seconds" bash -c "$command" || { failed=1; echo "soak.sh: $name failed" >&2; }
  done <<<"$soak_commands"
fi

if [ "$simulation" = 1 ]; then
  cores="$(nproc 2>/dev/null || echo 2)"
  echo "== the simulation on $cores cores for $seconds s (random seeds)"
  pids=()
  for core in $(seq 1 "$cores"); do
    "$build/test/sim/redlock_sim" --seconds "$seconds" --quiet >"$run_tmp/simulation-$core.log" 2>&1 &
    pids+=($!)
  done
  histories=0
  for core in $(seq 1 "$cores"); do
    if ! wait "${pids[$((core - 1))]}"; then
      failed=1
      cat "$run_tmp/simulation-$core.log"
    fi
    count="$(sed -n 's/^passed: \([0-9]*\) histories.*/\1/p' "$run_tmp/simulation-$core.log")"
    [ -n "$count" ] && echo "  process $core: $(cat "$run_tmp/simulation-$core.log")"
    histories=$((histories + ${count:-0}))
  done
  echo "== the simulation passed $histories histories"
fi

if [ "$failed" != 0 ]; then
  echo "soak.sh: a run failed (above)" >&2
  exit 1
fi
echo "== all soaks passed"
