#!/usr/bin/env bash
# Usage errors are exit 2 and name what is wrong, and no output file is left: a dense or absent
# layer (the message lists the MoE layers), an input whose H differs from the layer's (naming the
# file, the tensor and both shapes), an input of several tensors none named "x", --device cuda
# (no MoE kernel yet), a bad --precision or recipe, a missing option; a missing checkpoint or
# recipe file is exit 1. An input file whose
# tensor is named "x" among others is used.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/../lib.sh"
d=$NVFP4_TESTDATA/moe/deepseek_v3
x=$d/io.safetensors
out=$tmp/y.safetensors
expect 2 "layer 0 (model.layers.0) is a dense MLP; MoE layers: 1" -- \
    "$NVFP4TOOL" moe "$d" --layer 0 --input "$x" --output "$out"
expect 2 "no layer 9; MoE layers: 1" -- "$NVFP4TOOL" moe "$d" --layer 9 --input "$x" --output "$out"
"$NVFP4_PYTHON" "$here/moe_check.py" make_x "$tmp/h32.safetensors" 4 32
expect 2 "tensor 'x' has shape [4, 32]; the layer needs [T, 64]" -- \
    "$NVFP4TOOL" moe "$d" --layer 1 --input "$tmp/h32.safetensors" --output "$out"
grep -qF "$tmp/h32.safetensors" "$tmp/err" || fail "the input file is not named"
"$NVFP4_PYTHON" "$here/moe_check.py" make_x "$tmp/two.safetensors" 4 64 a b
expect 2 "holds 2 tensors and none is named 'x'" -- \
    "$NVFP4TOOL" moe "$d" --layer 1 --input "$tmp/two.safetensors" --output "$out"
expect 2 "no CUDA kernel yet; use --device cpu" -- \
    "$NVFP4TOOL" moe "$d" --layer 1 --input "$x" --output "$out" --device cuda
expect 2 "--precision takes bf16, w4a16 or w4a4" -- \
    "$NVFP4TOOL" moe "$d" --layer 1 --input "$x" --output "$out" --precision fp8
expect 2 "--per-token-activations needs --precision w4a4" -- \
    "$NVFP4TOOL" moe "$d" --layer 1 --input "$x" --output "$out" --per-token-activations
expect 2 "--layer N" -- "$NVFP4TOOL" moe "$d" --input "$x" --output "$out"
expect 2 "--input and --output" -- "$NVFP4TOOL" moe "$d" --layer 1 --input "$x"
expect 2 "takes an integer" -- "$NVFP4TOOL" moe "$d" --layer x --input "$x" --output "$out"
printf 'quantization: {method: bogus}\n' >"$tmp/bad.yaml"
expect 2 "bogus" -- "$NVFP4TOOL" moe "$d" --layer 1 --input "$x" --output "$out" \
    --recipe "$tmp/bad.yaml"
expect 1 "cannot open recipe" -- "$NVFP4TOOL" moe "$d" --layer 1 --input "$x" --output "$out" \
    --recipe "$tmp/none.yaml"
expect 0 "--precision P" -- "$NVFP4TOOL" moe --help
expect 1 "cannot open checkpoint" -- \
    "$NVFP4TOOL" moe "$tmp/none" --layer 1 --input "$x" --output "$out"
[ ! -e "$out" ] && [ ! -e "$out.tmp" ] || fail "an output was left after a failure"
# "x" among several tensors; --json names what ran
"$NVFP4_PYTHON" "$here/moe_check.py" make_x "$tmp/xy.safetensors" 3 64 w x
expect 0 '"routing":"deepseek_v3"' -- \
    "$NVFP4TOOL" moe "$d" --layer 1 --input "$tmp/xy.safetensors" --output "$out" --json
grep -qF '"tokens":3,' "$tmp/out" || fail "--json: $(cat "$tmp/out")"
grep -qF '"shared_experts":true' "$tmp/out" || fail "--json: $(cat "$tmp/out")"
