"""Write a small FP8-block checkpoint (config.json + model.safetensors) for the convert tests.

make_fp8.py DIR CASE, CASE one of:
  flat   an attention weight F8_E4M3 [0, 2^53] (no bytes) with its scale F32 [0, 2^46]
  fused  fused experts gate_up_proj F8_E4M3 [8, 0, 2^40] (no bytes), scale [8, 0, 2^33]
  down   fused experts down_proj F8_E4M3 [2^40, 0, 16] (no bytes), scale [2^40, 0, 1]
  nan    o_proj holds an E4M3 NaN (0x7f) at [5, 9]
Every case also has model.layers.0.self_attn.o_proj.weight F8_E4M3 [128, 128] (all 1.0,
byte 0x38) with scale_inv 0.5, so the checkpoint is FP8-block.
"""
import json
import os
import struct
import sys

d, case = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)
tensors, data = {}, bytearray()


def add(name, dtype, shape, raw=b""):
    global data
    tensors[name] = {"dtype": dtype, "shape": shape,
                     "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw


o_proj = bytearray([0x38]) * (128 * 128)
if case == "nan":
    o_proj[5 * 128 + 9] = 0x7F
add("model.layers.0.self_attn.o_proj.weight", "F8_E4M3", [128, 128], bytes(o_proj))
add("model.layers.0.self_attn.o_proj.weight_scale_inv", "F32", [1, 1], struct.pack("<f", 0.5))
if case == "flat":
    add("model.layers.0.self_attn.q_proj.weight", "F8_E4M3", [0, 2**53])
    add("model.layers.0.self_attn.q_proj.weight_scale_inv", "F32", [0, 2**46])
elif case == "fused":
    add("model.layers.0.mlp.experts.gate_up_proj", "F8_E4M3", [8, 0, 2**40])
    add("model.layers.0.mlp.experts.gate_up_proj_scale_inv", "F32", [8, 0, 2**33])
elif case == "down":
    add("model.layers.0.mlp.experts.down_proj", "F8_E4M3", [2**40, 0, 16])
    add("model.layers.0.mlp.experts.down_proj_scale_inv", "F32", [2**40, 0, 1])
header = json.dumps(tensors).encode()
header += b" " * (-len(header) % 8)
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + bytes(data))
config = {"architectures": ["Qwen3MoeForCausalLM"],
          "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                  "weight_block_size": [128, 128],
                                  "activation_scheme": "dynamic"}}
with open(os.path.join(d, "config.json"), "w") as f:
    json.dump(config, f)
