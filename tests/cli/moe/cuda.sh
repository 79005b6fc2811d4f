#!/usr/bin/env bash
# moe --device cuda (the routed experts on the GPU kernels, from the prepared layout built from
# the layer's NVFP4 values) against the CPU reference on the same NVFP4 checkpoint: each
# transformers-written model converted to ModelOpt NVFP4, run W4A16 (as stored) and W4A4 (its
# input_scale) on both devices: rel-L2 <= 1e-3 (W4A16) and <= 1e-2 (W4A4; an FC1 output whose
# BF16 rounding differs by the summation order can take the neighbouring E2M1 value), the
# output's metadata the same; a BF16 checkpoint without --precision is refused on the GPU
# (exit 1: the kernels run NVFP4 experts). Without a GPU: skipped (77; errors.sh checks exit 4).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/../lib.sh"
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "no GPU: skipped"
    exit 77
fi
check() { "$NVFP4_PYTHON" "$here/moe_check.py" "$@"; }
below() { "$NVFP4_PYTHON" -c "import sys; sys.exit(0 if float('$1') <= $2 else 1)"; }
for f in deepseek_v3 qwen2_moe mixtral qwen3_moe; do
    d=$NVFP4_TESTDATA/moe/$f
    scope=()
    [ $f = mixtral ] && scope=(--include '*.block_sparse_moe.experts.*')
    rm -rf "$tmp/nv"
    "$NVFP4TOOL" convert "$d" "$tmp/nv" "${scope[@]}" --quiet >/dev/null
    for p in w4a16 w4a4; do
        tol=0.001
        [ $p = w4a4 ] && tol=0.01
        for dev in cpu cuda; do
            "$NVFP4TOOL" moe "$tmp/nv" --layer 1 --input "$d/io.safetensors" --precision $p \
                --output "$tmp/$dev.safetensors" --device $dev --quiet
        done
        r=$(check rel_l2 "$tmp/cuda.safetensors" y "$tmp/cpu.safetensors" y)
        below "$r" $tol || fail "$f $p: cuda vs cpu rel-L2 $r > $tol"
        [ "$(check meta "$tmp/cuda.safetensors" precision)" = $p ] || fail "$f: precision"
        echo "$f $p cuda vs cpu rel-L2 $r"
    done
done
d=$NVFP4_TESTDATA/moe/qwen3_moe
expect 1 "not NVFP4" -- "$NVFP4TOOL" moe "$d" --layer 1 --input "$d/io.safetensors" \
    --output "$tmp/y.safetensors" --device cuda
