#!/usr/bin/env bash
# convert --shard I/N for N = 1, 2, 3, 7 (parts one after another; N = 7 also all at once, as
# background jobs into a DST none of them created), then merge: DST is byte-identical to a
# one-job convert (diff -r), `hash --check` passes, and before the merge the part records
# (checked by check_parts.py against the one-job manifest and schemas/part.schema.json) cover
# every shard once with the one-job hashes.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
"$T" synth "$tmp/src" --preset deepseek-v3 --dtype fp8-block --hidden 128 --moe-intermediate 64 \
    --experts 8 --quiet >/dev/null
opts=(--quiet --max-shard-size 100KB --threads 2)
"$T" convert "$tmp/src" "$tmp/one" "${opts[@]}" >/dev/null
n_shards=$(ls "$tmp/one" | grep -c 'safetensors$')
[ "$n_shards" -ge 7 ] || fail "only $n_shards shards: the test wants at least 7"
merged() { # N DIR: merge, compare, check
    cp -r "$2/.nvfp4-parts" "$tmp/parts-$1"
    "$NVFP4_PYTHON" "$(dirname "$0")/check_parts.py" "$NVFP4_SCHEMAS/part.schema.json" \
        "$tmp/parts-$1" "$1" "$tmp/one" >/dev/null || fail "N=$1: part records"
    "$T" merge "$2" --quiet --json >"$tmp/merge.json" || fail "N=$1: merge exited $?"
    "$NVFP4_PYTHON" - "$tmp/merge.json" "$1" "$n_shards" <<'PY' || fail "N=$1: merge --json"
import json, sys
s = json.load(open(sys.argv[1]))
assert (s["parts"], s["shards"], s["shards_rehashed"]) == (int(sys.argv[2]), int(sys.argv[3]), 0), s
PY
    diff -r "$tmp/one" "$2" || fail "N=$1: merged DST differs from the one-job conversion"
    [ ! -e "$2/.nvfp4-parts" ] || fail "N=$1: merge left .nvfp4-parts"
    "$T" hash "$2" --check --quiet >/dev/null || fail "N=$1: hash --check after merge"
}
for n in 1 2 3 7; do
    for ((i = 0; i < n; i++)); do
        "$T" convert "$tmp/src" "$tmp/p$n" "${opts[@]}" --shard "$i/$n" >/dev/null ||
            fail "--shard $i/$n exited $?"
        [ ! -e "$tmp/p$n/nvfp4-manifest.json" ] && [ ! -e "$tmp/p$n/config.json" ] &&
            [ ! -e "$tmp/p$n/model.safetensors.index.json" ] && [ ! -e "$tmp/p$n/tokenizer.json" ] ||
            fail "--shard $i/$n wrote a manifest, config, index or side file"
    done
    merged "$n" "$tmp/p$n"
done
pids=()
for i in 0 1 2 3 4 5 6; do
    "$T" convert "$tmp/src" "$tmp/c7" "${opts[@]}" --threads 1 --shard "$i/7" >"$tmp/c7-$i.log" 2>&1 &
    pids+=($!)
done
for i in 0 1 2 3 4 5 6; do
    wait "${pids[$i]}" || fail "concurrent --shard $i/7 exited: $(cat "$tmp/c7-$i.log")"
done
merged 7 "$tmp/c7"
echo "N = 1, 2, 3, 7 (and 7 at once): merged DST identical to the one-job conversion"
