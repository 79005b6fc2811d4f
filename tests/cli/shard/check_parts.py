"""Part records of `convert --shard I/N` read independently of the tool (tests/cli/shard).

usage: check_parts.py SCHEMA PARTS_DIR N ONE_JOB_DST
Validates every record against schemas/part.schema.json (when jsonschema is installed), then
checks from the one-job conversion's manifest: the N records hold every output shard exactly
once, each part a contiguous run of them in name order, with the size, SHA-256 and tensor
CRC-32s the one-job manifest records; the source files are hashed once in all, with the
manifest's SHA-256s; and every record carries one fingerprint.
"""
import json
import os
import sys

schema_path, parts_dir, n, one = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
records = [json.load(open(os.path.join(parts_dir, "%d-of-%d.json" % (i, n)))) for i in range(n)]
try:
    import jsonschema
except ImportError:
    jsonschema = None
if jsonschema:
    v = jsonschema.Draft202012Validator(json.load(open(schema_path)))
    for r in records:
        v.validate(r)
m = json.load(open(os.path.join(one, "nvfp4-manifest.json")))
files = {f["name"]: f for f in m["files"]}
shards = sorted(f for f in files if f.endswith(".safetensors"))
crc = {(t["file"], t["name"]): t["crc32"] for t in m["tensors"]}
assert len({r["fingerprint_sha256"] for r in records}) == 1, "parts disagree on the fingerprint"
seen = []
for i, r in enumerate(records):
    assert (r["part"], r["parts"]) == (i, n), (r["part"], r["parts"])
    names = [s["name"] for s in r["shards"]]
    if names:  # contiguous in plan (= name) order
        k = shards.index(names[0])
        assert names == shards[k:k + len(names)], ("part %d not contiguous" % i, names)
    for s in r["shards"]:
        f = files[s["name"]]
        assert (s["bytes"], s["sha256"]) == (f["bytes"], f["sha256"]), s["name"]
        got = {(s["name"], t["name"]): t["crc32"] for t in s["tensors"]}
        want = {k: c for k, c in crc.items() if k[0] == s["name"]}
        assert got == want, "CRC-32s of %s differ from the one-job manifest" % s["name"]
    seen += names
assert sorted(seen) == shards, "shards not covered exactly once: %s" % sorted(seen)
src = {f["name"]: f for f in m["source"]["files"]}
hashed = [f["name"] for r in records for f in r["sources"]]
assert sorted(hashed) == sorted(src), "sources not hashed exactly once: %s" % hashed
for r in records:
    for f in r["sources"]:
        assert (f["bytes"], f["sha256"]) == (src[f["name"]]["bytes"], src[f["name"]]["sha256"])
print("parts ok: %d records, %d shards" % (n, len(shards)))
