#!/usr/bin/env bash
# convert --arithmetic modelopt writes ModelOpt's own export bytes for every converted linear
# (check_convert.py recomputes them with ref_quant.py: weight_scale_2 = RN(amax / 2688) as it
# is, true divisions; input_scale from --input-amax stays amax / (6 * 448)); the manifest's
# recipe records the arithmetic and inspect of the output says which was used.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
m=model.layers.0.mlp.experts.0.gate_proj
printf '{"%s": 3.5, "model.layers.0.mlp.experts.1.down_proj": 0.75}' $m >"$tmp/amax.json"
for d in qwen3moe-bf16 deepseekv3-fp8; do
    rm -rf "$tmp/dst"
    "$NVFP4TOOL" convert "$NVFP4_TESTDATA/hf/$d" "$tmp/dst" --quiet --arithmetic modelopt \
        --input-amax "$tmp/amax.json" >/dev/null
    "$NVFP4_PYTHON" "$here/check_convert.py" "$NVFP4_TESTDATA/hf/$d" "$tmp/dst" --method modelopt \
        --emax 448 --input-amax "$tmp/amax.json" >/dev/null || { echo "mismatch for $d" >&2; exit 1; }
done
"$NVFP4_PYTHON" - "$tmp/dst/nvfp4-manifest.json" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))["recipe"]["quantization"]
assert q["method"] == "rtn" and q["arithmetic"] == "modelopt" and q["e4m3_max"] == 448, q
PY
out=$("$NVFP4TOOL" inspect "$tmp/dst" --summary)
case "$out" in
*"Made by nvfp4tool: method rtn, arithmetic modelopt"*) ;;
*) echo "inspect does not say the arithmetic: $out" >&2; exit 1 ;;
esac
"$NVFP4TOOL" inspect "$tmp/dst" --json >"$tmp/i.json"
"$NVFP4_PYTHON" - "$tmp/i.json" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))["quantization"]["made_with"]
assert q["arithmetic"] == "modelopt", q
PY
# The default arithmetic: recorded as flashinfer; a source checkpoint has no made_with.
rm -rf "$tmp/dst"
"$NVFP4TOOL" convert "$NVFP4_TESTDATA/hf/qwen3moe-bf16" "$tmp/dst" --quiet --method rtn >/dev/null
"$NVFP4TOOL" inspect "$tmp/dst" --summary | grep -qF "method rtn, arithmetic flashinfer" ||
    { echo "inspect: no flashinfer line" >&2; exit 1; }
"$NVFP4TOOL" inspect "$NVFP4_TESTDATA/hf/qwen3moe-bf16" --json >"$tmp/s.json"
"$NVFP4_PYTHON" -c 'import json,sys; assert json.load(open(sys.argv[1]))["quantization"]["made_with"] is None' \
    "$tmp/s.json"
echo ok
