"""Independent reader for the hash tests: the CRC-32 (zlib) of every tensor of every
.safetensors file under a directory, from the file bytes and the JSON header alone.

usage: st_crc.py DIR            -> prints "file<TAB>tensor<TAB>dtype<TAB>shape<TAB>crc32" lines
       st_crc.py DIR FILE OFFSET -> prints the tensor whose data holds byte OFFSET of FILE
"""
import json
import os
import struct
import sys
import zlib


def tensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    start = 8 + n
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        yield name, t, start + b, start + e, raw[start + b:start + e]


def main():
    root = sys.argv[1]
    if len(sys.argv) == 4:
        off = int(sys.argv[3])
        for name, _, b, e, _ in tensors(os.path.join(root, sys.argv[2])):
            if b <= off < e:
                print(name)
        return
    for dirpath, _, files in os.walk(root):
        for fn in files:
            if not fn.endswith(".safetensors"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, fn), root)
            for name, t, _, _, data in tensors(os.path.join(dirpath, fn)):
                shape = ",".join(str(d) for d in t["shape"])
                print(f"{rel}\t{name}\t{t['dtype']}\t{shape}\t{zlib.crc32(data):08x}")


main()
