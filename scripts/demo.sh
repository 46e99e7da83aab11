#!/usr/bin/env bash
# The demo: builds what it needs, starts five local Redis nodes of its own, and shows the lock at
# work. Several `redlock run` processes contend for one resource (a timeline shows who held it,
# when and for how long), `redlock status` looks at the nodes meanwhile, and then the dedup example
# saves thousands of concurrent requests' items exactly once. The nodes are stopped at the end,
# also on Ctrl-C.
#
#   scripts/demo.sh
#   REDLOCK_DEMO_BUILD=build/release scripts/demo.sh    # use that build tree (default build/demo)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${REDLOCK_DEMO_BUILD:-$root/build/demo}"
cli="$build/tools/redlock"
dedup="$build/examples/05_dedup_save_once"

# Second stage: runs under redis_nodes, which has set REDLOCK_NODES and stops the nodes afterwards.
if [ "${1:-}" = "--with-nodes" ]; then
  workers=4
  hold_s=0.6
  work="$(mktemp -d)"
  pids=()
  cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
  }
  trap cleanup EXIT
  trap 'exit 130' INT TERM

  now_ms() { date +%s%3N; }
  echo "== 5 Redis nodes: ${REDLOCK_NODES//,/ }"
  echo "== $workers processes run 'redlock run demo:report -- <job>' at the same time;"
  echo "   each job holds the lock for ${hold_s} s. Only one may run at a time."
  start="$(now_ms)"
  for w in $(seq 1 "$workers"); do
    # The job logs when it starts and ends; redlock runs it only while the lock is held.
    "$cli" run --ttl 5s --wait 30s --quiet demo:report -- \
      sh -c "echo \"start $w \$(date +%s%3N)\" >> '$work/log'; sleep $hold_s;
             echo \"end $w \$(date +%s%3N)\" >> '$work/log'" &
    pids+=("$!")
  done

  # Meanwhile, what the nodes say.
  sleep 0.3
  echo "== redlock status demo:report, while one job holds the lock:"
  "$cli" status demo:report | sed 's/^/   /'

  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  pids=()
  [ "$failed" = 0 ] || { echo "demo: a redlock run failed" >&2; exit 1; }

  echo "== timeline: . waiting for the lock, # holding it (one character = 50 ms):"
  awk -v t0="$start" '
    $1 == "start" { s[$2] = $3 - t0 } $1 == "end" { e[$2] = $3 - t0 }
    END {
      n = 0
      for (w in s) order[++n] = w
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (s[order[j]] < s[order[i]]) { t = order[i]; order[i] = order[j]; order[j] = t }
      overlaps = 0
      for (i = 1; i <= n; i++) {
        w = order[i]; bar = ""
        for (c = 0; c * 50 < e[w]; c++) bar = bar ((c * 50 + 50 > s[w]) ? "#" : ".")
        printf "   job %s  %-60s held from %4.2f s to %4.2f s\n", w, bar, s[w] / 1000, e[w] / 1000
        if (i > 1 && s[w] < e[order[i - 1]]) overlaps++
      }
      printf "   %d jobs, %d overlaps\n", n, overlaps
      exit overlaps > 0
    }' "$work/log"

  echo "== redlock status demo:report, after the last job:"
  "$cli" status demo:report | sed 's/^/   /'

  echo "== examples/05_dedup_save_once: concurrent save requests, each item saved exactly once:"
  "$dedup" | sed 's/^/   /'
  echo "== done; stopping the nodes"
  exit 0
fi

"$root/scripts/bootstrap.sh"
echo "== building the demo (the first time: a few minutes)"
# An existing build tree (REDLOCK_DEMO_BUILD, e.g. the test suite's) is used as it is configured.
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DREDLOCK_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" \
  --target redlock_cli redis_nodes example_05_dedup_save_once >/dev/null
exec "$build/test/support/redis_nodes" --count 5 --quiet -- "$0" --with-nodes
