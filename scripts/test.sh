#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run): a Release build (CUDA kernels compiled when nvcc
# exists; GPU tests skip without a GPU) and a Debug ASan+UBSan build, both with warnings as errors
# (-DNVFP4_WERROR=ON), each followed by ctest; then the libFuzzer stage (scripts/fuzz.sh: a
# clang build of the fuzz targets, each run for 20 s), skipped with the reason without clang.
# As root it also installs Slurm (slurm-wlm, munge) for the one-node Slurm test (tests/slurm).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# Slurm for tests/slurm/slurm_array.sh, when it can be installed (root, apt-get reachable);
# where not, that test reports SKIP with the reason.
bash tests/slurm/setup.sh install || echo "test.sh: Slurm not installed; tests/slurm will skip" >&2
jobs=$(nproc 2>/dev/null || echo 2)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DNVFP4_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNVFP4_SANITIZE=ON -DNVFP4_CUDA=OFF \
    -DNVFP4_WERROR=ON >/dev/null
cmake --build build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"

rc=0
bash scripts/fuzz.sh build-fuzz || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"
