#!/usr/bin/env bash
# Issue #11 items 1-3 and 9 (checkpoints from tests/cli/inspect/bad_experts.py):
#   empty: zero-sized FP8 expert tensors (fused [0, 256, 256], [8, 0, 2^40], [2^40, 0, 16]) and
#     an FP8 o_proj [0, 2^53] are copied as they are with their scales (no division by the
#     expert count, no allocation sized by the other dimensions); the real fused down_proj
#     [2, 256, 128] is quantized into 2 experts. 11 tensors: 8 NVFP4 outputs + 9 kept = 17.
#   unk3d: experts.0.gate_proj.weight as [2, 96, 320] is an unknown 3-D tensor, not a fused
#     down_proj: warned about and copied byte for byte; the 5 real 2-D experts are quantized
#     (5 x 4 outputs + the 3-D tensor + the router = 22).
# Both exit 0 and their output verifies with hash --check.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" "$NVFP4_SOURCE_DIR/tests/cli/inspect/bad_experts.py" "$tmp"
fail=0
for name in empty unk3d; do
    rc=0
    timeout 120 "$NVFP4TOOL" convert "$tmp/$name" "$tmp/$name.out" --device cpu \
        2>"$tmp/$name.err" >/dev/null || rc=$?
    [ $rc -eq 0 ] || { echo "convert $name: exit $rc"; cat "$tmp/$name.err"; fail=1; continue; }
    "$NVFP4TOOL" hash --check "$tmp/$name.out" --quiet || { echo "hash --check $name"; fail=1; }
done
grep -qF "unknown 3-D tensor 'model.layers.0.mlp.experts.0.gate_proj.weight' [2, 96, 320]" \
    "$tmp/unk3d.err" || { echo "convert unk3d: no warning"; cat "$tmp/unk3d.err"; fail=1; }
[ $fail -eq 0 ] || exit 1
"$NVFP4_PYTHON" - "$tmp" <<'PY' || fail=1
import glob, json, struct, sys
tmp = sys.argv[1]

def header(d):
    files = glob.glob(d + "/*.safetensors")
    assert len(files) == 1, files
    raw = open(files[0], "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    h.pop("__metadata__", None)
    return h, raw[8 + n:]

def check(h, name, dtype, shape):
    assert name in h, f"{name} missing"
    got = (h[name]["dtype"], h[name]["shape"])
    assert got == (dtype, shape), f"{name}: {got}, expected {(dtype, shape)}"

h, _ = header(tmp + "/empty.out")
assert len(h) == 17, sorted(h)
L0, L1 = "model.layers.0.mlp.experts.", "model.layers.1.mlp.experts."
check(h, L0 + "gate_up_proj", "F8_E4M3", [0, 256, 256])
check(h, L0 + "gate_up_proj_scale_inv", "F32", [0, 2, 2])
check(h, L1 + "gate_up_proj", "F8_E4M3", [8, 0, 2**40])
check(h, L1 + "down_proj", "F8_E4M3", [2**40, 0, 16])
check(h, "model.layers.0.self_attn.o_proj.weight", "F8_E4M3", [0, 2**53])
for e in (0, 1):
    check(h, f"{L0}{e}.down_proj.weight", "U8", [256, 64])
    check(h, f"{L0}{e}.down_proj.weight_scale", "F8_E4M3", [256, 8])
assert L0 + "down_proj" not in h and L0 + "down_proj_scale_inv" not in h

h, data = header(tmp + "/unk3d.out")
assert len(h) == 22, sorted(h)
E = "model.layers.0.mlp.experts."
check(h, E + "0.gate_proj.weight", "BF16", [2, 96, 320])
b, e = h[E + "0.gate_proj.weight"]["data_offsets"]
assert data[b:e] == struct.pack("<H", 0x3F80) * (2 * 96 * 320), "3-D tensor not copied as it is"
check(h, E + "0.up_proj.weight", "U8", [96, 160])
check(h, E + "0.down_proj.weight", "U8", [320, 48])
check(h, E + "1.gate_proj.weight", "U8", [96, 160])
PY
[ $fail -eq 0 ] && echo "convert of empty and unknown 3-D expert tensors: ok"
exit $fail
