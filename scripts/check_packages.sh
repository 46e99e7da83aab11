#!/usr/bin/env bash
# Makes the Debian packages of a build tree (cpack -G DEB) and checks them without installing
# anything on the machine: both are unpacked (dpkg-deb -x) into a directory of the build tree,
# the consumer project of test/cmake is built against that root with find_package and with
# pkg-config's flags and run (against a closed port, a bad node list and, when the tree has the
# redis_nodes launcher, three redis-server nodes of its own), the unpacked redlock --version runs,
# and lintian must find no error in either package. scripts/test.sh runs it after the release
# suite.
#
#   scripts/check_packages.sh [BUILD_DIR]    default: build/release, built already (cpack builds
#                                            what is missing first, one job at a time)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build/release}" && pwd)"
[ -f "$build/CPackConfig.cmake" ] || {
  echo "check_packages.sh: $build has no CPack configuration (configure it first)" >&2
  exit 2
}

# In the build tree rather than under /tmp: the same paths on every run let ccache reuse the
# consumer's objects. Removed on the way out, whatever happens.
work="$build/package-check"
rm -rf "$work"
mkdir -p "$work"
lintian_pid=""
trap '[ -z "$lintian_pid" ] || kill "$lintian_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

# Each step's line says when it began, in seconds since the start.
started=$SECONDS
step() {
  echo "== [$((SECONDS - started)) s] $*"
}

# cache NAME: a value of the build tree's CMakeCache.txt.
cache() {
  sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1
}

step "cpack -G DEB in $build"
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB >"$work/cpack.log" 2>&1) || {
  cat "$work/cpack.log" >&2
  exit 1
}
dev=("$build"/packages/libredlock-asio-dev_*.deb)
tools=("$build"/packages/redlock-tools_*.deb)
if [ ! -f "${dev[0]}" ] || [ ! -f "${tools[0]}" ] || [ ${#dev[@]} -ne 1 ] || [ ${#tools[@]} -ne 1 ]; then
  echo "check_packages.sh: expected one libredlock-asio-dev and one redlock-tools package:" >&2
  ls -l "$build/packages" >&2
  exit 1
fi
for deb in "${dev[0]}" "${tools[0]}"; do
  echo "== $(basename "$deb"): $(du -k "$deb" | cut -f1) KiB"
  dpkg-deb --field "$deb" Package Version Architecture Installed-Size Depends Recommends Suggests |
    sed 's/^/  /'
  dpkg-deb -x "$deb" "$work/root"
done

# What each package must hold beside what run_consumer.cmake checks.
for file in usr/bin/redlock usr/share/man/man1/redlock.1.gz \
  usr/share/bash-completion/completions/redlock usr/share/doc/redlock-tools/copyright \
  usr/share/doc/libredlock-asio-dev/copyright usr/include/redlock/redlock.hpp; do
  [ -f "$work/root/$file" ] || {
    echo "check_packages.sh: the packages hold no /$file" >&2
    exit 1
  }
done
# lintian reads the packages for most of a minute on one core: it runs beside the consumer's build.
# Errors fail; warnings and the rest are printed for a reader. --allow-root: CI runs as root,
# which lintian otherwise only warns about.
lintian_options=(--fail-on error --tag-display-limit 0)
[ "$(id -u)" -eq 0 ] && lintian_options+=(--allow-root)
lintian "${lintian_options[@]}" "${dev[0]}" "${tools[0]}" >"$work/lintian.log" 2>&1 &
lintian_pid=$!

step "$work/root/usr/bin/redlock --version"
"$work/root/usr/bin/redlock" --version

step "the consumer project against the unpacked packages (find_package, pkg-config)"
prometheus=OFF
[ -f "$work/root/usr/$(cache CMAKE_INSTALL_LIBDIR)/libredlock_prometheus.a" ] && prometheus=ON
redis_nodes=""
[ -x "$build/test/support/redis_nodes" ] && redis_nodes="$build/test/support/redis_nodes"
cmake -DMODE=unpacked -DPREFIX="$work/root/usr" \
  -DSOURCE_DIR="$root" -DBINARY_DIR="$build" -DWORK_DIR="$work/consumer" \
  -DGENERATOR="$(cache CMAKE_GENERATOR)" -DMAKE_PROGRAM="$(cache CMAKE_MAKE_PROGRAM)" \
  -DCXX_COMPILER="$(cache CMAKE_CXX_COMPILER)" \
  -DCXX_COMPILER_LAUNCHER="$(cache CMAKE_CXX_COMPILER_LAUNCHER)" \
  -DVERSION="$(cache CMAKE_PROJECT_VERSION)" -DINCLUDEDIR="$(cache CMAKE_INSTALL_INCLUDEDIR)" \
  -DLIBDIR="$(cache CMAKE_INSTALL_LIBDIR)" -DBINDIR="$(cache CMAKE_INSTALL_BINDIR)" \
  -DPKG_CONFIG="$(command -v pkg-config || true)" -DCLI_NAME=redlock \
  -DPROMETHEUS="$prometheus" -DREDIS_NODES="$redis_nodes" \
  -P "$root/test/cmake/run_consumer.cmake" >"$work/consumer.log" 2>&1 || {
  cat "$work/consumer.log" >&2
  exit 1
}
grep -E 'cmake.unpacked: passed|pkg-config --cflags|the installed CLI runs|against 3 redis-server' "$work/consumer.log" |
  sed 's/^-- /  /'

step "lintian"
lintian_code=0
wait "$lintian_pid" || lintian_code=$?
lintian_pid=""
sed 's/^/  /' "$work/lintian.log"
if [ "$lintian_code" -ne 0 ]; then
  echo "check_packages.sh: lintian failed (exit $lintian_code): errors in the packages" >&2
  exit 1
fi
step "packages checked: $(basename "${dev[0]}"), $(basename "${tools[0]}")"
