#!/usr/bin/env python3
"""Independent checks for the moe CLI tests, with plain struct (no numpy):
  moe_check.py rel_l2 A.safetensors TA B.safetensors TB   print ||a - b|| / ||b||
  moe_check.py meta FILE KEY                              print __metadata__[KEY]
  moe_check.py make_x FILE T H [NAME...]                  write BF16 [T, H] tensors (seeded LCG
                                                          values in [-2, 2)), one per NAME
                                                          (default "x")
"""
import json
import math
import struct
import sys


def header(raw):
    n = struct.unpack("<Q", raw[:8])[0]
    return n, json.loads(raw[8:8 + n])


def load(path, name):
    with open(path, "rb") as f:
        raw = f.read()
    n, hdr = header(raw)
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


def rel_l2(pa, ta, pb, tb):
    sa, a = load(pa, ta)
    sb, b = load(pb, tb)
    if sa != sb:
        sys.exit("shapes differ: %s vs %s" % (sa, sb))
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    den = math.sqrt(sum(y * y for y in b))
    print("%.6g" % (num / den if den else num))


def meta(path, key):
    with open(path, "rb") as f:
        raw = f.read()
    print(header(raw)[1].get("__metadata__", {}).get(key, ""))


def make_x(path, t, h, names):
    state = 12345
    hdr, blobs, off = {}, [], 0
    for name in names:
        vals = []
        for _ in range(t * h):
            state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
            v = ((state >> 40) / float(1 << 24)) * 4.0 - 2.0
            vals.append(struct.unpack("<I", struct.pack("<f", v))[0] >> 16)  # truncate to BF16
        blob = struct.pack("<%dH" % len(vals), *vals)
        hdr[name] = {"dtype": "BF16", "shape": [t, h], "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    js = json.dumps(hdr).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


cmd = sys.argv[1]
if cmd == "rel_l2":
    rel_l2(*sys.argv[2:6])
elif cmd == "meta":
    meta(sys.argv[2], sys.argv[3])
elif cmd == "make_x":
    make_x(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:] or ["x"])
else:
    sys.exit("unknown command " + cmd)
