#!/usr/bin/env bash
# Builds redlock-asio and runs the whole test suite twice: a normal optimized build, then an
# ASan+UBSan build; then the threaded tests under ThreadSanitizer. Installs missing dependencies
# first. Exits non-zero on any failure.
#
#   scripts/test.sh            all three
#   REDLOCK_SKIP_SANITIZE=1 scripts/test.sh    only the normal build (for quick local runs)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/bootstrap.sh

jobs="$(nproc 2>/dev/null || echo 2)"

# Servers the fixtures start are children of the test processes; none may outlive a run. Their
# process title is "redis-server ADDRESS:PORT": 127.0.0.1, or a 10.200.x.2 veth address for the
# servers that partition_tests runs in network namespaces.
server_pattern='redis-server (127\.0\.0\.1|10\.200\.[0-9]+\.2):'
leftover_servers() { pgrep -f "$server_pattern" >/dev/null 2>&1; }

run_suite() {
  local dir="$1"
  shift
  echo "== configure $dir $*"
  cmake -S . -B "$dir" -DREDLOCK_WERROR=ON "$@" >/dev/null
  echo "== build $dir"
  cmake --build "$dir" -j "$jobs"
  echo "== test $dir"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600
  echo "== smoke-run benchmarks $dir"
  "$dir/bench/resp_bench" --quick >/dev/null
  "$dir/bench/pipeline_bench" --quick >/dev/null
  "$dir/bench/redlock_bench" --workload all --quick >/dev/null
}

run_suite build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== demo (the README's first command) on build/release"
REDLOCK_DEMO_BUILD="$root/build/release" scripts/demo.sh >/dev/null

if [ "${REDLOCK_SKIP_SANITIZE:-0}" != "1" ]; then
  # halt_on_error and no recovery: any sanitizer report fails the run.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  run_suite build/sanitize -DCMAKE_BUILD_TYPE=Debug -DREDLOCK_SANITIZE=address,undefined
fi

if [ "${REDLOCK_SKIP_SANITIZE:-0}" != "1" ]; then
  # The tests that run the client on several threads (labelled "threaded": a strand of several
  # threads, futures waited for on other threads, leases destroyed off the executor), and the
  # multithreaded example, under ThreadSanitizer. Only what they need is built.
  tsan_dir=build/tsan
  echo "== configure $tsan_dir (ThreadSanitizer)"
  cmake -S . -B "$tsan_dir" -DREDLOCK_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DREDLOCK_SANITIZE=thread -DREDLOCK_BUILD_BENCH=OFF -DREDLOCK_BUILD_TOOLS=OFF >/dev/null
  echo "== build $tsan_dir"
  cmake --build "$tsan_dir" -j "$jobs" --target integration_tests example_06_multithreaded redis_nodes
  echo "== test $tsan_dir"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/test/tsan.supp"
  "$tsan_dir/test/integration_tests" --run_test=@threaded --log_level=message --report_level=short
  "$tsan_dir/test/support/redis_nodes" --count 5 --quiet -- "$tsan_dir/examples/06_multithreaded" >/dev/null
fi

if leftover_servers; then
  echo "test.sh: redis-server processes were left running by the tests:" >&2
  pgrep -af "$server_pattern" >&2 || true
  exit 1
fi
echo "== all tests passed"
