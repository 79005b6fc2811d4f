#!/usr/bin/env bash
# A BF16 checkpoint converted to ModelOpt NVFP4 and run as stored gives the same output, bit for
# bit, as `moe --precision w4a16` on the BF16 source (same NVFP4 values, weight_scale_2 applied
# after the f32 accumulation), for the default recipe and for --recipe RTN; its distance from
# transformers' BF16 output stays in the range NVFP4 gives on random weights (~0.1). W4A4 also
# quantizes the activations: its output differs from W4A16 and stays in range, and per-token
# activation scales differ from per-tensor ones.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/../lib.sh"
check() { "$NVFP4_PYTHON" "$here/moe_check.py" "$@"; }
below() { "$NVFP4_PYTHON" -c "import sys; sys.exit(0 if float('$1') <= $2 else 1)"; }
printf 'quantization: {method: rtn}\n' >"$tmp/rtn.yaml"
for f in deepseek_v3 qwen2_moe mixtral qwen3_moe; do # qwen3_moe last: its a4 is used below
    d=$NVFP4_TESTDATA/moe/$f
    scope=()
    [ $f = mixtral ] && scope=(--include '*.block_sparse_moe.experts.*')
    recipes=(default)
    [ $f = qwen3_moe ] && recipes=(default rtn)
    for recipe in "${recipes[@]}"; do
        rflag=()
        [ $recipe = rtn ] && rflag=(--recipe "$tmp/rtn.yaml")
        rm -rf "$tmp/nv"
        "$NVFP4TOOL" convert "$d" "$tmp/nv" "${scope[@]}" "${rflag[@]}" --quiet >/dev/null
        "$NVFP4TOOL" moe "$tmp/nv" --layer 1 --input "$d/io.safetensors" \
            --output "$tmp/nv.safetensors" --quiet
        "$NVFP4TOOL" moe "$d" --layer 1 --input "$d/io.safetensors" --precision w4a16 \
            --output "$tmp/w4.safetensors" "${rflag[@]}" --quiet
        r=$(check rel_l2 "$tmp/nv.safetensors" y "$tmp/w4.safetensors" y)
        [ "$r" = 0 ] || fail "$f $recipe: NVFP4 checkpoint vs on-the-fly w4a16 differ (rel-L2 $r)"
        [ "$(check meta "$tmp/nv.safetensors" precision)" = w4a16 ] || fail "$f: precision"
        [ "$(check meta "$tmp/nv.safetensors" checkpoint_format)" = nvfp4-modelopt ] ||
            fail "$f: checkpoint_format"
        r=$(check rel_l2 "$tmp/w4.safetensors" y "$d/io.safetensors" y)
        below "$r" 0.25 || fail "$f $recipe: w4a16 rel-L2 $r against transformers"
        echo "$f $recipe w4a16 rel-L2 $r"
    done
    # W4A4 on the source (dynamic activation scales) and on the NVFP4 checkpoint (its
    # input_scale, 1.0 from convert)
    "$NVFP4TOOL" moe "$d" --layer 1 --input "$d/io.safetensors" --precision w4a4 \
        --output "$tmp/a4.safetensors" --quiet
    "$NVFP4TOOL" moe "$tmp/nv" --layer 1 --input "$d/io.safetensors" --precision w4a4 \
        --output "$tmp/nva4.safetensors" --quiet
    r=$(check rel_l2 "$tmp/a4.safetensors" y "$tmp/w4.safetensors" y)
    [ "$r" != 0 ] || fail "$f: w4a4 equals w4a16: the activations were not quantized"
    for o in a4 nva4; do
        r=$(check rel_l2 "$tmp/$o.safetensors" y "$d/io.safetensors" y)
        below "$r" 0.3 || fail "$f: $o rel-L2 $r against transformers"
        echo "$f $o rel-L2 $r"
    done
done
d=$NVFP4_TESTDATA/moe/qwen3_moe
"$NVFP4TOOL" moe "$d" --layer 1 --input "$d/io.safetensors" --precision w4a4 \
    --per-token-activations --output "$tmp/pt.safetensors" --quiet
r=$(check rel_l2 "$tmp/pt.safetensors" y "$d/io.safetensors" y)
below "$r" 0.3 || fail "per-token w4a4 rel-L2 $r against transformers"
[ "$(check rel_l2 "$tmp/pt.safetensors" y "$tmp/a4.safetensors" y)" != 0 ] ||
    fail "per-token w4a4 equals per-tensor w4a4"
