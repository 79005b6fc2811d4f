#!/usr/bin/env bash
# inspect links the scales a checkpoint model used to leave as "other" (checkpoints written here
# by a safetensors writer of the test's own):
#   fused: ModelOpt NVFP4 with fused experts (P.experts.gate_up_proj U8 [2, 64, 32] and its
#          gate_up_proj_weight_scale / _weight_scale_2 / _input_scale, likewise down_proj), as
#          ModelOpt exports GPT-OSS and Kimi: every scale has role "scale", no "unknown 3-D"
#          warning, format nvfp4-modelopt, H = 64 and I = 32 read from the packed shapes;
#   ctfp8: compressed-tensors block FP8 (weights num_bits 8, strategy block, block_structure
#          [128, 128]): format fp8-block with block [128, 128], each F8 weight quantized from
#          its F32 `weight_scale` [2, 2] (action drop, role scale);
#   ctbad: the same with a [2, 1] weight_scale: exit 3 naming the scale.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "nvfp4_links: $*" >&2; exit 1; }
"$NVFP4_PYTHON" - "$tmp" <<'PY'
import json, os, struct, sys

SIZE = {"U8": 1, "F8_E4M3": 1, "F32": 4, "BF16": 2}
ONE = {"U8": b"\x22", "F8_E4M3": b"\x38", "F32": struct.pack("<f", 1.0),
       "BF16": struct.pack("<H", 0x3F80)}


def ckpt(name, config, tensors):
    d = os.path.join(sys.argv[1], name)
    os.mkdir(d)
    json.dump(config, open(os.path.join(d, "config.json"), "w"))
    hdr, off, blobs = {}, 0, []
    for tname, dtype, shape in tensors:
        n = 1
        for s in shape:
            n *= s
        hdr[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n * SIZE[dtype]]}
        off += n * SIZE[dtype]
        blobs.append(ONE[dtype] * n)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


P = "model.layers.0.mlp."
fused = [(P + "gate.weight", "BF16", [2, 64])]
for proj, out, inp in (("gate_up_proj", 64, 64), ("down_proj", 64, 32)):
    fused += [(P + "experts." + proj, "U8", [2, out, inp // 2]),
              (P + "experts." + proj + "_weight_scale", "F8_E4M3", [2, out, inp // 16]),
              (P + "experts." + proj + "_weight_scale_2", "F32", [2]),
              (P + "experts." + proj + "_input_scale", "F32", [2])]
ckpt("fused", {"num_experts": 2, "quantization_config": {"quant_method": "modelopt",
                                                         "quant_algo": "NVFP4"}}, fused)
ct = {"num_experts": 1, "quantization_config": {
    "quant_method": "compressed-tensors", "format": "float-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
        "num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128],
        "symmetric": True, "dynamic": False}}}}}
for name, sshape in (("ctfp8", [2, 2]), ("ctbad", [2, 1])):
    ts = [(P + "gate.weight", "BF16", [1, 256])]
    for proj in ("gate_proj", "up_proj", "down_proj"):
        ts += [(P + "experts.0." + proj + ".weight", "F8_E4M3", [256, 256]),
               (P + "experts.0." + proj + ".weight_scale", "F32", sshape)]
    ckpt(name, ct, ts)
PY
"$NVFP4TOOL" inspect "$tmp/fused" --json >"$tmp/fused.json"
"$NVFP4TOOL" inspect "$tmp/ctfp8" --json >"$tmp/ctfp8.json"
rc=0
"$NVFP4TOOL" inspect "$tmp/ctbad" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
[ $rc -eq 3 ] || fail "ctbad: exit $rc, expected 3: $(cat "$tmp/bad.err")"
grep -qF "model.layers.0.mlp.experts.0.down_proj.weight_scale" "$tmp/bad.err" ||
    fail "ctbad: the scale is not named: $(cat "$tmp/bad.err")"
"$NVFP4_PYTHON" - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
f = json.load(open(tmp + "/fused.json"))
assert f["format"] == "nvfp4-modelopt", f["format"]
roles = {t["name"]: t["role"] for t in f["tensors"]}
scales = [n for n in roles if n.endswith(("_weight_scale", "_weight_scale_2", "_input_scale"))]
assert len(scales) == 6, scales
bad = {n: roles[n] for n in scales if roles[n] != "scale"}
assert not bad, bad
assert not [w for w in f["warnings"] if "unknown 3-D" in w or "no weight" in w], f["warnings"]
layer = f["moe"]["layers"][0]
assert (layer["hidden"], layer["intermediate"]) == (64, 32), layer
c = json.load(open(tmp + "/ctfp8.json"))
assert c["format"] == "fp8-block", c["format"]
assert c["quantization"]["block_size"] == [128, 128], c["quantization"]
by = {t["name"]: t for t in c["tensors"]}
for proj in ("gate_proj", "up_proj", "down_proj"):
    m = "model.layers.0.mlp.experts.0." + proj
    assert by[m + ".weight"]["action"] == "quantize", by[m + ".weight"]
    assert (by[m + ".weight_scale"]["role"], by[m + ".weight_scale"]["action"]) == ("scale", "drop"), \
        by[m + ".weight_scale"]
PY
echo "inspect links fused NVFP4 and compressed-tensors block-FP8 scales: ok"
