#!/usr/bin/env bash
# Install the Debian packages the build and the tests need, when they are missing and we are
# root. Anyone else gets the apt-get line to run.
set -euo pipefail

# clang and libclang-rt-14-dev: the libFuzzer stage (scripts/fuzz.sh); valgrind: the memcheck
# test (tests/valgrind/memcheck.sh).
pkgs=(cmake make gcc pkg-config zlib1g-dev libssl-dev libyaml-dev libcjson-dev
      python3 python3-jsonschema python3-yaml clang libclang-rt-14-dev valgrind)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing Debian packages: ${missing[*]}" >&2
    echo "deps: run as root: apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
