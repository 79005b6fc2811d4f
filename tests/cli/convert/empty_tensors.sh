#!/usr/bin/env bash
# Empty FP8 tensors whose other dimensions are huge (#11 items 2 and 3): [0, 2^53], fused
# [8, 0, 2^40] and a fused down_proj [2^40, 0, 16], none with a single byte. Each is copied
# as it is (F8_E4M3, same shape, no bytes; its scale kept beside it) at once: never sized by
# its other dimensions, never a loop over 2^40 empty matrices. The output verifies.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for case in flat fused down; do
    "$NVFP4_PYTHON" "$here/make_fp8.py" "$tmp/$case" "$case"
    rc=0
    timeout 60 "$NVFP4TOOL" convert "$tmp/$case" "$tmp/out-$case" --quiet --allow-empty \
        >/dev/null 2>"$tmp/err" || rc=$?
    [ $rc -eq 0 ] || { echo "$case: exit $rc" >&2; cat "$tmp/err" >&2; exit 1; }
    "$NVFP4_PYTHON" - "$tmp/out-$case/model-00001-of-00001.safetensors" "$case" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
want = {"flat": ("model.layers.0.self_attn.q_proj.weight", [0, 2**53]),
        "fused": ("model.layers.0.mlp.experts.gate_up_proj", [8, 0, 2**40]),
        "down": ("model.layers.0.mlp.experts.down_proj", [2**40, 0, 16])}[sys.argv[2]]
t = h[want[0]]
assert t["dtype"] == "F8_E4M3" and t["shape"] == want[1], t
assert t["data_offsets"][0] == t["data_offsets"][1], t
assert [k for k in h if k.endswith("scale_inv")], list(h)  # its scale copied too
PY
    "$NVFP4TOOL" hash --check "$tmp/out-$case" --quiet >/dev/null
    [ -z "$(find "$tmp/out-$case" -name '*.tmp')" ] || { echo "$case: .tmp left" >&2; exit 1; }
done
echo ok
