#!/usr/bin/env bash
# kill -9 in the middle of a conversion, then --resume: finished shards are reused (their hashes
# checked) and the result is identical to an uninterrupted conversion. A changed recipe never
# reuses them.
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
for _ in $(seq 1 2000); do
    n=$(find "$tmp/dst" -name 'model-*-of-*.safetensors' 2>/dev/null | wc -l || true)
    [ "$n" -ge 2 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.005
done
kill -9 $pid 2>/dev/null || { echo "conversion finished before it could be killed" >&2; exit 1; }
wait $pid 2>/dev/null || true
[ ! -e "$tmp/dst/nvfp4-manifest.json" ] || { echo "killed run left a manifest" >&2; exit 1; }
[ -e "$tmp/dst/.nvfp4-progress.json" ] || { echo "no progress journal" >&2; exit 1; }
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
# A different recipe: nothing reused, output as a fresh conversion with that recipe.
"$NVFP4TOOL" convert "$tmp/src" "$tmp/rtn" "${opts[@]}" --method rtn >/dev/null
out=$("$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" --method rtn --resume --json)
reused=$("$NVFP4_PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["shards_reused"])' "$out")
[ "$reused" -eq 0 ] || { echo "a changed recipe reused $reused shards" >&2; exit 1; }
cmp "$tmp/rtn/nvfp4-manifest.json" "$tmp/dst/nvfp4-manifest.json"
echo ok
