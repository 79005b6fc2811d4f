#!/usr/bin/env bash
# The main job on the built-in default: synthesize a small DeepSeek-V3-like FP8 checkpoint,
# inspect it, convert it to ModelOpt NVFP4 (printing the conversion summary), check the output
# against its manifest and inspect it; then the same source as kernel-ready prepared-w4a16 shards
# split over 2 expert-parallel ranks, checked and inspected, and converted back to ModelOpt (the
# inverse: the files of the direct conversion); then a one-rank prepared-w4a16
# conversion verified against the source (passes, exit 0) and a copy broken on purpose (one
# expert's weight nibbles swapped: fails, exit 3, naming the layer and expert). Last, the CI gate:
# validate passes the ModelOpt output (exit 0) and fails a copy with one byte flipped (exit 3,
# manifest.sha256 naming the shard and manifest.crc32 the tensor).
#   scripts/demo.sh [WORKDIR]      (default: out/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
work=${1:-out/demo}
jobs=$(nproc 2>/dev/null || echo 2)

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" --target nvfp4tool
tool=build/nvfp4tool

rm -rf "$work"
mkdir -p "$work"
echo "== synth: DeepSeek-V3-like FP8-block checkpoint -> $work/src" >&2
"$tool" synth "$work/src" --preset deepseek-v3 --dtype fp8-block --seed 0
echo "== inspect $work/src" >&2
"$tool" inspect "$work/src" --summary
echo "== convert $work/src -> $work/nvfp4" >&2
"$tool" convert "$work/src" "$work/nvfp4"
echo "== hash --check $work/nvfp4 (every byte against nvfp4-manifest.json)" >&2
"$tool" hash --check "$work/nvfp4"
echo "== inspect $work/nvfp4" >&2
"$tool" inspect "$work/nvfp4" --summary | sed -n '1,2p;/^MoE/,/^$/p'
echo "== convert $work/src -> $work/prepared (prepared-w4a16, --ep 2)" >&2
"$tool" convert "$work/src" "$work/prepared" --target prepared-w4a16 --ep 2
echo "== hash --check $work/prepared (both ranks against the one manifest)" >&2
"$tool" hash --check "$work/prepared"
echo "== inspect $work/prepared, then its rank 1" >&2
"$tool" inspect "$work/prepared"
"$tool" inspect "$work/prepared/rank-00001-of-00002" --summary | sed -n '1,4p'
echo "== convert $work/prepared -> $work/back (--target modelopt: the inverse, both ranks)" >&2
"$tool" convert "$work/prepared" "$work/back" --target modelopt --quiet
# every file but the manifest (which names the source it was made from) byte for byte
d=$(diff -rq "$work/nvfp4" "$work/back" | grep -v 'nvfp4-manifest.json differ$' || true)
[ -z "$d" ] || { echo "$d" >&2; exit 1; }
echo "the inverse: $work/back holds $work/nvfp4's files byte for byte (but the manifest)" >&2
echo "== convert $work/src -> $work/prepared1 (--target prepared-w4a16)" >&2
"$tool" convert "$work/src" "$work/prepared1" --target prepared-w4a16 --quiet
echo "== verify $work/prepared1 --reference $work/src" >&2
rc=0
"$tool" verify "$work/prepared1" --reference "$work/src" || rc=$?
echo "verify exit code: $rc (0: every MoE layer passed)" >&2
[ "$rc" -eq 0 ] || exit 1
if command -v python3 >/dev/null; then
    echo "== verify a broken copy: layer 2, expert 5's weight nibbles swapped within bytes" >&2
    python3 tests/cli/verify/break_ckpt.py "$work/prepared1" "$work/broken" nibbles 2 5
    rc=0
    "$tool" verify "$work/broken" --reference "$work/src" --layers 2 || rc=$?
    echo "verify exit code: $rc (3: verification failed, as it must)" >&2
    [ "$rc" -eq 3 ] || exit 1
fi
echo "== validate $work/nvfp4 (the CI gate: structure, configs, scales, hashes)" >&2
"$tool" validate "$work/nvfp4"
echo "== validate a copy with one byte flipped in the middle of its first shard" >&2
rm -rf "$work/flipped"
cp -r "$work/nvfp4" "$work/flipped"
shard="$work/flipped/model-00001-of-00001.safetensors"
at=$(($(stat -c %s "$shard") / 2))
byte=$(od -An -tu1 -j "$at" -N1 "$shard" | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 255)))" | dd of="$shard" bs=1 seek="$at" conv=notrunc status=none
rc=0
"$tool" validate "$work/flipped" || rc=$?
echo "validate exit code: $rc (3: a finding, as it must)" >&2
[ "$rc" -eq 3 ] || exit 1
echo "demo: $work/nvfp4 is a ModelOpt NVFP4 checkpoint, $work/prepared its kernel-ready" \
    "prepared-w4a16 form in 2 ranks; see their nvfp4-manifest.json" >&2
