"""Write the checkpoints of issue #11 items 1-3 and 9 into DIR (a safetensors writer of its
own, independent of the library's). Used by tests/cli/inspect/bad_experts.sh and
tests/cli/convert/bad_experts.sh.

DIR/empty: FP8 block 128x128, config num_experts 2
  layer 0: experts.gate_up_proj F8 [0, 256, 256] + scale_inv [0, 2, 2]   (empty: item 1)
           experts.down_proj    F8 [2, 256, 128] + scale_inv [2, 2, 1]   (real, scales 1.0)
           gate.weight BF16 [2, 256]
  layer 1: experts.gate_up_proj F8 [8, 0, 2^40] + scale_inv [8, 0, 1]    (empty: item 2)
           experts.down_proj    F8 [2^40, 0, 16] + scale_inv [2^40, 0, 1] (empty: item 3)
  self_attn.o_proj.weight F8 [0, 2^53] + scale_inv [0, 1]                 (empty: item 2)
DIR/unk3d: BF16, config num_experts 2 (item 9)
  layer 0: experts.0.gate_proj.weight [2, 96, 320] (3-D: no fused name), experts.0.up_proj
           [96, 320], experts.0.down_proj [320, 96], experts.1.{gate,up}_proj [96, 320],
           experts.1.down_proj [320, 96], gate.weight [2, 320]
Values: F8 bytes 0x38 (1.0), BF16 0x3f80 (1.0), F32 scales 1.0.
"""
import json
import os
import struct
import sys

SIZE = {"F8_E4M3": 1, "F32": 4, "BF16": 2}
ONE = {"F8_E4M3": b"\x38", "F32": struct.pack("<f", 1.0), "BF16": struct.pack("<H", 0x3F80)}


def write(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name, dtype, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n * SIZE[dtype]]}
        off += n * SIZE[dtype]
        blobs.append(ONE[dtype] * n)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def ckpt(root, name, config, tensors):
    d = os.path.join(root, name)
    os.mkdir(d)
    json.dump(config, open(os.path.join(d, "config.json"), "w"))
    write(os.path.join(d, "model.safetensors"), tensors)


root = sys.argv[1]
L0, L1 = "model.layers.0.mlp.", "model.layers.1.mlp."
ckpt(root, "empty",
     {"num_experts": 2, "quantization_config": {"quant_method": "fp8",
                                                "weight_block_size": [128, 128]}},
     [(L0 + "experts.gate_up_proj", "F8_E4M3", [0, 256, 256]),
      (L0 + "experts.gate_up_proj_scale_inv", "F32", [0, 2, 2]),
      (L0 + "experts.down_proj", "F8_E4M3", [2, 256, 128]),
      (L0 + "experts.down_proj_scale_inv", "F32", [2, 2, 1]),
      (L0 + "gate.weight", "BF16", [2, 256]),
      (L1 + "experts.gate_up_proj", "F8_E4M3", [8, 0, 2**40]),
      (L1 + "experts.gate_up_proj_scale_inv", "F32", [8, 0, 1]),
      (L1 + "experts.down_proj", "F8_E4M3", [2**40, 0, 16]),
      (L1 + "experts.down_proj_scale_inv", "F32", [2**40, 0, 1]),
      ("model.layers.0.self_attn.o_proj.weight", "F8_E4M3", [0, 2**53]),
      ("model.layers.0.self_attn.o_proj.weight_scale_inv", "F32", [0, 1])])
E = L0 + "experts."
ckpt(root, "unk3d", {"num_experts": 2},
     [(E + "0.gate_proj.weight", "BF16", [2, 96, 320]),
      (E + "0.up_proj.weight", "BF16", [96, 320]),
      (E + "0.down_proj.weight", "BF16", [320, 96]),
      (E + "1.gate_proj.weight", "BF16", [96, 320]),
      (E + "1.up_proj.weight", "BF16", [96, 320]),
      (E + "1.down_proj.weight", "BF16", [320, 96]),
      (L0 + "gate.weight", "BF16", [2, 320])])
