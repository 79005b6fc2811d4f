#!/usr/bin/env bash
# Several shards written side by side (one writer thread per shard of a group, their jobs
# interleaved): the output is byte-identical, every file of it, to one writer's
# (NVFP4_CONVERT_WRITERS=1), with one compute worker or several, with a host-memory budget
# smaller than a job (one job at a time), and after kill -9 in the middle then --resume.
set -euo pipefail
tmp=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
. "$(dirname "$0")/../lib.sh"
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype fp8-block --hidden 512 --experts 16 \
    --moe-intermediate 256 --quiet >/dev/null
opts=(--quiet --threads 2 --max-shard-size 1MB)
NVFP4_CONVERT_WRITERS=1 "$NVFP4TOOL" convert "$tmp/src" "$tmp/ref" "${opts[@]}" --json \
    >"$tmp/ref.json"
n=$(ls "$tmp/ref" | grep -c '\.safetensors$')
[ "$n" -ge 6 ] || fail "only $n shards; the test wants at least 6"
"$NVFP4_PYTHON" - "$tmp/ref.json" 1 <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))['profile']
assert p['writer']['threads'] == int(sys.argv[2]), p['writer']
PY
same() { # same NAME: DST NAME holds exactly the reference's files, byte for byte
    diff -r "$tmp/ref" "$tmp/$1" >"$tmp/diff" 2>&1 ||
        fail "$1: differs from one writer's output: $(head -c 1000 "$tmp/diff")"
}
"$NVFP4TOOL" convert "$tmp/src" "$tmp/a" "${opts[@]}" --json >"$tmp/a.json"
same a
"$NVFP4_PYTHON" - "$tmp/a.json" 4 <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))['profile']
w = p['writer']
assert w['threads'] == int(sys.argv[2]), w
assert 0 < w['busy_max'] < w['busy'], w  # every writer wrote: none did it all
PY
NVFP4_CONVERT_WRITERS=3 NVFP4_WRITEBACK_STEP_MB=0 "$NVFP4TOOL" convert "$tmp/src" "$tmp/b" \
    "${opts[@]}" --devices cpu,cpu
same b # (no early writeback: the fsync alone)
"$NVFP4TOOL" convert "$tmp/src" "$tmp/c" "${opts[@]}" --devices cpu,cpu,cpu \
    --max-host-memory 1KiB
same c
"$NVFP4TOOL" hash --check "$tmp/c" --quiet >/dev/null || fail "hash --check of c failed"

# kill -9 once the journal names a finished shard, then --resume (default writers).
"$NVFP4TOOL" convert "$tmp/src" "$tmp/d" "${opts[@]}" --devices cpu,cpu >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 4000); do
    grep -qs '"model-[0-9]*-of-[0-9]*.safetensors' "$tmp/d/.nvfp4-progress.json" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.002
done
kill -9 $pid 2>/dev/null || fail "conversion finished before it could be killed"
wait $pid 2>/dev/null || true
[ ! -e "$tmp/d/nvfp4-manifest.json" ] || fail "the killed run left a manifest"
"$NVFP4TOOL" convert "$tmp/src" "$tmp/d" "${opts[@]}" --resume --json >"$tmp/d.json"
"$NVFP4_PYTHON" - "$tmp/d.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s['shards_reused'] >= 1, s
PY
same d
echo ok
