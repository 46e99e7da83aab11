#!/usr/bin/env bash
# Installs what building and testing redlock-asio needs (prometheus-cpp for the metrics component
# redlock::prometheus among it; Lua 5.1 and rapidcheck for the simulation, test/sim), with apt-get,
# and only what is missing; and ccache and lld, with which scripts/test.sh skips recompiling what
# has not changed (also in another clone of the repository) and links faster; dpkg-dev, lintian
# and groff-base for the Debian packages and the manual page (scripts/check_packages.sh, ctest).
# Safe to run any number of times: when everything is present it changes nothing.
#
#   scripts/bootstrap.sh           what building and testing need (valgrind among it: the suite
#                                  counts the client's instructions per lock with callgrind)
#   scripts/bootstrap.sh --docs    and Doxygen, for the docs target (the API reference)
#   scripts/bootstrap.sh --plots   and matplotlib, for bench/plot.py's figures
set -euo pipefail

packages=(
  cmake make g++ pkg-config
  libboost1.81-dev libboost-test1.81-dev libfmt-dev libssl-dev openssl libcli11-dev
  redis-server redis-tools
  clang-14 libclang-rt-14-dev clang-format-14
  prometheus-cpp-dev
  liblua5.1-0-dev librapidcheck-dev
  python3
  ccache lld
  valgrind
  dpkg-dev lintian groff-base
)
for option in "$@"; do
  case "$option" in
    --docs) packages+=(doxygen) ;;
    --plots) packages+=(python3-matplotlib) ;;
    *)
      echo "bootstrap.sh: unknown argument \"$option\" (expected --docs or --plots)" >&2
      exit 2
      ;;
  esac
done

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bootstrap: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
