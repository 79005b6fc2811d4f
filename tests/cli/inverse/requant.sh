#!/usr/bin/env bash
# What the inverse cannot restore, said (issue 12): a ModelOpt source whose expert 1 of layer 0
# has an up_proj weight_scale_2 three times the gate's (edited by nvfp4src's Python helper) is
# re-quantized when prepared; `convert --target modelopt` of that prepared checkpoint warns
# that the gate is restored with its re-quantized bytes, writes it with the shared (up's)
# weight_scale_2, and restores every other tensor of the source byte for byte.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL
g=model.layers.0.mlp.experts.1.gate_proj
u=model.layers.0.mlp.experts.1.up_proj

"$T" synth "$tmp/m" --preset qwen3-moe --dtype nvfp4 --hidden 128 --moe-intermediate 128 \
    --experts 4 --quiet
"$NVFP4_PYTHON" "$here/../nvfp4src/nvfp4_edit.py" rescale "$tmp/m" "$u.weight_scale_2" 3 >/dev/null
"$T" convert "$tmp/m" "$tmp/p" --target prepared-w4a4 --ep 2 --quiet 2>/dev/null
expect 0 "'$g' was re-quantized onto its expert's shared weight_scale_2 when prepared" -- \
    "$T" convert "$tmp/p" "$tmp/b" --target modelopt
"$NVFP4_PYTHON" "$here/check_inverse.py" tensors "$tmp/m" "$tmp/b" "$g.weight" \
    "$g.weight_scale" "$g.weight_scale_2" >/dev/null || fail "tensors other than the gate differ"
"$NVFP4_PYTHON" "$here/check_inverse.py" same "$tmp/b" "$g.weight_scale_2" \
    "$u.weight_scale_2" >/dev/null || fail "the gate does not carry the shared weight_scale_2"
echo "a re-quantized expert: restored with its re-quantized gate and the shared scale, said"
