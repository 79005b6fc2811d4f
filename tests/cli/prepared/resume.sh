#!/usr/bin/env bash
# kill -9 in the middle of a prepared --ep 2 conversion, then --resume: the finished shards of
# the rank directories are reused (the journal names them with their rank directory) and the
# result is identical to an uninterrupted conversion (same manifest and inverse record, hash
# --check clean).
set -euo pipefail
tmp=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
pid=
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --hidden 512 --experts 16 \
    --moe-intermediate 128 --layers 4 --quiet >/dev/null
opts=(--quiet --threads 1 --max-shard-size 1MB --target prepared-w4a16 --ep 2)
"$NVFP4TOOL" convert "$tmp/src" "$tmp/ref" "${opts[@]}" >/dev/null
"$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" >/dev/null &
pid=$!
# Kill once the journal names a finished rank shard holding quantized experts (a shard is renamed
# into place before the journal records it: waiting for shard files alone could kill in between
# and leave none). Its jobs' weight_scale_2 (8 hex digits; the journal keeps no CRC) must come
# back from the journal on --resume, or the inverse record, and so the manifest, would differ.
for _ in $(seq 1 4000); do
    grep -qs '"rank-0000[01]-of-00002/model-' "$tmp/dst/.nvfp4-progress.json" &&
        grep -Eqs '"[0-9a-f]{8}"' "$tmp/dst/.nvfp4-progress.json" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.002
done
kill -9 $pid 2>/dev/null || fail "conversion finished before it could be killed"
wait $pid 2>/dev/null || true
[ ! -e "$tmp/dst/nvfp4-manifest.json" ] || fail "killed run left a manifest"
grep -q '"rank-0000[01]-of-00002/model-' "$tmp/dst/.nvfp4-progress.json" ||
    fail "the journal names no rank shard: $(head -c 600 "$tmp/dst/.nvfp4-progress.json")"
out=$("$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" "${opts[@]}" --resume --json)
reused=$("$NVFP4_PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["shards_reused"])' "$out")
[ "$reused" -ge 1 ] || fail "resume reused no shard"
cmp "$tmp/ref/nvfp4-inverse.json" "$tmp/dst/nvfp4-inverse.json" ||
    fail "resumed inverse record differs (the reused shards' weight_scale_2)"
cmp "$tmp/ref/nvfp4-manifest.json" "$tmp/dst/nvfp4-manifest.json" || fail "resumed output differs"
"$NVFP4TOOL" hash --check "$tmp/dst" --quiet || fail "hash --check"
echo "prepared --ep 2: kill -9, --resume reuses rank shards, same output"
