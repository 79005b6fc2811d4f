#!/usr/bin/env bash
# kill -9 of `convert` at random points, then `convert --resume`: the result is byte-identical to
# an uninterrupted conversion, every file of it (issue 14).
#   1. Five kills in one DST, one after the other (each run a --resume of the last): the k-th
#      when DST holds a random fraction in [(k-1)/5, k/5) x 0.9 of the output's shard bytes,
#      the runs' writes slowed by the shim so that the poller gets there first.
#      The fractions come from a seeded RNG; the seed is printed (NVFP4_KILL_SEED=S repeats a
#      run). A last --resume finishes.
#   2. Kills in the finish, by an LD_PRELOAD shim (kill_shim.c) on rename(): with the last shard
#      under its final name but not yet in the journal, with the index written but not renamed,
#      with the index in place, and with the manifest written but not renamed; each in a fresh
#      DST, then --resume.
# After each kill: no manifest (what marks a checkpoint complete). After each resume: `diff -r`
# against the reference and `hash --check`. Nothing outside DST is written (the parent of DST,
# which holds SRC, is the same before and after, names, sizes and mtimes).
set -euo pipefail
tmp=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
. "$(dirname "$0")/../lib.sh"
kill_shim
w=$tmp/w # SRC, the reference and DST; the test's own files stay in $tmp
mkdir "$w"
"$NVFP4TOOL" synth "$w/src" --preset qwen3-moe --dtype bf16 --hidden 512 --experts 16 \
    --moe-intermediate 256 --quiet >/dev/null
opts=(--quiet --threads 1 --max-shard-size 2MB)
"$NVFP4TOOL" convert "$w/src" "$w/ref" "${opts[@]}" >/dev/null
total=$(find "$w/ref" -name 'model-*-of-*.safetensors' -printf '%s\n' | awk '{s += $1} END {print s}')
nshards=$(find "$w/ref" -name 'model-*-of-*.safetensors' | wc -l)
[ "$nshards" -ge 4 ] || fail "the reference has $nshards shards; the test wants at least 4"
last=$(cd "$w/ref" && ls model-*-of-*.safetensors | sort | tail -n 1)
before=$(snapshot "$w" dst ref)

same_as_ref() { # same_as_ref WHAT: DST complete and identical to the reference
    diff -r "$w/ref" "$w/dst" >"$tmp/diff" 2>&1 || fail "$1: differs from the reference: $(head -c 1000 "$tmp/diff")"
    (cd "$w/ref" && find . -type f -exec sha256sum {} + | sort -k 2) >"$tmp/ref.sums"
    (cd "$w/dst" && find . -type f -exec sha256sum {} + | sort -k 2) >"$tmp/dst.sums"
    cmp -s "$tmp/ref.sums" "$tmp/dst.sums" || fail "$1: file hashes differ"
    "$NVFP4TOOL" hash --check "$w/dst" --quiet >/dev/null || fail "$1: hash --check failed"
}
killed() { # killed WHAT: the last run was killed by SIGKILL and left no manifest
    [ "$rc" -eq 137 ] || fail "$1: exit $rc, expected 137 (SIGKILL)"
    [ ! -e "$w/dst/nvfp4-manifest.json" ] || fail "$1: a killed run left a manifest"
}
dst_bytes() {
    find "$w/dst" -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

# 1. Random points.
seed=${NVFP4_KILL_SEED:-$(date +%s)}
mapfile -t points < <("$NVFP4_PYTHON" -c '
import random, sys
rng = random.Random(int(sys.argv[1]))
for k in range(5):
    print(int((k + rng.random()) / 5 * 0.9 * int(sys.argv[2])))' "$seed" "$total")
echo "seed $seed (NVFP4_KILL_SEED repeats it): kill -9 at ${points[*]} of $total shard bytes"
# Writes throttled to 32 KiB a millisecond (the shim), so that a run cannot get from a kill
# point to its end between two polls on a busy machine (unthrottled, 10 MB take a few ms).
for at in "${points[@]}"; do
    KILL_WRITE_CHUNK=32768 KILL_WRITE_DELAY_US=1000 LD_PRELOAD="$tmp/kill_shim.so" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$NVFP4TOOL" convert "$w/src" "$w/dst" "${opts[@]}" --resume >/dev/null 2>"$tmp/err" &
    pid=$!
    while kill -0 $pid 2>/dev/null && [ "$(dst_bytes)" -lt "$at" ]; do sleep 0.002; done
    rc=0
    kill -9 $pid 2>/dev/null || true
    wait $pid || rc=$?
    # A run that ended by itself must have failed nothing: it got past the point between polls.
    [ "$rc" -ne 0 ] || fail "seed $seed: the run to be killed at byte $at finished first"
    killed "seed $seed, kill at byte $at (DST held $(dst_bytes))"
done
"$NVFP4TOOL" convert "$w/src" "$w/dst" "${opts[@]}" --resume >/dev/null
same_as_ref "seed $seed, after 5 kills and a resume"

# 2. The finish.
for step in "$last after" "model.safetensors.index.json before" \
    "model.safetensors.index.json after" "nvfp4-manifest.json before"; do
    read -r name when <<<"$step"
    rm -rf "$w/dst"
    KILL_AT=$name KILL_WHEN=$when LD_PRELOAD="$tmp/kill_shim.so" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$NVFP4TOOL" convert "$w/src" "$w/dst" "${opts[@]}" >/dev/null 2>"$tmp/err" &
    pid=$!
    rc=0
    wait $pid || rc=$? # in the background: no "Killed" line from bash
    killed "kill $when renaming $name"
    case $when in
    before) [ -e "$w/dst/$name.tmp" ] && [ ! -e "$w/dst/$name" ] ||
        fail "kill before renaming $name: $name.tmp is not there alone" ;;
    after) [ -e "$w/dst/$name" ] || fail "kill after renaming $name: it is not there" ;;
    esac
    "$NVFP4TOOL" convert "$w/src" "$w/dst" "${opts[@]}" --resume >/dev/null
    same_as_ref "kill $when renaming $name, then --resume"
done

after=$(snapshot "$w" dst ref)
[ "$before" = "$after" ] || fail "written outside DST: $(diff <(echo "$before") <(echo "$after") | head -20)"
echo "ok: seed $seed, 5 random kills and 4 in the finish, each resumed to the reference's bytes"
