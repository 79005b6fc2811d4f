#!/usr/bin/env bash
# A conversion cut into many shards (shards written as pieces, then hashed by reading them back,
# several at once): the manifest's SHA-256 of every file is what sha256sum computes, `hash`
# (its own computation of every file's SHA-256 and tensor's CRC-32) rewrites the manifest
# byte-identical, and `hash --check --tensors` finds nothing.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype fp8-block --hidden 256 --experts 8 \
    --quiet >/dev/null
"$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" --quiet --max-shard-size 100KB >/dev/null
n=$(ls "$tmp/dst" | grep -c '\.safetensors$')
[ "$n" -ge 20 ] || { echo "only $n shards" >&2; exit 1; }
ls -a "$tmp/dst" | grep -q '\.tmp$' && { echo "a temporary file is left" >&2; exit 1; }
(cd "$tmp/dst" && sha256sum -- *.safetensors) >"$tmp/sums"
"$NVFP4_PYTHON" - "$tmp/dst/nvfp4-manifest.json" "$tmp/sums" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
listed = {f['name']: f['sha256'] for f in m['files']}
for line in open(sys.argv[2]):
    sha, name = line.split()
    assert listed.get(name) == sha, (name, listed.get(name), sha)
PY
cp "$tmp/dst/nvfp4-manifest.json" "$tmp/converted.json"
"$NVFP4TOOL" hash "$tmp/dst" --quiet >/dev/null
cmp "$tmp/converted.json" "$tmp/dst/nvfp4-manifest.json" ||
    { echo "hash computed a different manifest than convert wrote" >&2; exit 1; }
"$NVFP4TOOL" hash "$tmp/dst" --check --tensors --quiet >/dev/null
echo ok
