#!/usr/bin/env bash
# Builds redlock-asio and checks it, failing on the first problem: the formatting of every C++
# file (clang-format), the links of the Markdown pages, include cycles in src/, the API reference
# (Doxygen, warnings as errors), the whole test suite on a normal optimized build and on an
# ASan+UBSan build, the Debian packages of the optimized build (cpack, lintian), the threaded
# tests under ThreadSanitizer, and the RESP parser under libFuzzer (clang) for a bounded time.
# Installs missing dependencies first. Each stage's build runs, at low priority, while the
# previous stage's tests run (they leave about half of the cores idle).
#
#   scripts/test.sh            everything (about 20 minutes on two cores, ccache warm)
#   REDLOCK_SKIP_SANITIZE=1 scripts/test.sh    format check and the normal build only (quick runs)
#   REDLOCK_FUZZ_SECONDS=N     how long libFuzzer runs (default 60, one worker per core)
#   scripts/test.sh --help     how long each stage takes, and how to run a subset by hand
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/test.sh [--help]

Builds and checks everything, stopping at the first failure; installs what is missing first.
Measured on two cores, each stage's build overlapping the previous stage's tests; the run prints
this table for itself at the end. "Warm": a fresh clone whose sources ccache has compiled before
(in any clone: the paths it hashes are relative); "cold": ccache empty.
                                                                 warm        cold
  format check (clang-format), links in the Markdown pages,
  no include cycle in src/                                     seconds     seconds
  release build                                                1.5 min     9 min
  its whole suite (ctest), the docs (Doxygen)                  6.5 min     8 min
  benchmarks smoke-run and both demos                          under 1 min
  client instructions per lock (callgrind; bench/baseline.json) 5 s
  Debian packages: cpack, a consumer of them, lintian          1 min
  ASan+UBSan build (what was not hidden) and its whole suite   7 min       17 min
  ThreadSanitizer: builds not hidden, the threaded tests and
  the lock-core suites                                         1 min       2 min
  libFuzzer on the RESP parser                                 1 min
  in all                                                       about 17 min  about 38 min

Environment:
  REDLOCK_SKIP_SANITIZE=1   only the checks and the release stage (9 minutes warm)
  REDLOCK_FUZZ_SECONDS=N    how long libFuzzer runs (default 60, one worker per core)
  REDLOCK_NO_CCACHE=1       compile without ccache (a cold build; by default ccache is used
                            when installed, and a rebuild of unchanged sources is cheap)

A quicker subset by hand, once a build exists (scripts/test.sh or cmake -B build/release):
  ctest --test-dir build/release -R '^unit_tests' -j2   pure logic, no servers (seconds)
  ctest --test-dir build/release -R NAME -j2            the ctest entries matching NAME
  ctest --test-dir build/release -N                     every entry (one per suite)
  build/release/test/integration_tests --run_test=SUITE[/CASE]   one suite or case
  build/release/test/integration_tests --list_content            the suites and their cases
Every integration test starts its own redis-server processes on free loopback ports.
USAGE
}
case "${1:-}" in
  "") ;;
  -h | --help)
    usage
    exit 0
    ;;
  *)
    echo "scripts/test.sh: unknown argument \"$1\"" >&2
    usage >&2
    exit 2
    ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/bootstrap.sh --docs

jobs="$(nproc 2>/dev/null || echo 2)"

# Each stage prints when it began (minutes:seconds into the run); the run ends with a table of
# what each stage took, so that a slow stage shows in every log. A stage that waits for a build
# started in the background measures only the part of that build the previous stage did not hide.
run_started=$SECONDS
stage_names=()
stage_seconds=()
stage_name=""
stage_started=0
end_stage() {
  [ -n "$stage_name" ] || return 0
  stage_names+=("$stage_name")
  stage_seconds+=($((SECONDS - stage_started)))
  stage_name=""
}
stage() {
  end_stage
  stage_name="$1"
  stage_started=$SECONDS
  local at=$((SECONDS - run_started))
  printf '== [%d:%02d] %s\n' $((at / 60)) $((at % 60)) "$1"
}
print_stage_times() {
  end_stage
  echo "== stage times"
  local i
  for i in "${!stage_names[@]}"; do
    printf '  %-58s %5d s\n' "${stage_names[$i]}" "${stage_seconds[$i]}"
  done
  printf '  %-58s %5d s\n' "in all" $((SECONDS - run_started))
}

