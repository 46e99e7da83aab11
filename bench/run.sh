#!/usr/bin/env bash
# Runs every redlock_bench workload, 3 runs each, on five local redis-server nodes that
# redlock_bench starts itself and stops when it exits (or on the nodes of --nodes, below). Prints
# the JSON lines (one per run, then the median of each workload), then a readable table of the
# medians. Works from any directory.
#
#   bench/run.sh                      every workload, medians of 3 runs (takes minutes)
#   bench/run.sh --quick              one short run of each (seconds)
#   bench/run.sh --workload latency --runs 5    other redlock_bench flags are passed through
#   bench/run.sh --nodes redis://h:p,...        on those nodes instead of five of its own; tls
#                                               then measures the rediss:// ones over TLS and the
#                                               redis:// ones over plain TCP, and is left out
#                                               (said on stderr) when none is a rediss:// node
#
# The JSON lines are also saved under the build directory (the path is printed on stderr).
# Environment: REDLOCK_BENCH_BUILD_DIR (default build/bench-release), REDLOCK_BENCH_JOBS (build
# parallelism, default nproc).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${REDLOCK_BENCH_BUILD_DIR:-$root/build/bench-release}"
jobs="${REDLOCK_BENCH_JOBS:-$(nproc 2>/dev/null || echo 2)}"

"$root/scripts/bootstrap.sh"
# Build chatter goes to stderr: stdout carries only the results.
{
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build_dir" -j "$jobs" --target redlock_bench
} >&2

# Defaults come first so that the caller's flags override them (redlock_bench keeps the last one).
# With --quick and no --runs, redlock_bench's own quick default (one run) applies.
defaults=(--workload all)
case " $* " in
  *" --runs "* | *" --quick "*) ;;
  *) defaults+=(--runs 3) ;;
esac

# Notes the redis-server children of our redlock_bench as they appear, so that afterwards they
# can be told apart from any other redis-server on the machine (they are re-parented if they
# outlive it). Fields of /proc/PID/stat: pid (comm) state ppid; the two names have no spaces.
watch_servers() {
  local stat pid comm ppid
  local -A bench=()
  while true; do
    for stat in /proc/[0-9]*/stat; do
      # The process may be gone by now; the error redirection goes first so that it covers that.
      read -r pid comm _ ppid _ 2>/dev/null <"$stat" || continue
      if [ "$comm" = "(redlock_bench)" ] && [ "$ppid" = "$$" ]; then
        bench[$pid]=1
      elif [ "$comm" = "(redis-server)" ] && [ -n "${bench[$ppid]:-}" ]; then
        echo "$pid"
      fi
    done
    sleep 0.2
  done
}

mkdir -p "$build_dir/results"
results="$build_dir/results/$(date +%Y%m%d-%H%M%S)-$$"
watch_servers >"$results.servers" &
watcher=$!
trap 'kill "$watcher" 2>/dev/null || true; rm -f "$results.servers" "$results.txt"' EXIT
# The watcher, a background job, ignores SIGINT: exit through the EXIT trap, which stops it.
trap 'exit 130' INT
trap 'exit 143' TERM

status=0
"$build_dir/bench/redlock_bench" "${defaults[@]}" "$@" --table | tee "$results.txt" || status=$?
grep '^{' "$results.txt" >"$results.jsonl" || true
echo "run.sh: JSON lines saved to $results.jsonl" >&2

# redlock_bench stops its servers on exit (and the kernel kills them if it dies): give that a moment.
leftover=()
for _ in 1 2 3 4 5 6 7 8 9 10; do
  leftover=()
  mapfile -t seen < <(sort -u "$results.servers")
  for pid in "${seen[@]}"; do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "redis-server" ] && leftover+=("$pid")
  done
  [ ${#leftover[@]} -eq 0 ] && break
  sleep 0.2
done
if [ ${#leftover[@]} -gt 0 ]; then
  echo "run.sh: redis-server processes outlived redlock_bench (pids ${leftover[*]}); stopping them" >&2
  kill "${leftover[@]}" 2>/dev/null || true
  status=1
fi
echo "run.sh: redis-server children seen: ${#seen[@]}, left running: ${#leftover[@]}" >&2
exit "$status"
