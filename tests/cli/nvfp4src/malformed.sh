#!/usr/bin/env bash
# Malformed NVFP4 expert tensors (odd packed width, scale shape not [out, in/16], missing
# weight_scale_2, negative or NaN block scale, negative or NaN weight_scale_2, NaN input_scale)
# are exit 3 naming the tensor, through convert to a prepared target; DST is not created.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL

"$T" synth "$tmp/m" --preset qwen3-moe --dtype nvfp4 --layers 2 --experts 4 --quiet \
    --max-shard-size 1GB
X=model.layers.1.mlp.experts.2.down_proj
while read -r kind tensor text; do
    rm -rf "$tmp/z"
    cp -r "$tmp/m" "$tmp/z"
    "$NVFP4_PYTHON" "$here/nvfp4_edit.py" malform "$tmp/z" "$kind" "$tensor"
    expect 3 "$text" -- "$T" convert "$tmp/z" "$tmp/dst" --target prepared-w4a4
    grep -q "'$X.weight'" "$tmp/err" || fail "$kind: the weight is not named: $(cat "$tmp/err")"
    [ ! -e "$tmp/dst" ] || fail "$kind: DST created"
done <<LIST
odd-width $X.weight packed width 95 (shape [320, 95]) is odd
scale-shape $X.weight_scale '$X.weight_scale' has shape [320, 11]
drop $X.weight_scale_2 no weight_scale_2
neg-scale $X.weight_scale '$X.weight_scale'[0, 0] is 0xb8 (negative)
nan-scale $X.weight_scale '$X.weight_scale'[0, 0] is 0x7f (NaN)
neg-f32 $X.weight_scale_2 '$X.weight_scale_2' is -1 (0xbf800000)
nan-f32 $X.weight_scale_2 '$X.weight_scale_2' is nan
nan-f32 $X.input_scale '$X.input_scale' is nan
LIST
echo "malformed NVFP4 sources: exit 3 naming the tensor"
