#!/usr/bin/env python3
"""rel_l2.py A.safetensors TENSOR_A B.safetensors TENSOR_B: print ||a - b|| / ||b|| of two
F32/BF16 tensors of the same shape, read with plain struct (no numpy), as an independent check of
nvfp4tool's output."""
import json
import math
import struct
import sys


def load(path, name):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    t = hdr[name]
    b, e = t["data_offsets"]
    data = raw[8 + n + b:8 + n + e]
    if t["dtype"] == "F32":
        vals = struct.unpack("<%df" % (len(data) // 4), data)
    elif t["dtype"] == "BF16":
        vals = [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                for h in struct.unpack("<%dH" % (len(data) // 2), data)]
    else:
        sys.exit("%s: %s is %s" % (path, name, t["dtype"]))
    return t["shape"], list(vals)


sa, a = load(sys.argv[1], sys.argv[2])
sb, b = load(sys.argv[3], sys.argv[4])
if sa != sb:
    sys.exit("shapes differ: %s vs %s" % (sa, sb))
num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
den = math.sqrt(sum(y * y for y in b))
print("%.6g" % (num / den if den else num))