# Formatting first: it takes seconds, and a reformatted file in a failing build is noise.
stage "checks: clang-format, links, include cycles"
echo "== clang-format check"
find include src test examples bench tools -name '*.cpp' -o -name '*.hpp' | sort |
  xargs clang-format-14 --dry-run --Werror
echo "== links in README.md, CHANGELOG.md and docs/"
python3 scripts/check_links.py --self-test
python3 scripts/check_links.py
echo "== no include cycle in src/"
python3 scripts/check_include_cycles.py --self-test
python3 scripts/check_include_cycles.py

# No redis-server the tests start may outlive the run; other servers on the machine are none of our
# business: the system's (apt starts one on 127.0.0.1:6379), the user's, or those of another run of
# this script going on at the same time. Neither the address nor a list of the servers that existed
# before the run tells them apart (a concurrent run's servers are new and on loopback too), and the
# environment cannot mark them (redis-server overwrites it with its process title). Their working
# directory does: every server the fixtures start (test/support/redis_fleet.cpp, behind the tests,
# redis_nodes, the examples, the benchmarks and the demo) changes into its --dir, a directory of its
# own made under std::filesystem::temp_directory_path(), i.e. under $TMPDIR; and this run gets a
# TMPDIR of its own.
run_tmp="$(mktemp -d "${TMPDIR:-/tmp}/redlock-run-XXXXXX")"
# Resolved: /proc/PID/cwd shows the path without symbolic links.
run_tmp="$(cd "$run_tmp" && pwd -P)"
export TMPDIR="$run_tmp"

# The test suites mostly wait (for servers, timeouts, faults): about half of the two cores stays
# idle while they run. The next stage's build uses it, in the background at the lowest priority
# (nice 19), so that the suites still get a core whenever they ask; that is gentler than the busy
# loops the suite is also required to pass beside. Its output goes to a log, printed if it fails.
background_pid=""
background_log=""
start_in_background() {
  background_log="$1"
  shift
  echo "== in the background (log $background_log): $*"
  (renice -n 19 "$BASHPID" >/dev/null && "$@") >"$background_log" 2>&1 &
  background_pid=$!
}
wait_for_background() {
  [ -n "$background_pid" ] || return 0
  # Nothing runs in the foreground any more: the step gets its normal share of the cores back.
  # Beside other busy processes (a shared machine, the busy loops) a nice-19 build would
  # otherwise crawl at a few percent of a core. Raising priority needs root; without it the
  # step simply finishes at nice 19.
  renice -n 0 -g "$background_pid" >/dev/null 2>&1 || true
  local code=0
  wait "$background_pid" || code=$?
  background_pid=""
  if [ "$code" -ne 0 ]; then
    tail -n 200 "$background_log" >&2
    echo "test.sh: the background step failed (exit $code); its log: $background_log" >&2
    exit "$code"
  fi
  echo "== background step done ($background_log)"
}
stop_background() {
  if [ -n "$background_pid" ]; then
    kill -- "-$background_pid" 2>/dev/null || kill "$background_pid" 2>/dev/null || true
    wait "$background_pid" 2>/dev/null || true
  fi
}
# The background step runs in a process group of its own (set -m), so that stopping it stops the
# compilers it started too.
set -m
trap 'stop_background; rm -rf "$run_tmp"' EXIT

