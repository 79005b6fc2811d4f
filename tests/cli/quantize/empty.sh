#!/usr/bin/env bash
# An empty tensor is copied as it is, never sized by its other dimension: BF16 [0, 2^53] and
# F32 [0, 16] are kept (no allocation from the shape, exit 0) next to a quantized tensor, and
# naming one with --tensor is a usage error saying it is empty.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/expect.bash"
"$NVFP4_PYTHON" - "$here" "$tmp/in.safetensors" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[1])
from ref_quant import st_write
st_write(sys.argv[2], {
    "a.weight": ("BF16", [0, 2 ** 53], b""),
    "b.weight": ("F32", [0, 16], b""),
    "c.weight": ("F32", [1, 16], struct.pack("<16f", *[1.0] * 16)),
})
PY
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" --quiet --json >"$tmp/s.json"
"$NVFP4_PYTHON" - "$tmp" <<'PY'
import json, struct, sys
tmp = sys.argv[1]
s = json.load(open(f"{tmp}/s.json"))
a = {t["name"]: t["action"] for t in s["tensors"]}
assert a == {"a.weight": "kept", "b.weight": "kept", "c.weight": "quantized"}, a
raw = open(f"{tmp}/out.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
assert hdr["a.weight"]["shape"] == [0, 2 ** 53] and hdr["a.weight"]["dtype"] == "BF16", hdr
assert hdr["b.weight"]["data_offsets"][0] == hdr["b.weight"]["data_offsets"][1], hdr
PY
expect 2 "'a.weight' cannot be quantized: .*empty" -- \
    "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/o2.safetensors" --quiet --tensor a.weight
echo ok
