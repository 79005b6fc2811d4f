#!/usr/bin/env bash
# Runs on the device machine with carried binaries (see device-profile.sh): the GPU tests, then
# `bench moe` of each kernel version (the first of NVFP4_MOE_VERSIONS at both precisions, the
# others at W4A16) beside the BF16 torch._grouped_mm baseline, per shape, plus a sweep of the 64-row
# tile switch (NVFP4_MOE_TILE64_ROWS). Outputs under $OUT, tarred to $OUT/kernels.tgz.
#   NVFP4_BIN, NVFP4_TESTS, NVFP4_COMMIT as for device-profile.sh; NVFP4_MOE_SHAPES (empty: no bench),
#   NVFP4_MOE_TOKENS, NVFP4_MOE_VERSIONS (default "v25 v16"; v25 is the default kernel), NVFP4_MOE_SWEEP (switch values,
#   default "16 48"; empty: none), NVFP4_MOE_ROUTER_BIAS (DeepSeek-V3's --router-bias, default 0).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/out/kernels}
res=$OUT/res
mkdir -p "$res"
. tests/gpu/device-env.sh
rc=0
if [ -z "${NVFP4_SKIP_TESTS:-}" ]; then # NVFP4_SKIP_TESTS=1: the bench only
OUT=$res bash tests/gpu/device-profile.sh test || rc=1
if bash tests/cli/moe/cuda.sh >"$res/moe-cuda.log" 2>&1; then echo "PASS cli/moe/cuda"; else
    echo "FAIL cli/moe/cuda"; tail -20 "$res/moe-cuda.log"; rc=1; fi
if bash tests/cli/verify/cuda.sh >"$res/verify-cuda.log" 2>&1; then echo "PASS cli/verify/cuda"; else
    echo "FAIL cli/verify/cuda"; tail -20 "$res/verify-cuda.log"; rc=1; fi
grep "kernel rel-L2" "$res/verify-cuda.log" | head -8
# Prepared targets (the pack lays scales out through the backend: on the GPU with --device
# cuda) and their inverse: --device cpu and cuda write the same bytes.
pc=$(mktemp -d)
"$BIN" synth "$pc/src" --preset qwen3-moe --dtype fp8-block --layers 2 --experts 8 --quiet
for args in "--target prepared-w4a16" "--target prepared-w4a4 --scale-layout 8x4" \
    "--target prepared-w4a16 --ep 2"; do
    for d in cpu cuda; do
        rm -rf "$pc/$d"
        "$BIN" convert "$pc/src" "$pc/$d" $args --device $d --quiet >/dev/null ||
            { echo "prepared cmp: convert $args --device $d failed"; rc=1; }
    done
    if diff -r "$pc/cpu" "$pc/cuda" >/dev/null; then echo "prepared cmp: $args: cpu and cuda identical"
    else echo "prepared cmp: $args: cpu and cuda DIFFER"; rc=1; fi
    for d in cpu cuda; do
        rm -rf "$pc/inv-$d"
        "$BIN" convert "$pc/cpu" "$pc/inv-$d" --target modelopt --device $d --quiet >/dev/null ||
            { echo "inverse: --device $d failed"; rc=1; }
    done
    if diff -r "$pc/inv-cpu" "$pc/inv-cuda" >/dev/null; then echo "inverse cmp: $args: cpu and cuda identical"
    else echo "inverse cmp: $args: cpu and cuda DIFFER"; rc=1; fi
done
rm -rf "$pc"
fi
tokens=${NVFP4_MOE_TOKENS:-1,8,16,128,512,1024,2048,4096}
versions=${NVFP4_MOE_VERSIONS:-v25 v16}
summary() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    print("%-28s %5d %-5s %8.3f ms  bf16 %7.3f  x%5.2f  %4.0f%% copy  %6.1f TFLOP/s" % (
        sys.argv[2], r["tokens"], r["precision"], r["ms"], r.get("bf16_ms", 0),
        r.get("speedup_vs_bf16", 0), r["pct_of_copy"], r["tflops"]))
PY
}
for s in ${NVFP4_MOE_SHAPES-deepseek-v3 qwen3-30b-a3b gpt-oss-120b}; do
    rb=()
    [ "$s" = deepseek-v3 ] && rb=(--router-bias "${NVFP4_MOE_ROUTER_BIAS:-0}")
    python3 bench/moe_baseline.py --shape "$s" --tokens "$tokens" "${rb[@]}" --out "$res/bf16-$s.json" \
        >"$res/bf16-$s.log" 2>&1 || { echo "baseline $s failed"; tail -5 "$res/bf16-$s.log"; rc=1; }
    for v in $versions; do
        prec=w4a16
        [ "$v" = "${versions%% *}" ] && prec=all
        NVFP4_MOE_GEMM=$v "$BIN" bench moe --device cuda --shape "$s" --tokens "$tokens" "${rb[@]}" \
            --precision $prec --baseline "$res/bf16-$s.json" --json >"$res/moe-$v-$s.json" \
            2>"$res/moe-$v-$s.err" || { echo "bench $v $s failed"; tail -5 "$res/moe-$v-$s.err"; rc=1; }
        summary "$res/moe-$v-$s.json" "$v $s"
    done
    for sw in ${NVFP4_MOE_SWEEP-16 48}; do
        NVFP4_MOE_TILE64_ROWS=$sw "$BIN" bench moe --device cuda --shape "$s" --tokens "$tokens" "${rb[@]}" \
            --precision w4a16 --baseline "$res/bf16-$s.json" --json >"$res/moe-sw$sw-$s.json" \
            2>"$res/moe-sw$sw-$s.err" || { echo "bench sw$sw $s failed"; rc=1; }
        summary "$res/moe-sw$sw-$s.json" "tile64>=$sw $s"
    done
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >"$res/smi.txt" 2>&1
tar czf "$OUT/kernels.tgz" -C "$res" .
exit $rc
