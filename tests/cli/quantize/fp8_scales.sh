#!/usr/bin/env bash
# An FP8 weight whose scale does not fit it (F32 [3,3], [1,1] or [0] where 2x2 blocks need 4
# elements; I8) is bad input: quantize exits 3 like inspect, naming the scale, and writes
# nothing. The same holds for an FP8 tensor of any name that quantize would dequantize, and
# for a file whose FP8 weights have their scales in another shard. A fitting scale is consumed
# (dropped); a weight that cannot be quantized keeps its scale.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mk() { # mk FILE WEIGHT_NAME SCALE_DTYPE SCALE_SHAPE(json) [COLS]
    "$NVFP4_PYTHON" - "$here" "$@" <<'PY'
import json, struct, sys
sys.path.insert(0, sys.argv[1])
from ref_quant import st_write
path, name, sdt, sshape = sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
cols = int(sys.argv[6]) if len(sys.argv) > 6 else 144
n = 1
for d in sshape:
    n *= d
size = {'F32': 4, 'I8': 1}[sdt]
raw = struct.pack('<%df' % n, *[1e-3] * n) if sdt == 'F32' else bytes([1] * n)
st_write(path, {
    name: ('F8_E4M3', [130, cols], bytes([0x30 + (i % 7) for i in range(130 * cols)])),
    name + '_scale_inv': (sdt, sshape, raw),
    'model.norm.weight': ('F32', [16], struct.pack('<16f', *[1.0] * 16)),
})
PY
}
. "$here/expect.bash"
nothing_written() {
    [ ! -e "$tmp/out.safetensors" ] && [ ! -e "$tmp/out.safetensors.tmp" ] ||
        { echo "$1: output written" >&2; exit 1; }
}
w=model.layers.0.mlp.experts.0.down_proj.weight
for bad in "F32 [3,3]" "F32 [1,1]" "F32 [0]" "I8 [4]" "I8 [2,2]"; do
    set -- $bad
    mk "$tmp/in.safetensors" "$w" "$1" "$2"
    expect 3 "scale tensor '${w}_scale_inv'" -- "$NVFP4TOOL" inspect "$tmp/in.safetensors" --quiet
    expect 3 "scale tensor '${w}_scale_inv'" -- \
        "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" --quiet
    nothing_written "$bad"
    expect 3 "scale tensor '${w}_scale_inv'" -- "$NVFP4TOOL" quantize "$tmp/in.safetensors" \
        "$tmp/out.safetensors" --quiet --tensor "$w"
    nothing_written "$bad --tensor"
done
# A tensor that is not a ".weight": the same rule when quantize would use its scale.
mk "$tmp/in.safetensors" w "F32" "[3,3]"
expect 3 "scale tensor 'w_scale_inv' has shape \[3, 3\] (9 elements)" -- \
    "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" --quiet
nothing_written "w [3,3]"
# --weight-block-size gives the geometry: 130 x 144 in 64 x 64 blocks is 3 x 3.
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" --quiet --json \
    --weight-block-size 64,64 >"$tmp/w.json"
rm "$tmp/out.safetensors"
mk "$tmp/in.safetensors" "$w" "F32" "[3,3]"
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" --quiet --json \
    --weight-block-size 64,64 >"$tmp/w64.json"
rm "$tmp/out.safetensors"
expect 3 "needs 4" -- "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" \
    --quiet --weight-block-size 128,128
# Weights whose scales are in another shard: exit 3, as inspect.
shard=$NVFP4_TESTDATA/hf/deepseekv3-fp8/model-00002-of-00003.safetensors
expect 3 "has no scale tensor" -- "$NVFP4TOOL" inspect "$shard" --quiet
expect 3 "has no scale tensor" -- "$NVFP4TOOL" quantize "$shard" "$tmp/out.safetensors" --quiet
nothing_written "split shard"
# A fitting [2,2] scale is consumed; with 100 columns the weight is kept, and so is its scale.
mk "$tmp/good.safetensors" "$w" F32 "[2,2]"
"$NVFP4TOOL" quantize "$tmp/good.safetensors" "$tmp/g.safetensors" --quiet --json >"$tmp/g.json"
mk "$tmp/odd.safetensors" "$w" F32 "[2]" 100
"$NVFP4TOOL" quantize "$tmp/odd.safetensors" "$tmp/o.safetensors" --quiet --json >"$tmp/o.json"
# A scale is never quantized, even when named.
expect 2 "'${w}_scale_inv' cannot be quantized: .*is a quantization scale" -- \
    "$NVFP4TOOL" quantize "$tmp/good.safetensors" "$tmp/out.safetensors" --quiet \
    --tensor "${w}_scale_inv"
# An FP8 weight with a per-tensor weight_scale: dequantized with it (1.0 * 0.5: amax 0.5, gs =
# 256 * 6 / 0.5), weight_scale consumed, input_scale kept.
"$NVFP4_PYTHON" - "$here" "$tmp/pt.safetensors" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[1])
from ref_quant import st_write
st_write(sys.argv[2], {
    "x.weight": ("F8_E4M3", [1, 16], bytes([0x38] * 16)),
    "x.weight_scale": ("F32", [], struct.pack("<f", 0.5)),
    "x.input_scale": ("F32", [], struct.pack("<f", 1.0)),
})
PY
"$NVFP4TOOL" quantize "$tmp/pt.safetensors" "$tmp/p.safetensors" --quiet --json >"$tmp/p.json"
"$NVFP4_PYTHON" - "$tmp" "$w" <<'PY'
import json, sys
tmp, w = sys.argv[1], sys.argv[2]
def actions(f):
    return {t["name"]: t["action"] for t in json.load(open(f"{tmp}/{f}"))["tensors"]}
a = actions("w.json")
assert a == {"w": "quantized", "w_scale_inv": "dropped", "model.norm.weight": "kept"}, a
a = actions("w64.json")
assert a == {w: "quantized", w + "_scale_inv": "dropped", "model.norm.weight": "kept"}, a
a = actions("g.json")
assert a == {w: "quantized", w + "_scale_inv": "dropped", "model.norm.weight": "kept"}, a
p = {t["name"]: t for t in json.load(open(f"{tmp}/p.json"))["tensors"]}
assert {k: v["action"] for k, v in p.items()} == \
    {"x.weight": "quantized", "x.weight_scale": "dropped", "x.input_scale": "kept"}, p
assert p["x.weight"]["source"] == "fp8-tensor" and p["x.weight"]["global_scale"] == 3072.0, p
assert json.load(open(f"{tmp}/g.json"))["tensors"][0]["source"] == "fp8-block"
a = actions("o.json")
assert a == {w: "kept", w + "_scale_inv": "kept", "model.norm.weight": "kept"}, a
PY
echo ok
