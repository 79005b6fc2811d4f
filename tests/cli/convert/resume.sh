#!/usr/bin/env bash
# kill -9 in the middle of a conversion, then --resume: finished shards are reused (their hashes
# checked) and the result is identical to an uninterrupted conversion. A changed recipe never
# reuses them. Tensor CRC-32s never come from the journal (#11 item 7): a reused shard is hashed
# again from its bytes, so wrong CRCs in the journal change nothing, and a shard whose bytes were
# changed (with its journal SHA-256) gets manifest CRCs that agree with its bytes.
set -euo pipefail
tmp=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --hidden 1024 --experts 32 \
    --moe-intermediate 256 --quiet >/dev/null
opts=(--quiet --threads 1 --max-shard-size 8MB)
"$NVFP4TOOL" convert "$tmp/src" "$tmp/ref" "${opts[@]}" >/dev/null
"$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" >/dev/null &
pid=$!
# Kill once the journal names a finished shard (a shard is renamed into place before the
# journal records it, so shard files alone do not say the journal has one).
for _ in $(seq 1 2000); do
    grep -qs '"model-[0-9]*-of-[0-9]*.safetensors' "$tmp/dst/.nvfp4-progress.json" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.005
done
kill -9 $pid 2>/dev/null || { echo "conversion finished before it could be killed" >&2; exit 1; }
wait $pid 2>/dev/null || true
[ ! -e "$tmp/dst/nvfp4-manifest.json" ] || { echo "killed run left a manifest" >&2; exit 1; }
[ -e "$tmp/dst/.nvfp4-progress.json" ] || { echo "no progress journal" >&2; exit 1; }
cp -r "$tmp/dst" "$tmp/dst2"
"$NVFP4_PYTHON" - "$tmp/dst/.nvfp4-progress.json" <<'PY'
import json, sys
p = sys.argv[1]
j = json.load(open(p))
assert j["shards"], "no finished shard in the journal"
for s in j["shards"]:
    s["crc32"] = ["00000000"] * 4096  # the field an earlier version wrote and trusted
json.dump(j, open(p, "w"))
PY
if "$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" >/dev/null 2>&1; then
    echo "non-empty DST accepted without --resume" >&2; exit 1
fi
out=$("$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" --resume --json)
reused=$("$NVFP4_PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["shards_reused"])' "$out")
[ "$reused" -ge 1 ] || { echo "resume reused no shard" >&2; exit 1; }
cmp "$tmp/ref/nvfp4-manifest.json" "$tmp/dst/nvfp4-manifest.json" ||
    { echo "resumed output differs" >&2; exit 1; }
[ ! -e "$tmp/dst/.nvfp4-progress.json" ] || { echo "journal left after success" >&2; exit 1; }
"$NVFP4TOOL" hash --check "$tmp/dst" --quiet || { echo HASHCHECK FAILED; exit 1; }
# A reused shard's bytes changed, the journal's SHA-256 updated to match.
shard=$("$NVFP4_PYTHON" - "$tmp/dst2" <<'PY'
import hashlib, json, sys
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
    if name != "__metadata__":
        a, z = t["data_offsets"]
        assert crc[name] == "%08x" % zlib.crc32(b[8 + n + a:8 + n + z]), name
PY
"$NVFP4TOOL" hash --check "$tmp/dst2" --tensors --quiet >/dev/null
# A different recipe: nothing reused, output as a fresh conversion with that recipe.
"$NVFP4TOOL" convert "$tmp/src" "$tmp/rtn" "${opts[@]}" --method rtn >/dev/null
out=$("$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" --method rtn --resume --json)
reused=$("$NVFP4_PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["shards_reused"])' "$out")
[ "$reused" -eq 0 ] || { echo "a changed recipe reused $reused shards" >&2; exit 1; }
cmp "$tmp/rtn/nvfp4-manifest.json" "$tmp/dst/nvfp4-manifest.json"
echo ok
