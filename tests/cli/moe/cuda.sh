#!/usr/bin/env bash
# moe --device cuda (the routed experts on the GPU kernels, from the prepared layout built from
# the layer's NVFP4 values) against the CPU reference on the same NVFP4 checkpoint: each
# transformers-written model converted to ModelOpt NVFP4, run W4A16 (as stored), W4A4 (its
# input_scale) and W4A4 per token on both devices, and W4A4 with dynamic scales on the BF16
# source (--precision w4a4 quantizes its experts; it has no input_scale): rel-L2 <= 1e-3 (W4A16) and <= 1e-2 (W4A4; an FC1 output whose
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
    # W4A4 with computed activation scales: per token on the NVFP4 conversion, dynamic on the
    # BF16 source (no input_scale: FC1's from all of x, FC2's from each expert's FC1 output)
    for run in "pt $tmp/nv --per-token-activations" "dyn $d"; do
        read -r name ck extra <<<"$run"
        for dev in cpu cuda; do
            # shellcheck disable=SC2086
            "$NVFP4TOOL" moe "$ck" --layer 1 --input "$d/io.safetensors" --precision w4a4 \
                $extra --output "$tmp/$dev.safetensors" --device $dev --quiet
        done
        r=$(check rel_l2 "$tmp/cuda.safetensors" y "$tmp/cpu.safetensors" y)
        below "$r" 0.01 || fail "$f w4a4 $name: cuda vs cpu rel-L2 $r > 0.01"
        echo "$f w4a4 $name cuda vs cpu rel-L2 $r"
    done
done
d=$NVFP4_TESTDATA/moe/qwen3_moe
expect 1 "not NVFP4" -- "$NVFP4TOOL" moe "$d" --layer 1 --input "$d/io.safetensors" \
    --output "$tmp/y.safetensors" --device cuda
