#!/usr/bin/env bash
# Runs on the device machine with carried binaries (see device-profile.sh): everything a
# session's closing claims need, most important first, each phase's files tarred as soon as it
# ends (so a call cut short still returns what it finished):
#   1. the GPU tests, moe/verify --device cuda, prepared/inverse CPU = CUDA (device-kernels.sh
#      without bench) -> $OUT/tests.tgz (unless NVFP4_SKIP_TESTS=1);
#   2. moe --device cuda of this build against NVFP4_OLD_BIN, bit for bit (device-cmp-bin.sh);
#   3. bench moe (kernels NVFP4_MOE_VERSION, default "v13 v10") beside the BF16 baseline, DeepSeek-V3,
#      then per-step medians -> $OUT/moe-ds.tgz;
#   3b. with NVFP4_MOE_TILE_SWEEP (values of NVFP4_MOE_TILE64_ROWS, e.g. "8 4"): gpu_test_moe_cuda
#      under each, then bench moe (DeepSeek-V3) of NVFP4_OLD_BIN (when set), of this build and of
#      this build under each value, interleaved twice (A B C A B C) -> $OUT/tiles.tgz;
#   4. bench moe beside the baseline for the other shapes -> $OUT/moe-other.tgz (unless
#      NVFP4_SKIP_OTHERS=1);
#   5. the large conversion (device-convert.sh large; sweeps NVFP4_CONVERT_WRITER_SWEEP, default
#      "1 4", and NVFP4_CONVERT_WRITEBACK_SWEEP; NVFP4_CONVERT_TIMEOUT seconds, default 260) -> $OUT/cv.tgz
#      (unless NVFP4_SKIP_CONVERT=1).
# Everything printed goes to $OUT/log.txt too.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/final}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
. tests/gpu/device-env.sh
w=$(mktemp -d)
phase() { echo "== $(date +%T) $*"; }
# What makes hosts of this kind differ in the conversion rates: cores per physical core, the
# kernel's dirty-page limits (writes into the page cache are throttled to the disk's pace past
# them) and the filesystem the outputs go to.
echo "host: $(nproc) CPUs, $(lscpu 2>/dev/null | awk -F: '/Thread\(s\) per core/ {gsub(/ /, "", $2); print $2}') threads per core;" \
    "vm.dirty_ratio $(cat /proc/sys/vm/dirty_ratio) background $(cat /proc/sys/vm/dirty_background_ratio);" \
    "work dir on $(df -T "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR == 2 {print $2}');" \
    "memory $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
if [ -z "${NVFP4_SKIP_TESTS:-}" ]; then # NVFP4_SKIP_TESTS=1: not the tests (a repeat call)
    phase tests
    NVFP4_MOE_SHAPES= OUT=$w/tests timeout 200 bash tests/gpu/device-kernels.sh
    echo "tests rc=$?"
    tar czf "$OUT/tests.tgz" -C "$w/tests" res
fi
if [ -n "${NVFP4_OLD_BIN:-}" ]; then
    phase cmp
    timeout 60 bash tests/gpu/device-cmp-bin.sh
    echo "cmp rc=$?"
fi
phase moe deepseek-v3
NVFP4_SKIP_TESTS=1 NVFP4_MOE_SHAPES=deepseek-v3 NVFP4_MOE_VERSIONS=${NVFP4_MOE_VERSION:-v13 v10} NVFP4_MOE_SWEEP= OUT=$w/ds \
    timeout 150 bash tests/gpu/device-kernels.sh >"$w/ds.txt" 2>&1
echo "moe rc=$?"
grep -E "^v[0-9] |baseline|failed" "$w/ds.txt"
NVFP4_MOE_STAGE_EVENTS=1 timeout 40 "$BIN" bench moe --device cuda --shape deepseek-v3 \
    --tokens 1,16,128,512,4096 --precision w4a16 2>&1 | grep -E "step medians|^ +[0-9]"
