#!/usr/bin/env python3
"""Summarize a tests/gpu/device-ab.sh output: per shape and token count, each variant's fastest
round (ms), variants in the order they ran. Usage: ab_table.py AB.txt"""
import collections
import sys

times = collections.defaultdict(list)
variants, cur = [], None
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 3 and p[2].startswith("r"):
        cur = (p[0], p[1])
        if cur[0] not in variants:
            variants.append(cur[0])
        continue
    if cur and len(p) > 3 and p[1].startswith("w4"):
        times[(cur[1], int(p[0]), cur[0])].append(float(p[2]))
print("shape tokens " + " ".join(variants))
for shape, tokens in sorted({(k[0], k[1]) for k in times}):
    print(shape, tokens, " ".join("%.4f" % min(times.get((shape, tokens, v), [0])) for v in variants))
