#!/usr/bin/env bash
# The libFuzzer stage of the suite (scripts/test.sh runs it after the two ctest builds): a third,
# small build with clang (-DNVFP4_FUZZ=ON: the library and the fuzz targets only, ASan+UBSan,
# no CUDA), then each tests/fuzz/fuzz_<parser>.c target under libFuzzer for NVFP4_FUZZ_SECONDS
# (default 20) on a temporary copy of its corpus (ctest -L libfuzzer, two at a time).
#   scripts/fuzz.sh [BUILD_DIR]        (default build-fuzz)
# Exit 77 with the reason when clang or its libFuzzer runtime is missing (scripts/deps.sh
# installs both).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
cc=$(command -v clang || true)
[ -n "$cc" ] || { echo "fuzz: SKIPPED: clang not found (apt-get install clang libclang-rt-14-dev)"; exit 77; }
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
    >"$probe/p.c"
"$cc" -fsanitize=fuzzer,address,undefined -o "$probe/p" "$probe/p.c" 2>"$probe/err" || {
    echo "fuzz: SKIPPED: $cc cannot link -fsanitize=fuzzer (libclang-rt-14-dev missing?): $(head -c 300 "$probe/err")"
    exit 77
}
targets=()
for src in tests/fuzz/fuzz_*.c; do
    targets+=("$(basename "$src" .c)")
done
CC="$cc" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNVFP4_FUZZ=ON \
    -DNVFP4_CUDA=OFF -DNVFP4_WERROR=ON >/dev/null
cmake --build "$build" -j 2 --target "${targets[@]}"
ctest --test-dir "$build" --output-on-failure -j 2 -L libfuzzer
