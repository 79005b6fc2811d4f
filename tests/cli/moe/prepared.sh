#!/usr/bin/env bash
# moe on a prepared checkpoint (w13 interleave, 128x4 and 8x4 scale layouts, read through
# nvfp4/layout.h) gives the same y bytes as moe on the modelopt conversion of the same source
# (linear layout, read by the ModelOpt provider): same NVFP4 values, same arithmetic. Sources:
# tests/data/moe/qwen3_moe (I 64: one interleave group, scale rows padded) and a synth (I 192).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
data=$(cd "$(dirname "$0")/../../data/moe" && pwd)

"$T" synth "$tmp/syn" --preset qwen3-moe --dtype bf16 --layers 2 --experts 4 --quiet
# y's data bytes only (the metadata names the checkpoint format)
ydata() {
    "$NVFP4_PYTHON" - "$1" <<'PY'
import json, struct, sys, hashlib
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])["y"]
s, e = t["data_offsets"]
print(t["dtype"], t["shape"], hashlib.sha256(b[8 + n + s:8 + n + e]).hexdigest())
PY
}
for src in "$data/qwen3_moe:1" "$tmp/syn:1"; do
    dir=${src%:*}
    layer=${src##*:}
    name=$(basename "$dir")
    "$T" convert "$dir" "$tmp/$name-mo" --quiet
    "$T" convert "$dir" "$tmp/$name-pr" --quiet --target prepared-w4a16
    "$T" convert "$dir" "$tmp/$name-pr8" --quiet --target prepared-w4a16 --scale-layout 8x4
    h=$("$NVFP4_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["hidden_size"])' \
        "$dir/config.json")
    "$NVFP4_PYTHON" - "$tmp/x.safetensors" "$h" <<'PY'
import json, random, struct, sys
random.seed(7)
t, h = 24, int(sys.argv[2])
data = b"".join(struct.pack("<f", random.gauss(0, 1)) for _ in range(t * h))
hdr = json.dumps({"x": {"dtype": "F32", "shape": [t, h], "data_offsets": [0, len(data)]}})
hdr = hdr.encode() + b" " * ((8 - len(hdr) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hdr)) + hdr + data)
PY
    for c in mo pr pr8; do
        "$T" moe "$tmp/$name-$c" --layer "$layer" --input "$tmp/x.safetensors" \
            --output "$tmp/y-$c.safetensors" --precision w4a16 --quiet 2>/dev/null ||
            fail "$name-$c: moe failed"
    done
    want=$(ydata "$tmp/y-mo.safetensors")
    case $want in "F32 [24, $h] "*) ;; *) fail "$name: unexpected y: $want" ;; esac
    [ "$(ydata "$tmp/y-pr.safetensors")" = "$want" ] || fail "$name: 128x4 y differs from modelopt"
    [ "$(ydata "$tmp/y-pr8.safetensors")" = "$want" ] || fail "$name: 8x4 y differs from modelopt"
    # a prepared byte changed changes y (the comparison can fail)
    "$NVFP4_PYTHON" - "$tmp/$name-pr8" "$layer" <<'PY'
import json, struct, sys, glob
f = glob.glob(sys.argv[1] + "/*.safetensors")[0]
b = bytearray(open(f, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])["model.layers.%s.mlp.experts.w2_weight" % sys.argv[2]]
s, e = t["data_offsets"]
for i in range(8 + n + s, 8 + n + e):
    b[i] = ((b[i] & 15) << 4) | (b[i] >> 4)
open(f, "wb").write(bytes(b))
PY
    "$T" moe "$tmp/$name-pr8" --layer "$layer" --input "$tmp/x.safetensors" \
        --output "$tmp/y-bad.safetensors" --precision w4a16 --quiet 2>/dev/null ||
        fail "$name: moe on the altered checkpoint failed"
    [ "$(ydata "$tmp/y-bad.safetensors")" != "$want" ] || fail "$name: altered w2 gave the same y"
done
echo "moe: prepared 128x4 and 8x4 give the modelopt conversion's y bit for bit"
