#!/usr/bin/env bash
# FP8-block sources: `moe --precision bf16` on an FP8-block checkpoint equals, bit for bit,
# `moe` on the same checkpoint dequantized to BF16 by `convert` (an empty scope: every FP8-block
# tensor becomes bf16(RN(f32(fp8) * scale_inv)), checked against Python by tests/cli/convert).
# Sources: synth deepseek-v3 with per-expert and with fused experts (the up rows of a fused
# gate_up_proj start inside a 128-row scale block), and the transformers-written
# FineGrainedFP8 fixtures. The synth FP8 output also stays close to the BF16 synth of the same
# seed (FP8's own error).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/../lib.sh"
check() { "$NVFP4_PYTHON" "$here/moe_check.py" "$@"; }
"$NVFP4_PYTHON" "$here/moe_check.py" make_x "$tmp/x.safetensors" 12 128
same_as_bf16() { # SRC LAYER NAME
    rm -rf "$tmp/b"
    "$NVFP4TOOL" convert "$1" "$tmp/b" --include 'no.such.tensor' --allow-empty --quiet \
        >/dev/null
    "$NVFP4TOOL" moe "$1" --layer "$2" --input "$tmp/x.safetensors" --output "$tmp/$3.fp8" \
        --quiet
    "$NVFP4TOOL" moe "$tmp/b" --layer "$2" --input "$tmp/x.safetensors" --output "$tmp/$3.bf16" \
        --quiet
    [ "$(check meta "$tmp/$3.fp8" checkpoint_format)" = fp8-block ] || fail "$3: not read as FP8"
    local r
    r=$(check rel_l2 "$tmp/$3.fp8" y "$tmp/$3.bf16" y)
    [ "$r" = 0 ] || fail "$3: FP8-block vs its BF16 dequantization differ (rel-L2 $r)"
}
for fused in "" --fused-experts; do
    name=synth${fused:+-fused}
    "$NVFP4TOOL" synth "$tmp/$name" --preset deepseek-v3 --dtype fp8-block --hidden 128 \
        --moe-intermediate 64 $fused --quiet
    same_as_bf16 "$tmp/$name" 1 "$name"
done
"$NVFP4TOOL" synth "$tmp/synth-bf16" --preset deepseek-v3 --dtype bf16 --hidden 128 \
    --moe-intermediate 64 --quiet
"$NVFP4TOOL" moe "$tmp/synth-bf16" --layer 1 --input "$tmp/x.safetensors" \
    --output "$tmp/synth.bf16src" --quiet
# (fused FP8 quantizes gate and up rows in shared 128-row blocks, so its values differ from
# the per-expert ones: both are compared with the BF16 synth)
for name in synth synth-fused; do
    r=$(check rel_l2 "$tmp/$name.fp8" y "$tmp/synth.bf16src" y)
    "$NVFP4_PYTHON" -c "import sys; sys.exit(0 if 0 < float('$r') <= 0.1 else 1)" ||
        fail "$name FP8 vs BF16 synth rel-L2 $r"
    echo "$name deepseek-v3 fp8-block vs bf16 rel-L2 $r"
done
same_as_bf16 "$NVFP4_TESTDATA/hf/deepseekv3-fp8" 1 hf-deepseek
same_as_bf16 "$NVFP4_TESTDATA/hf/qwen3moe-fp8" 0 hf-qwen3
