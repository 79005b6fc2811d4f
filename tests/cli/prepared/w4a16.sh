#!/usr/bin/env bash
# convert --target prepared-w4a16 (ep 1, 128x4) of a BF16 checkpoint with per-expert weights, of
# an FP8-block one with fused experts and of the transformers-written Qwen3-MoE fixture, each checked by check_prepared.py against the modelopt
# conversion of the same source: w13 rows one by one (up/gate in 64-row groups), scales
# un-swizzled with the SPEC formula typed in the checker (padding 0), alpha == weight_scale_2,
# every other tensor as modelopt writes it. `hash --check` passes, the manifest validates against
# the schema and names the layout, and there is no hf_quant_config.json.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL

"$T" synth "$tmp/bf16" --preset qwen3-moe --dtype bf16 --layers 2 --experts 4 --quiet
"$T" synth "$tmp/fp8" --preset deepseek-v3 --dtype fp8-block --experts 4 --fused-experts \
    --moe-intermediate 128 --quiet
ln -s "$NVFP4_TESTDATA/hf/qwen3moe-bf16" "$tmp/hf" # written by transformers
for src in bf16 fp8 hf; do
    "$T" convert "$tmp/$src" "$tmp/$src-mo" --quiet --method rtn
    "$T" convert "$tmp/$src" "$tmp/$src-prep" --quiet --method rtn --target prepared-w4a16
    "$NVFP4_PYTHON" "$here/check_prepared.py" compare "$tmp/$src-prep" "$tmp/$src-mo" \
        --precision w4a16 --layout 128x4 >/dev/null || fail "$src: prepared differs from modelopt"
    "$T" hash --check "$tmp/$src-prep" --quiet || fail "$src: hash --check"
    [ ! -e "$tmp/$src-prep/hf_quant_config.json" ] || fail "$src: hf_quant_config.json written"
done
# The default recipe (4over6) too, on one source.
"$T" convert "$tmp/bf16" "$tmp/d-mo" --quiet
"$T" convert "$tmp/bf16" "$tmp/d-prep" --quiet --target prepared-w4a16
"$NVFP4_PYTHON" "$here/check_prepared.py" compare "$tmp/d-prep" "$tmp/d-mo" \
    --precision w4a16 --layout 128x4 >/dev/null || fail "4over6: prepared differs from modelopt"

if "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    "$NVFP4_PYTHON" - "$NVFP4_SCHEMAS/manifest.schema.json" "$tmp/fp8-prep" <<'PY'
import json, os, sys, jsonschema
schema = json.load(open(sys.argv[1]))
m = json.load(open(os.path.join(sys.argv[2], "nvfp4-manifest.json")))
jsonschema.Draft202012Validator(schema).validate(m)
t = m["target"]
want = {"format": "prepared-w4a16", "layout": "flashinfer-cutedsl-nvfp4-v1",
        "scale_layout": "128x4", "precision": "w4a16",
        "ep": {"size": 1, "ranks": [{"rank": 0, "dir": ".", "experts": [0, 4]}]}}
assert t == want, t
PY
fi
echo "prepared-w4a16: BF16 and FP8-block (fused) sources match their modelopt conversion"
