#!/usr/bin/env python3
"""Edit a checkpoint's safetensors data in place, independently of nvfp4tool (the header read
with struct/json); the header and every size stay as they are.

    edit_st.py DIR where TENSOR             print the shard (relative to DIR) holding TENSOR
    edit_st.py DIR f32 TENSOR VALUE         every element of F32 tensor TENSOR set to VALUE
    edit_st.py DIR bf16 TENSOR INDEX VALUE  element INDEX of BF16 tensor TENSOR set to VALUE
    edit_st.py DIR byte TENSOR INDEX VALUE  byte INDEX of TENSOR's data set to VALUE (0..255)
    edit_st.py DIR flip FILE                one byte in the middle of FILE's data area inverted
"""
import json
import math
import os
import struct
import sys


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def shards(d):
    for root, _, files in os.walk(d):
        for f in sorted(files):
            if f.endswith(".safetensors"):
                yield os.path.relpath(os.path.join(root, f), d)


def locate(d, name):
    for rel in shards(d):
        hdr, base = header(os.path.join(d, rel))
        if name in hdr:
            s, e = hdr[name]["data_offsets"]
            return rel, hdr[name], base + s, base + e
    sys.exit(f"no tensor {name} under {d}")


def write(path, at, data):
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


d, op = sys.argv[1], sys.argv[2]
if op == "where":
    print(locate(d, sys.argv[3])[0])
elif op == "f32":
    rel, t, s, e = locate(d, sys.argv[3])
    assert t["dtype"] == "F32", t
    write(os.path.join(d, rel), s, struct.pack("<f", float(sys.argv[4])) * ((e - s) // 4))
elif op == "bf16":
    rel, t, s, e = locate(d, sys.argv[3])
    assert t["dtype"] == "BF16", t
    v = float(sys.argv[5])
    bits = 0x7FC0 if math.isnan(v) else struct.unpack("<I", struct.pack("<f", v))[0] >> 16
    write(os.path.join(d, rel), s + 2 * int(sys.argv[4]), struct.pack("<H", bits))
elif op == "byte":
    rel, t, s, e = locate(d, sys.argv[3])
    i = int(sys.argv[4])
    assert 0 <= i < e - s
    write(os.path.join(d, rel), s + i, bytes([int(sys.argv[5])]))
elif op == "flip":
    path = os.path.join(d, sys.argv[3])
    hdr, base = header(path)
    at = (base + os.path.getsize(path)) // 2
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))
else:
    sys.exit(f"unknown op {op}")
