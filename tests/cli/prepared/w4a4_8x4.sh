#!/usr/bin/env bash
# convert --target prepared-w4a4 --scale-layout 8x4 with --input-amax and dense linears in scope
# (the whole MLP and attention): alpha == input_scale * weight_scale_2 (f32), w13_input_scale ==
# the gate/up input scale, fc2_input_scale == the largest down_proj input scale of the layer,
# dense X.weight, X.weight_scale (8x4), X.alpha, X.input_scale; all checked by check_prepared.py
# against the modelopt conversion with the same options. Then W4A16 with 8x4 and W4A4 with 128x4.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL

# hidden 80: 5 scale columns, padded to 8 in both layouts.
"$T" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --layers 2 --experts 4 --hidden 80 --quiet
P=model.layers.1.mlp.experts
cat >"$tmp/amax.json" <<JSON
{"$P.0.gate_proj": 3.5, "$P.0.up_proj": 5.25, "$P.0.down_proj": 2.0, "$P.2.down_proj": 7.5,
 "$P.3.gate_proj": 1.0, "model.layers.0.self_attn.q_proj": 4.0}
JSON
opts=(--quiet --method rtn --input-amax "$tmp/amax.json" --include '*.mlp.*' --include '*.self_attn.*')
"$T" convert "$tmp/src" "$tmp/mo" "${opts[@]}"
"$T" convert "$tmp/src" "$tmp/a4" "${opts[@]}" --target prepared-w4a4 --scale-layout 8x4
"$NVFP4_PYTHON" "$here/check_prepared.py" compare "$tmp/a4" "$tmp/mo" --precision w4a4 \
    --layout 8x4 >/dev/null || fail "w4a4 8x4 differs from modelopt"
"$T" hash --check "$tmp/a4" --quiet || fail "hash --check"

"$T" convert "$tmp/src" "$tmp/a16" "${opts[@]}" --target prepared-w4a16 --scale-layout 8x4
"$NVFP4_PYTHON" "$here/check_prepared.py" compare "$tmp/a16" "$tmp/mo" --precision w4a16 \
    --layout 8x4 >/dev/null || fail "w4a16 8x4 differs from modelopt"
"$T" convert "$tmp/src" "$tmp/mo2" --quiet --method rtn
"$T" convert "$tmp/src" "$tmp/b4" --quiet --method rtn --target prepared-w4a4
"$NVFP4_PYTHON" "$here/check_prepared.py" compare "$tmp/b4" "$tmp/mo2" --precision w4a4 \
    --layout 128x4 >/dev/null || fail "w4a4 128x4 differs from modelopt"
echo "prepared-w4a4 and 8x4: alpha, input scales and dense linears match the modelopt conversion"
