#!/usr/bin/env bash
# Convert twice: byte-identical manifests (and so identical hashes of every file). Any thread
# count and shard size gives the same tensors (names, dtypes, shapes, CRC-32 in the manifests).
# Several compute workers (--devices cpu,cpu,cpu), also under a host-memory budget smaller than
# one job, write the same bytes as one.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4TOOL" synth "$tmp/src" --preset deepseek-v3 --dtype fp8-block --hidden 128 \
    --moe-intermediate 64 --experts 8 --quiet >/dev/null
"$NVFP4TOOL" convert "$tmp/src" "$tmp/a" --quiet --threads 1 --max-shard-size 200KB >/dev/null
"$NVFP4TOOL" convert "$tmp/src" "$tmp/b" --quiet --threads 1 --max-shard-size 200KB >/dev/null
cmp "$tmp/a/nvfp4-manifest.json" "$tmp/b/nvfp4-manifest.json" ||
    { echo "two runs wrote different manifests" >&2; exit 1; }
for f in "$tmp"/a/*; do
    cmp -s "$f" "$tmp/b/$(basename "$f")" || { echo "$(basename "$f") differs" >&2; exit 1; }
done
for budget in 8GiB 1KiB; do
    rm -rf "$tmp/w"
    "$NVFP4TOOL" convert "$tmp/src" "$tmp/w" --quiet --devices cpu,cpu,cpu --max-host-memory $budget \
        --max-shard-size 200KB >/dev/null
    cmp "$tmp/a/nvfp4-manifest.json" "$tmp/w/nvfp4-manifest.json" ||
        { echo "--devices cpu,cpu,cpu (budget $budget) wrote a different manifest" >&2; exit 1; }
done
"$NVFP4TOOL" convert "$tmp/src" "$tmp/c" --quiet --threads 3 --max-shard-size 1GB >/dev/null
"$NVFP4_PYTHON" - "$tmp/a/nvfp4-manifest.json" "$tmp/c/nvfp4-manifest.json" <<'PY'
import json, sys
a, c = (json.load(open(p)) for p in sys.argv[1:])
strip = lambda m: sorted((t['name'], t['dtype'], t['shape'], t['crc32']) for t in m['tensors'])
assert strip(a) == strip(c), 'tensors differ between thread counts / shard sizes'
shards = lambda m: [f['name'] for f in m['files'] if f['name'].endswith('.safetensors')]
assert len(shards(a)) > 1 and len(shards(c)) == 1, (shards(a), shards(c))
PY
echo ok
