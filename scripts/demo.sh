#!/usr/bin/env bash
# The demo: builds what it needs, starts five local Redis nodes of its own, and shows the lock at
# work. Several `redlock run` processes contend for one resource (a timeline shows who held it,
# when and for how long), `redlock status` looks at the nodes meanwhile, and then the dedup example
# saves thousands of concurrent requests' items exactly once. The nodes are stopped at the end,
# also on Ctrl-C.
#
#   scripts/demo.sh                                   five nodes of its own, on free loopback ports
#   REDLOCK_DEMO_PORT_BASE=7000 scripts/demo.sh       five nodes of its own, on ports 7000-7004
#   scripts/demo.sh --port-base 7000                  the same
#   scripts/demo.sh --cluster                         one Redis Cluster of its own (3 masters, a
#                                                     replica each) as the one Redlock node
#   REDLOCK_NODES=redis://h1:6379,redis://h2:6379,redis://h3:6379 scripts/demo.sh
#                                                     your nodes: the demo starts none
#   scripts/demo.sh --with-nodes redis://h1:6379,redis://h2:6379,redis://h3:6379    the same
#   REDLOCK_DEMO_BUILD=build/release scripts/demo.sh  use that build tree (default build/demo)
#   scripts/demo.sh --help
#
# REDLOCK_NODES is the comma-separated list of redis:// URLs that the examples and `redlock` read
# too. On your nodes the demo only takes locks (keys that expire with their TTL). --no-build skips
# installing and building and uses the build tree as it is.
#
# --with-nodes without a list is the demo's second stage, which runs the demo proper: by default
# the first stage builds, then runs `scripts/demo.sh --with-nodes` under redis_nodes
# (test/support/redis_nodes.cpp), which starts the five nodes on free loopback ports, sets
# REDLOCK_NODES to their URLs and stops the nodes when the demo ends.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${REDLOCK_DEMO_BUILD:-$root/build/demo}"
cli="$build/tools/redlock"
dedup="$build/examples/05_dedup_save_once"
launcher="$build/test/support/redis_nodes"
own_count=5

usage() {
  cat <<EOF
usage: scripts/demo.sh [--with-nodes [URL,...] | --port-base PORT | --cluster] [--no-build]

Builds what the demo needs (in \$REDLOCK_DEMO_BUILD, default build/demo) and shows the lock at
work. By default on $own_count Redis nodes of its own, on free loopback ports, stopped at the end.

  --with-nodes URL,...  run against these nodes (redis:// URLs, comma-separated) and start none
  --port-base PORT      start its own $own_count nodes on ports PORT to PORT+$((own_count - 1))
  --cluster             start a Redis Cluster of its own (3 masters, a replica each, free
                        loopback ports) and use it as the one node (a redis+cluster:// URL)
  --no-build            use the build tree as it is: install and build nothing
  -h, --help            this text

Environment: REDLOCK_NODES (as --with-nodes URL,...), REDLOCK_DEMO_PORT_BASE (as --port-base),
REDLOCK_DEMO_BUILD (the build tree).

--with-nodes without a list is the second stage, run under redis_nodes: it runs the demo on the
nodes redis_nodes has started and named in \$REDLOCK_NODES, and builds nothing.
EOF
}

die() {
  echo "demo: $*" >&2
  exit 2
}

nodes="${REDLOCK_NODES:-}"
port_base="${REDLOCK_DEMO_PORT_BASE:-}"
build_first=1
second_stage=0
own_cluster=0
while [ $# -gt 0 ]; do
  case "$1" in
    --with-nodes)
      if [ $# -gt 1 ] && [ "${2#-}" = "$2" ]; then
        nodes="$2"
        [ -n "$nodes" ] || die "--with-nodes: the list of nodes is empty"
        shift
      else
        [ -n "$nodes" ] || die "--with-nodes without a list needs REDLOCK_NODES"
        second_stage=1
        build_first=0
      fi
      ;;
    --port-base)
      [ $# -gt 1 ] || die "--port-base needs a port"
      port_base="$2"
      shift
      ;;
    --cluster) own_cluster=1 ;;
    --no-build) build_first=0 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *)
      usage >&2
      die "unknown argument \"$1\""
      ;;
  esac
  shift
done
if [ "$own_cluster" = 1 ] && [ "$second_stage" = 0 ]; then
  [ -z "$nodes" ] && [ -z "$port_base" ] ||
    die "--cluster starts its own cluster: leave out the nodes (REDLOCK_NODES, --with-nodes) and the port base"
fi
if [ -n "$port_base" ]; then
  [ -z "$nodes" ] || die "nodes given (REDLOCK_NODES or --with-nodes) and a port base: choose one"
  case "$port_base" in
    '' | *[!0-9]*) die "the port base must be a number, not \"$port_base\"" ;;
  esac
  if [ "$port_base" -lt 1 ] || [ "$port_base" -gt $((65536 - own_count)) ]; then
    die "the port base must be 1 to $((65536 - own_count)), not $port_base"
  fi