# Prints the pids of the redis-server processes whose working directory lies in $run_tmp (a
# directory removed meanwhile shows as "PATH (deleted)", which matches too). Other users' processes
# cannot be read, and are not ours.
servers_of_this_run() {
  local pid cwd
  for pid in $(pgrep -x redis-server); do
    cwd="$(readlink "/proc/$pid/cwd" 2>/dev/null)" || continue
    case "$cwd" in "$run_tmp"/*) echo "$pid" ;; esac
  done
}

# Debug information as line tables only (-g1): what backtraces and sanitizer reports print, at a
# fifth less compile time and a much smaller link than full -g.
release_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
# Its Debian packages put the libraries where Debian's multiarch layout has them
# (lib/x86_64-linux-gnu), as lintian asks; an install elsewhere (--prefix) uses the same subfolder.
release_flags+=("-DCMAKE_INSTALL_LIBDIR=lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)")
sanitize_flags=(-DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1
  -DREDLOCK_SANITIZE=address,undefined -DREDLOCK_BUILD_BENCH=OFF)
tsan_dir=build/tsan
fuzz_dir=build/fuzz
sanitize=1
[ "${REDLOCK_SKIP_SANITIZE:-0}" = "1" ] && sanitize=0

# ccache (installed by the bootstrap) compiles each unchanged source once: paths are hashed
# relative to the repository, so a fresh clone elsewhere reuses another clone's objects, and
# precompiled headers are cached too. REDLOCK_NO_CCACHE=1 measures a cold build.
# Precompiled headers and ccache do not mix: g++ writes a different precompiled header in every
# build tree, so each source that includes it misses the cache. With ccache, a fresh clone's rebuild
# of unchanged sources takes a second; without it, precompiled headers are the better choice.
build_cache_flags=(-DREDLOCK_PRECOMPILED_HEADERS=ON)
if [ "${REDLOCK_NO_CCACHE:-0}" != 1 ] && command -v ccache >/dev/null; then
  build_cache_flags=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DREDLOCK_PRECOMPILED_HEADERS=OFF)
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
fi

# lld (installed by the bootstrap) links the suite's programs about three times as fast as GNU ld:
# relinking every program of the release tree took 24 s with ld and 8 s with lld.
link_flags=()
if command -v ld.lld >/dev/null; then
  link_flags=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
    -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
fi

# configure_and_build DIR [--target T...] -- CMAKE_ARGS...
configure_and_build() {
  local dir="$1" targets=()
  shift
  while [ "$1" != "--" ]; do targets+=("$1"); shift; done
  shift
  echo "== configure $dir $*"
  cmake -S . -B "$dir" -DREDLOCK_WERROR=ON "${build_cache_flags[@]}" "${link_flags[@]}" "$@" \
    >/dev/null
  echo "== build $dir"
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
}

# Most suites wait (for servers to start, fail over, time out) far more than they compute: ctest
# runs twice as many at once as there are cores. What must not share the cores says so itself:
# the suites whose verdicts rest on time run alone (RUN_SERIAL), the busy ones one at a time and
# counted as two (RESOURCE_LOCK, PROCESSORS; test/CMakeLists.txt).
test_slots=$((jobs * 2))

# run_tests DIR [CTEST_EXCLUDE_REGEX]
# The simulation's entries compute all the time: one per core at once (`sim_slots`, their
# RESOURCE_GROUPS in test/sim/CMakeLists.txt), the other slots for the entries that wait.
run_tests() {
  local dir="$1" exclude="${2:-}"
  echo "== test $dir"
  local resources
  resources="$(cd "$dir" && pwd)/ctest-resources.json"  # ctest reads it from inside $dir
  printf '{"version": {"major": 1, "minor": 0}, "local": [{"sim_slots": [{"id": "0", "slots": %d}]}]}\n' \
    "$jobs" >"$resources"
  ctest --test-dir "$dir" --output-on-failure -j "$test_slots" --timeout 600 \
    --resource-spec-file "$resources" ${exclude:+-E "$exclude"}
}


# What the sanitizer stage builds: without the benchmarks (their drivers are not shipped, and the
# library paths they load are the suites').
build_sanitize() {
  configure_and_build build/sanitize -- "${sanitize_flags[@]}"
}

# What the ThreadSanitizer and fuzz stages build: only what they run.
build_tsan_and_fuzz() {
  configure_and_build "$tsan_dir" --target integration_tests_threaded example_06_multithreaded \
    redis_nodes -- "${release_flags[@]}" -DREDLOCK_SANITIZE=thread -DREDLOCK_BUILD_BENCH=OFF \
    -DREDLOCK_BUILD_TOOLS=OFF
  # Only the fuzzer is built with clang.
  configure_and_build "$fuzz_dir" --target resp_fuzz -- -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-14 -DREDLOCK_SANITIZE=address,undefined \
    -DREDLOCK_BUILD_BENCH=OFF -DREDLOCK_BUILD_TOOLS=OFF -DREDLOCK_BUILD_EXAMPLES=OFF
}

# Stage 1: the whole suite on a normal optimized build, with the benchmarks smoke-run and both
# demos (the README's first command); the sanitizer build meanwhile.
stage "release build"
configure_and_build build/release -- "${release_flags[@]}"
stage "docs: the API reference and the guide (Doxygen; any warning fails)"
cmake --build build/release --target docs
if [ "$sanitize" = 1 ]; then
  start_in_background "$run_tmp/build-sanitize.log" build_sanitize
fi
stage "release suite"
run_tests build/release
stage "benchmarks smoke-run, both demos"
echo "== smoke-run benchmarks build/release"
build/release/bench/resp_bench --quick >/dev/null
build/release/bench/pipeline_bench --quick >/dev/null
build/release/bench/redlock_bench --workload all --quick >/dev/null
echo "== demo (the README's first command) on build/release"
REDLOCK_DEMO_BUILD="$root/build/release" scripts/demo.sh >/dev/null
echo "== demo on a Redis Cluster of its own"
REDLOCK_DEMO_BUILD="$root/build/release" scripts/demo.sh --cluster --no-build >/dev/null
stage "client instructions per lock (callgrind, against bench/baseline.json)"
bench/instructions.py --bench build/release/bench/redlock_bench
# The Debian packages of the release tree, unpacked into a directory of their own (nothing is
# installed): a consumer builds and runs against them, and lintian finds no error.
stage "Debian packages (cpack): a consumer of the unpacked packages, lintian"
scripts/check_packages.sh build/release

if [ "$sanitize" = 1 ]; then
  # Stage 2: the suite under ASan+UBSan; the ThreadSanitizer and fuzz builds meanwhile.
  stage "ASan+UBSan build (what the release suite did not hide)"
  wait_for_background
  # halt_on_error and no recovery: any sanitizer report fails the run.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  start_in_background "$run_tmp/build-tsan-fuzz.log" build_tsan_and_fuzz
  # Without the packaging tests (cmake.*): the release stage has checked the package,
  # cmake.add_subdirectory builds the library with flags of its own, never this build's, and the
  # others would only run their small consumer program once more.
  stage "ASan+UBSan suite"
  run_tests build/sanitize '^cmake\.'
  stage "ThreadSanitizer and fuzz builds (what was not hidden)"
  wait_for_background

  # Stage 3, under ThreadSanitizer: the tests that run the client on several threads (labelled
  # "threaded": a strand of several threads, futures waited for on other threads, leases destroyed
  # off the executor, read-write locks and sets of locks of two clients on strands of four
  # threads), the lock-core suites (lock, lease_renewal, with_lock_scope, cancellation,
  # completion_tokens), the lease_handle and client_shutdown suites (whose handlers and fixtures
  # cross threads: the chaos proxies and servers' helpers run on threads of their own), and the
  # multithreaded example.
  stage "ThreadSanitizer suites"
  echo "== test $tsan_dir (ThreadSanitizer)"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/test/tsan.supp"
  tsan_suites=@threaded:lock:lease_renewal:with_lock_scope:cancellation:completion_tokens:lease_handle:client_shutdown
  "$tsan_dir/test/integration_tests_threaded" --run_test="$tsan_suites" --log_level=message \
    --report_level=short
  "$tsan_dir/test/support/redis_nodes" --count 5 --quiet -- "$tsan_dir/examples/06_multithreaded" >/dev/null

  # Stage 4: the RESP parser, the one piece that reads bytes from the network, under libFuzzer
  # with ASan and UBSan: the checked-in corpus first, then new inputs for a bounded time. New
  # inputs it finds stay in the build tree; a crash fails the run and leaves its input there
  # (crash-*), to be added to test/fuzz/corpus once fixed.
  # One worker process per core (libFuzzer's fork mode): on two cores it runs about four times
  # as many inputs a second as a single process did (which left the other core idle), so 60 s
  # try more inputs than 120 s did. The first crash stops the run.
  stage "fuzz the RESP parser"
  echo "== fuzz the RESP parser for ${REDLOCK_FUZZ_SECONDS:-60} s on $jobs workers"
  mkdir -p "$fuzz_dir/corpus-work" "$fuzz_dir/artifacts"
  "$fuzz_dir/test/fuzz/resp_fuzz" -fork="$jobs" -max_total_time="${REDLOCK_FUZZ_SECONDS:-60}" \
    -artifact_prefix="$fuzz_dir/artifacts/" \
    "$fuzz_dir/corpus-work" test/fuzz/corpus 2>"$fuzz_dir/fuzz.log" ||
    { tail -40 "$fuzz_dir/fuzz.log" >&2; exit 1; }
  # The last progress line: inputs run, coverage, corpus size, inputs a second.
  grep -E '^#[0-9]+: cov:' "$fuzz_dir/fuzz.log" | tail -1 || true
fi

# The servers are stopped by their fixtures, or killed by the kernel when the test process that
# started them dies (a parent-death signal, delivered asynchronously): give the latter a moment.
for _ in 1 2 3 4 5 6 7 8 9 10; do
  leftover="$(servers_of_this_run)"
  [ -z "$leftover" ] && break
  sleep 0.2
done
if [ -n "$leftover" ]; then
  echo "test.sh: redis-server processes were left running by the tests:" >&2
  ps -o pid=,args= -p "${leftover//$'\n'/,}" >&2 || true
  exit 1
fi
print_stage_times
echo "== all tests passed"
