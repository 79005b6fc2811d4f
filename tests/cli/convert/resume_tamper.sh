#!/usr/bin/env bash
# --resume never takes tensor CRC-32s from the journal: a reused shard is hashed again (SHA-256
# and every tensor's CRC-32) from its bytes. Wrong CRCs written into the journal change nothing;
# a shard whose bytes were changed (and its journal SHA-256 with them) gets manifest CRCs that
# agree with its bytes (checked here with zlib), so `hash --check --tensors` passes.
set -euo pipefail
tmp=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --hidden 1024 --experts 32 \
    --moe-intermediate 256 --quiet >/dev/null
opts=(--quiet --threads 1 --max-shard-size 8MB)
"$NVFP4TOOL" convert "$tmp/src" "$tmp/ref" "${opts[@]}" >/dev/null
"$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 2000); do
    n=$(find "$tmp/dst" -name 'model-*-of-*.safetensors' 2>/dev/null | wc -l || true)
    [ "$n" -ge 2 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.005
done
kill -9 $pid 2>/dev/null || { echo "conversion finished before it could be killed" >&2; exit 1; }
wait $pid 2>/dev/null || true
pid=
cp -r "$tmp/dst" "$tmp/dst2"
# 1. Wrong CRCs in the journal (the field an earlier version wrote and trusted).
"$NVFP4_PYTHON" - "$tmp/dst/.nvfp4-progress.json" <<'PY'
import json, sys
p = sys.argv[1]
j = json.load(open(p))
assert j["shards"], "no finished shard in the journal"
for s in j["shards"]:
    s["crc32"] = ["00000000"] * 4096
json.dump(j, open(p, "w"))
PY
out=$("$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" --resume --json)
"$NVFP4_PYTHON" -c 'import json,sys; assert json.loads(sys.argv[1])["shards_reused"] >= 1' "$out"
cmp "$tmp/ref/nvfp4-manifest.json" "$tmp/dst/nvfp4-manifest.json" ||
    { echo "journal CRCs reached the manifest" >&2; exit 1; }
# 2. A reused shard's bytes changed, the journal's SHA-256 updated to match: the manifest's
# CRC-32s are those of the bytes.
shard=$("$NVFP4_PYTHON" - "$tmp/dst2" <<'PY'
import hashlib, json, struct, sys
d = sys.argv[1]
jp = d + "/.nvfp4-progress.json"
j = json.load(open(jp))
s = j["shards"][0]
p = d + "/" + s["name"]
b = bytearray(open(p, "rb").read())
b[-3] ^= 0x21  # in the last tensor's data
open(p, "wb").write(b)
s["sha256"] = hashlib.sha256(b).hexdigest()
json.dump(j, open(jp, "w"))
print(s["name"])
PY
)
"$NVFP4TOOL" convert "$tmp/src" "$tmp/dst2" "${opts[@]}" --resume >/dev/null
"$NVFP4_PYTHON" - "$tmp/dst2" "$shard" <<'PY'
import json, struct, sys, zlib
d, shard = sys.argv[1], sys.argv[2]
b = open(d + "/" + shard, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
m = json.load(open(d + "/nvfp4-manifest.json"))
crc = {t["name"]: t["crc32"] for t in m["tensors"] if t["file"] == shard}
for name, t in hdr.items():
    if name == "__metadata__":
        continue
    a, z = t["data_offsets"]
    want = "%08x" % zlib.crc32(b[8 + n + a:8 + n + z])
    assert crc[name] == want, (name, crc[name], want)
PY
"$NVFP4TOOL" hash --check "$tmp/dst2" --tensors --quiet >/dev/null
echo ok
