#!/usr/bin/env bash
# --target prepared-w4a16 --ep 2 (shards in two rank directories) split by --shard I/N for N = 2
# and 7 (7: all parts at once), then merge: byte-identical to the one-job conversion (diff -r,
# rank directories included), `hash --check` passes, the part records check out against the
# one-job manifest (check_parts.py), and --rehash agrees with them.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
"$T" synth "$tmp/src" --preset deepseek-v3 --dtype bf16 --hidden 128 --moe-intermediate 64 \
    --experts 8 --quiet >/dev/null
opts=(--quiet --target prepared-w4a16 --ep 2 --max-shard-size 100KB --threads 1)
"$T" convert "$tmp/src" "$tmp/one" "${opts[@]}" >/dev/null
n_shards=$(find "$tmp/one" -name 'model-*.safetensors' | wc -l)
[ "$n_shards" -ge 7 ] && [ -d "$tmp/one/rank-00001-of-00002" ] ||
    fail "expected >= 7 shards in two rank directories, got $n_shards"
for n in 2 7; do
    pids=()
    for ((i = 0; i < n; i++)); do
        if [ "$n" = 7 ]; then
            "$T" convert "$tmp/src" "$tmp/p$n" "${opts[@]}" --shard "$i/$n" >/dev/null 2>&1 &
            pids+=($!)
        else
            "$T" convert "$tmp/src" "$tmp/p$n" "${opts[@]}" --shard "$i/$n" >/dev/null ||
                fail "--shard $i/$n exited $?"
        fi
    done
    for pid in "${pids[@]}"; do wait "$pid" || fail "a concurrent part of $n exited $?"; done
    "$NVFP4_PYTHON" "$(dirname "$0")/check_parts.py" "$NVFP4_SCHEMAS/part.schema.json" \
        "$tmp/p$n/.nvfp4-parts" "$n" "$tmp/one" >/dev/null || fail "N=$n: part records"
    "$T" merge "$tmp/p$n" --quiet --rehash --threads 2 || fail "N=$n: merge --rehash exited $?"
    diff -r "$tmp/one" "$tmp/p$n" || fail "N=$n: merged DST differs from the one-job conversion"
    grep -qE '"modelopt_jobs":[[:space:]]*\[\[' "$tmp/p$n/nvfp4-inverse.json" ||
        fail "N=$n: the merged inverse record lists no modelopt jobs"
    "$T" hash "$tmp/p$n" --check --quiet >/dev/null || fail "N=$n: hash --check after merge"
done
echo "prepared-w4a16 --ep 2, N = 2 and 7: merged DST identical to the one-job conversion"
