#!/usr/bin/env bash
# --arithmetic modelopt (quantization.arithmetic): the bytes of ModelOpt's own export arithmetic,
# recomputed by ref_quant.py (an independent Python implementation); an all-zero group is
# written as the default arithmetic writes it, with a warning; modelopt with 4over6 or
# e4m3_max 256 is a usage error (exit 2) in quantize and convert; the effective recipe says it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/../lib.sh"
"$NVFP4_PYTHON" "$here/ref_quant.py" make "$tmp/in.safetensors"
for threads in 1 2; do
    "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/mo$threads.safetensors" --quiet \
        --threads "$threads" --arithmetic modelopt >/dev/null
    "$NVFP4_PYTHON" "$here/ref_quant.py" check "$tmp/in.safetensors" "$tmp/mo$threads.safetensors" \
        modelopt mse scaled 448 >/dev/null || fail "modelopt mismatch ($threads threads)"
done
cmp -s "$tmp/mo1.safetensors" "$tmp/mo2.safetensors" || fail "thread count changed the bytes"
# The same input in the default arithmetic's RTN differs (zero blocks: scale 0x00, not 0x38).
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/fi.safetensors" --quiet --method rtn >/dev/null
cmp -s "$tmp/mo1.safetensors" "$tmp/fi.safetensors" && fail "modelopt wrote flashinfer's bytes"
# A recipe file says it too; --arithmetic flashinfer on top gives the default arithmetic back.
printf 'quantization: {arithmetic: modelopt}\n' >"$tmp/mo.yaml"
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/r.safetensors" --quiet --recipe "$tmp/mo.yaml" \
    >/dev/null
cmp -s "$tmp/mo1.safetensors" "$tmp/r.safetensors" || fail "recipe file: not modelopt's bytes"
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/r2.safetensors" --quiet --recipe "$tmp/mo.yaml" \
    --arithmetic flashinfer >/dev/null
cmp -s "$tmp/fi.safetensors" "$tmp/r2.safetensors" || fail "--arithmetic flashinfer: not rtn"
out=$("$NVFP4TOOL" quantize --print-recipe --arithmetic modelopt)
case "$out" in
*'"method":"rtn"'*'"e4m3_max":448,"arithmetic":"modelopt"'*) ;;
*) fail "unexpected effective recipe: $out" ;;
esac
# The JSON summary: scale_2 is sf2 = RN(amax / 2688) itself.
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/j.safetensors" --quiet --json \
    --arithmetic modelopt >"$tmp/sum.json"
"$NVFP4_PYTHON" - "$tmp/sum.json" <<'PY'
import json, struct, sys
s = json.load(open(sys.argv[1]))
f32 = lambda x: struct.unpack('<f', struct.pack('<f', x))[0]
assert s["recipe"]["quantization"]["arithmetic"] == "modelopt", s["recipe"]
q = [t for t in s["tensors"] if t["action"] == "quantized"]
assert q
for t in q:
    amax = max(f32(u["amax"]) for u in q if u["group"] == t["group"])
    assert f32(t["scale_2"]) == f32(amax / 2688.0), t
PY
# An all-zero group: a warning, and the default arithmetic's bytes (ref_quant.py knows the rule).
"$NVFP4_PYTHON" - "$tmp/zero.safetensors" <<'PY'
import json, struct, sys
vals = [0.0] * 32 + [0.5, -0.25] * 16
hdr = json.dumps({"a.weight": {"dtype": "F32", "shape": [2, 16], "data_offsets": [0, 128]},
                  "b.weight": {"dtype": "F32", "shape": [2, 16], "data_offsets": [128, 256]}})
hdr = hdr.encode() + b" " * ((8 - len(hdr) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hdr)) + hdr + struct.pack("<64f", *vals))
PY
expect 0 "is all zero" -- "$NVFP4TOOL" quantize "$tmp/zero.safetensors" "$tmp/z.safetensors" \
    --arithmetic modelopt
"$NVFP4_PYTHON" "$here/ref_quant.py" check "$tmp/zero.safetensors" "$tmp/z.safetensors" \
    modelopt mse scaled 448 >/dev/null || fail "all-zero group mismatch"
# Usage errors (exit 2), in quantize and in convert, before any input is read.
expect 2 "4over6" -- "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/e.safetensors" \
    --arithmetic modelopt --method 4over6
expect 2 "e4m3_max 448" -- "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/e.safetensors" \
    --arithmetic modelopt --e4m3-max 256
expect 2 "bad value 'torch'" -- "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/e.safetensors" \
    --arithmetic torch
printf 'quantization: {method: 4over6}\n' >"$tmp/46.yaml"
expect 2 "4over6" -- "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/e.safetensors" \
    --recipe "$tmp/46.yaml" --arithmetic modelopt
expect 2 "4over6" -- "$NVFP4TOOL" convert "$tmp/nosuchdir" "$tmp/outdir" \
    --arithmetic modelopt --method 4over6
expect 2 "e4m3_max 448" -- "$NVFP4TOOL" convert "$tmp/nosuchdir" "$tmp/outdir" \
    --arithmetic modelopt --e4m3-max 256
[ ! -e "$tmp/e.safetensors" ] && [ ! -e "$tmp/outdir" ] || fail "a usage error wrote output"
echo ok
