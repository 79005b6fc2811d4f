#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time (ctest's libfuzzer/<parser>, registered in a build
# with -DNVFP4_FUZZ=ON, which scripts/fuzz.sh makes with clang):
#   run_libfuzzer.sh FUZZER CORPUS_DIR [MAX_LEN]
# The corpus is copied to a temporary directory first, so that the inputs the fuzzer adds never
# reach the repository. NVFP4_FUZZ_SECONDS (default 20) bounds the run. A crash, a leak, a
# sanitizer report, a timeout (10 s on one input) or more than 2 GiB of memory fails the test;
# the input that did it is printed (hex) so that it can be added to the corpus as a regression
# case.
set -euo pipefail
fuzzer=$1 corpus=$2 max_len=${3:-8192}
seconds=${NVFP4_FUZZ_SECONDS:-20}
[ -x "$fuzzer" ] || { echo "no fuzzer binary '$fuzzer': skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/corpus" "$tmp/artifacts"
cp "$corpus"/* "$tmp/corpus/"
n0=$(find "$tmp/corpus" -type f | wc -l)
rc=0
# -fork and -jobs stay off: one process on one core, the time bound is the whole run's.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1" \
    "$fuzzer" "$tmp/corpus" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$tmp/artifacts/" >"$tmp/log" 2>&1 || rc=$?
grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "$tmp/log" ||
    true
if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$tmp/artifacts")" ]; then
    tail -n 60 "$tmp/log"
    for a in "$tmp"/artifacts/*; do
        [ -f "$a" ] || continue
        echo "--- $(basename "$a") ($(stat -c %s "$a") bytes; add it to $corpus):"
        head -c 4096 "$a" | od -An -tx1 | head -n 64
    done
    echo "$(basename "$fuzzer"): failed (exit $rc) after ${seconds} s at most" >&2
    exit 1
fi
n1=$(find "$tmp/corpus" -type f | wc -l)
echo "$(basename "$fuzzer"): ${seconds} s, no failure; corpus $n0 -> $n1 inputs (not kept)"
