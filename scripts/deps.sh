#!/usr/bin/env bash
# Install the Debian packages the build and the tests need, when they are missing and we are
# root. Anyone else gets the apt-get line to run.
#   bash scripts/deps.sh          the build and test dependencies (a missing one is an error)
#   bash scripts/deps.sh slurm    only Slurm (slurmctld, slurmd, the client) and munge, for the
#                                 optional single-node Slurm test (tests/slurm/setup.sh)
# Exit 0 when everything asked for is installed, 1 when something is missing and cannot be
# installed here (not root, or apt-get failed).
set -euo pipefail

# clang and libclang-rt-14-dev: the libFuzzer stage (scripts/fuzz.sh); valgrind: the memcheck
# test (tests/valgrind/memcheck.sh).
pkgs=(cmake make gcc pkg-config zlib1g-dev libssl-dev libyaml-dev libcjson-dev
      python3 python3-jsonschema python3-yaml clang libclang-rt-14-dev valgrind)
for group in "$@"; do
    case "$group" in
    slurm) pkgs=(slurm-wlm slurmctld slurmd slurm-client munge) ;;
    *)
        echo "deps: unknown package group '$group' (known: slurm)" >&2
        exit 2
        ;;
    esac
done
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
apt-get install -y -qq -o DPkg::Lock::Timeout=120 --no-install-recommends "${missing[@]}" >&2
