#!/usr/bin/env bash
# Runs on the device machine with binaries built elsewhere and carried (see device-profile.sh):
# the GPU tests, `moe --device cuda` against the CPU on the transformers-written checkpoints
# (tests/cli/moe/cuda.sh), and `bench moe` beside the BF16 torch._grouped_mm baseline
# (bench/moe_baseline.py) for each shape. Writes to $OUT.
#   NVFP4_BIN, NVFP4_TESTS, NVFP4_COMMIT as for device-profile.sh; NVFP4_MOE_SHAPES (default all
#   three) and NVFP4_MOE_TOKENS (default 1,2,4,...,4096).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/moe}
mkdir -p "$OUT"
. tests/gpu/device-env.sh
rc=0
OUT=$OUT bash tests/gpu/device-profile.sh test || rc=1
if bash tests/cli/moe/cuda.sh >"$OUT/moe-cuda.log" 2>&1; then echo "PASS cli/moe/cuda"; else
    echo "FAIL cli/moe/cuda"; tail -20 "$OUT/moe-cuda.log"; rc=1; fi
grep -i "rel" "$OUT/moe-cuda.log" | head -20
tokens=${NVFP4_MOE_TOKENS:-1,2,4,8,16,32,64,128,256,512,1024,2048,4096}
for s in ${NVFP4_MOE_SHAPES:-deepseek-v3 qwen3-30b-a3b gpt-oss-120b}; do
    python3 bench/moe_baseline.py --shape "$s" --tokens "$tokens" --out "$OUT/bf16-$s.json" \
        >"$OUT/bf16-$s.log" 2>&1 || { echo "baseline $s failed"; tail -5 "$OUT/bf16-$s.log"; rc=1; }
    "$BIN" bench moe --device cuda --shape "$s" --tokens "$tokens" --baseline "$OUT/bf16-$s.json" \
        --json >"$OUT/moe-$s.json" 2>"$OUT/moe-$s.err" || { echo "bench moe $s failed"; tail -5 "$OUT/moe-$s.err"; rc=1; }
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])))[:6000])' "$OUT/moe-$s.json"
done
exit $rc