cp "$w/ds.txt" "$w/ds/res/"
tar czf "$OUT/moe-ds.tgz" -C "$w/ds" res
if [ -n "${NVFP4_MOE_TILE_SWEEP:-}" ]; then
    phase tiles
    mkdir -p "$w/tiles"
    TESTS=$PWD/${NVFP4_TESTS:-build-gpu/tests}
    for v in $NVFP4_MOE_TILE_SWEEP; do
        if NVFP4_MOE_TILE64_ROWS=$v timeout 60 "$TESTS/gpu_test_moe_cuda" >"$w/tiles/test-$v.log" 2>&1
        then echo "PASS gpu_test_moe_cuda NVFP4_MOE_TILE64_ROWS=$v"
        else echo "FAIL gpu_test_moe_cuda NVFP4_MOE_TILE64_ROWS=$v"; tail -5 "$w/tiles/test-$v.log"; fi
    done
    for round in 1 2; do
        for v in ${NVFP4_OLD_BIN:+old} default $NVFP4_MOE_TILE_SWEEP; do
            for p in w4a16 w4a4; do
                [ "$p" = w4a4 ] && [ "$round" = 2 ] && continue
                f=$w/tiles/moe-$v-$p-r$round.json
                bin=$BIN
                [ "$v" = old ] && bin=$PWD/$NVFP4_OLD_BIN
                env $([ "$v" = default ] || [ "$v" = old ] || echo NVFP4_MOE_TILE64_ROWS=$v) \
                    timeout 60 "$bin" bench moe \
                    --device cuda --shape deepseek-v3 --tokens 64,128,256,512,1024,2048,4096 \
                    --precision $p --json >"$f" 2>/dev/null || { echo "bench tiles $v failed"; continue; }
                python3 - "$f" "tile64 from $v $p r$round" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2] + ": " + "  ".join("%d:%.3f" % (r["tokens"], r["ms"]) for r in d["results"]))
PY
            done
        done
    done
    tar czf "$OUT/tiles.tgz" -C "$w" tiles
fi
if [ -z "${NVFP4_SKIP_OTHERS:-}" ]; then # NVFP4_SKIP_OTHERS=1: not the other shapes
    phase moe others
    NVFP4_SKIP_TESTS=1 NVFP4_MOE_SHAPES="qwen3-30b-a3b gpt-oss-120b" NVFP4_MOE_VERSIONS=${NVFP4_MOE_VERSION:-v13 v10} \
        NVFP4_MOE_SWEEP= OUT=$w/other timeout 200 bash tests/gpu/device-kernels.sh >"$w/other.txt" 2>&1
    echo "moe others rc=$?"
    grep -E "^v[0-9] |failed" "$w/other.txt"
    cp "$w/other.txt" "$w/other/res/" 2>/dev/null
    tar czf "$OUT/moe-other.tgz" -C "$w/other" res
fi
if [ -z "${NVFP4_SKIP_CONVERT:-}" ]; then # NVFP4_SKIP_CONVERT=1: not the conversion
    phase convert
    mkdir -p "$w/cv"
    NVFP4_CONVERT_WRITER_SWEEP=${NVFP4_CONVERT_WRITER_SWEEP-1 4} NVFP4_TOOL=$BIN OUT=$w/cv \
        timeout "${NVFP4_CONVERT_TIMEOUT:-260}" bash tests/gpu/device-convert.sh large >"$w/cv/convert.txt" 2>&1
    echo "convert rc=$?"
    grep -E "identical|DIFFER|cold|cached|floor|writers" "$w/cv/convert.txt" | head -20
    head -4 "$w/cv/convert-profile-cuda.txt" 2>/dev/null
    for f in "$w"/cv/convert-profile-writeback-*-cuda.txt; do [ -e "$f" ] && sed -n 1,4p "$f"; done
    tar czf "$OUT/cv.tgz" -C "$w" cv
fi
phase done
