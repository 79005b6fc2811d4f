#!/usr/bin/env bash
# A 70,000-byte tensor name is a valid safetensors name: quantize handles it like any other
# (exit 0, as inspect), and the output names it, X_scale and X_scale_2 in full; the
# gate/up pair under that long prefix shares one global scale.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" - "$here" "$tmp/in.safetensors" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[1])
from ref_quant import st_write
pre = "model.layers.0.mlp.experts.0." + "x" * 70000
st_write(sys.argv[2], {
    pre + ".gate_proj.weight": ("F32", [2, 32], struct.pack("<64f", *[0.5] * 64)),
    pre + ".up_proj.weight": ("F32", [2, 32], struct.pack("<64f", *[3.0] * 64)),
})
PY
"$NVFP4TOOL" inspect "$tmp/in.safetensors" --quiet >/dev/null
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" --quiet --json >"$tmp/s.json"
"$NVFP4_PYTHON" - "$tmp" <<'PY'
import json, struct, sys
tmp = sys.argv[1]
pre = "model.layers.0.mlp.experts.0." + "x" * 70000
raw = open(f"{tmp}/out.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
hdr.pop("__metadata__", None)
want = {pre + p + s for p in (".gate_proj.weight", ".up_proj.weight")
        for s in ("", "_scale", "_scale_2")}
assert set(hdr) == want, sorted(len(k) for k in hdr)
s = json.load(open(f"{tmp}/s.json"))
assert s["tensors_quantized"] == 2, s["tensors_quantized"]
gs = {t["global_scale"] for t in s["tensors"]}
# one group: amax 3.0, gs = 256 * 6 / 3 (the default recipe's E = 256)
assert gs == {512.0}, gs
PY
echo ok
