#!/usr/bin/env bash
# One rule for non-finite values: an FP8 NaN in a tensor that is only dequantized to BF16
# (attention, outside the scope) stops the conversion with exit 3 naming the file, the tensor and
# the [row, col], as in a quantized tensor; nothing that looks complete is left. With
# --allow-nonfinite it passes through as a BF16 NaN.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" "$here/make_fp8.py" "$tmp/src" nan
rc=0
"$NVFP4TOOL" convert "$tmp/src" "$tmp/out" --quiet --allow-empty 2>"$tmp/err" || rc=$?
[ $rc -eq 3 ] || { echo "exit $rc, expected 3" >&2; cat "$tmp/err" >&2; exit 1; }
grep -q "'$tmp/src/model.safetensors': tensor 'model.layers.0.self_attn.o_proj.weight': non-finite value nan at index \[5, 9\]" "$tmp/err" ||
    { echo "message: $(cat "$tmp/err")" >&2; exit 1; }
[ ! -e "$tmp/out" ] || { echo "a failed conversion left '$tmp/out'" >&2; exit 1; }
"$NVFP4TOOL" convert "$tmp/src" "$tmp/pass" --quiet --allow-empty --allow-nonfinite >/dev/null
"$NVFP4_PYTHON" - "$tmp/pass/model-00001-of-00001.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])["model.layers.0.self_attn.o_proj.weight"]
assert t["dtype"] == "BF16" and t["shape"] == [128, 128]
base = 8 + n + t["data_offsets"][0]
def at(r, c):
    return struct.unpack("<H", b[base + 2 * (r * 128 + c):base + 2 * (r * 128 + c) + 2])[0]
assert at(5, 9) & 0x7F80 == 0x7F80 and at(5, 9) & 0x7F, hex(at(5, 9))  # a NaN
assert at(0, 0) == 0x3F00, hex(at(0, 0))  # 1.0 * 0.5 = 0.5 is BF16 0x3f00
PY
echo ok
