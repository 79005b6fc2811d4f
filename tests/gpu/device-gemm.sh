#!/usr/bin/env bash
# Runs on the device machine with carried binaries (see device-profile.sh): kernel versions side
# by side, for GEMM work. Per version in NVFP4_MOE_VERSIONS (default "v4 v2"): gpu_test_moe_cuda
# under NVFP4_MOE_GEMM=version, then `bench moe` (W4A16, no baseline) on NVFP4_MOE_SHAPES
# (default deepseek-v3) at NVFP4_MOE_TOKENS, the versions interleaved twice (A B A B) so that a
# drift of the machine shows; then tests/gpu/device-ncu.sh times for the first version and, with
# NVFP4_GEMM_NCU=1, its sections. Outputs under $OUT, tarred to $OUT/gemm.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/gemm}
res=$OUT/res
mkdir -p "$res"
. tests/gpu/device-env.sh
TESTS=$PWD/${NVFP4_TESTS:-build-gpu/tests}
versions=${NVFP4_MOE_VERSIONS:-v4 v2}
tokens=${NVFP4_MOE_TOKENS:-1,16,64,128,256,512,1024,4096}
rc=0
echo "commit ${NVFP4_COMMIT:-unknown}" | tee "$res/commit.txt"
for v in $versions; do
    if NVFP4_MOE_GEMM=$v "$TESTS/gpu_test_moe_cuda" >"$res/test-moe-$v.log" 2>&1; then
        echo "PASS gpu_test_moe_cuda $v"
    else
        echo "FAIL gpu_test_moe_cuda $v"; tail -20 "$res/test-moe-$v.log"; rc=1
    fi
done
for round in 1 2; do
    for s in ${NVFP4_MOE_SHAPES:-deepseek-v3}; do
        for v in $versions; do
            f=$res/moe-$v-$s-r$round.json
            NVFP4_MOE_GEMM=$v "$BIN" bench moe --device cuda --shape "$s" --tokens "$tokens" \
                --precision w4a16 --json >"$f" 2>"$res/moe-$v-$s-r$round.err" ||
                { echo "bench $v $s failed"; tail -5 "$res/moe-$v-$s-r$round.err"; rc=1; continue; }
            python3 - "$f" "$v $s r$round" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2] + ": " + "  ".join("%d:%.3f(%.0f%%)" % (r["tokens"], r["ms"], r["pct_of_copy"])
                                    for r in d["results"]))
PY
        done
    done
done
first=${versions%% *}
NVFP4_MOE_GEMM=$first NVFP4_NCU_MODE=times OUT=$res/ncu-times bash tests/gpu/device-ncu.sh || rc=1
if [ "${NVFP4_GEMM_NCU:-0}" = 1 ]; then
    NVFP4_MOE_GEMM=$first OUT=$res/ncu bash tests/gpu/device-ncu.sh || rc=1
fi
tar czf "$OUT/gemm.tgz" -C "$res" .
exit $rc