fi

# The password of a URL (redis://user:password@host) is not printed.
masked() { sed -E 's#(//[^:/@,]*:)[^@/,]*@#\1***@#g' <<<"$1"; }

# The work directory, the `redlock run` processes and the nodes of --port-base go at the end.
work=""
worker_pids=()
server_pids=()
cleanup() {
  for pid in "${worker_pids[@]}" "${server_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -z "$work" ] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Runs the demo on the nodes in $REDLOCK_NODES; the caller prints which they are.
run_demo() {
  local workers=4 hold_s=0.6 start failed pid w
  now_ms() { date +%s%3N; }
  echo "== $workers processes run 'redlock run demo:report -- <job>' at the same time;"
  echo "   each job holds the lock for ${hold_s} s. Only one may run at a time."
  start="$(now_ms)"
  for w in $(seq 1 "$workers"); do
    # The job logs when it starts and ends; redlock runs it only while the lock is held.
    "$cli" run --ttl 5s --wait 30s --quiet demo:report -- \
      sh -c "echo \"start $w \$(date +%s%3N)\" >> '$work/log'; sleep $hold_s;
             echo \"end $w \$(date +%s%3N)\" >> '$work/log'" &
    worker_pids+=("$!")
  done

  # Meanwhile, what the nodes say.
  sleep 0.3
  echo "== redlock status demo:report, while one job holds the lock:"
  "$cli" status demo:report | sed 's/^/   /'

  failed=0
  for pid in "${worker_pids[@]}"; do wait "$pid" || failed=1; done
  worker_pids=()
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
}

# Starts `count` redis-servers on the ports from `base` on, as redis_nodes would (loopback, no
# persistence), and waits until every one answers. Sets REDLOCK_NODES to their URLs. A port that
# another server holds already ends the demo: the answer must come from the process started here.
start_servers() {
  local base="$1" count="$2" port dir urls="" i deadline
  for ((port = base; port < base + count; port++)); do
    dir="$work/node-$port"
    mkdir "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
      --dir "$dir" --logfile "$dir/redis.log" >"$dir/stdio.log" 2>&1 &
    server_pids+=("$!")
    urls="${urls:+$urls,}redis://127.0.0.1:$port"
  done
  deadline=$((SECONDS + 10))
  for ((i = 0; i < count; i++)); do
    port=$((base + i))
    until [ "$(redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null |
      sed -n 's/^process_id:\([0-9]*\).*/\1/p')" = "${server_pids[$i]}" ]; do
      if ! kill -0 "${server_pids[$i]}" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        echo "demo: redis-server on port $port did not start (is the port in use?):" >&2
        tail -n 5 "$work/node-$port/redis.log" "$work/node-$port/stdio.log" >&2 || true
        exit 1
      fi
      sleep 0.05
    done
  done
  export REDLOCK_NODES="$urls"
}

if [ "$build_first" = 1 ]; then
  "$root/scripts/bootstrap.sh"
  echo "== building the demo (the first time: a few minutes)"
  # An existing build tree (REDLOCK_DEMO_BUILD, e.g. the test suite's) is used as it is configured.
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DREDLOCK_BUILD_BENCH=OFF >/dev/null
  fi
  targets=(redlock_cli example_05_dedup_save_once)
  # The launcher of the nodes on free ports.
  [ -n "$nodes" ] || [ -n "$port_base" ] || targets+=(redis_nodes)
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}" >/dev/null
fi
for program in "$cli" "$dedup"; do
  [ -x "$program" ] || die "$program is not built (run without --no-build)"
done

if [ -n "$nodes" ]; then
  export REDLOCK_NODES="$nodes"
  work="$(mktemp -d)"
  count="$(tr ',' '\n' <<<"$nodes" | grep -c .)" || true
  if [ "$second_stage" = 1 ]; then
    echo "== $count Redis nodes: ${nodes//,/ }"
    run_demo
    echo "== done; stopping the nodes"
  else
    echo "== $count Redis nodes of yours (the demo starts none): $(masked "${nodes//,/ }")"
    run_demo
    echo "== done"
  fi
elif [ -n "$port_base" ]; then
  work="$(mktemp -d)"
  start_servers "$port_base" "$own_count"
  echo "== $own_count Redis nodes of its own, on ports $port_base-$((port_base + own_count - 1)):" \
    "${REDLOCK_NODES//,/ }"
  run_demo
  echo "== done; stopping the nodes"
else
  [ -x "$launcher" ] || die "$launcher is not built (run without --no-build)"
  if [ "$own_cluster" = 1 ]; then
    exec "$launcher" --cluster --quiet -- "$0" --with-nodes
  fi
  exec "$launcher" --count "$own_count" --quiet -- "$0" --with-nodes
fi
