#!/usr/bin/env bash
# What the prepared layout cannot take is refused before anything is written (exit 2, the tensor
# and the reason named, DST not created): I not a multiple of 64, E not divisible by --ep, an
# layer's experts partly out of scope; and
# --scale-layout / --ep with --target modelopt.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL

"$T" synth "$tmp/i96" --preset qwen3-moe --dtype bf16 --layers 1 --experts 2 \
    --moe-intermediate 96 --quiet
expect 2 "model.layers.0.mlp.experts.0.gate_proj.weight: I=96 is not a multiple of 64 (w13 interleave)" \
    -- "$T" convert "$tmp/i96" "$tmp/dst" --target prepared-w4a16
[ ! -e "$tmp/dst" ] || fail "I=96 created DST"

"$T" synth "$tmp/e6" --preset qwen3-moe --dtype bf16 --layers 1 --experts 6 --quiet
expect 2 "E=6 experts do not split into --ep 4 equal ranges" -- \
    "$T" convert "$tmp/e6" "$tmp/dst" --target prepared-w4a4 --ep 4
[ ! -e "$tmp/dst" ] || fail "E % ep created DST"
mkdir "$tmp/empty"
expect 2 "E=6 experts do not split into --ep 4 equal ranges" -- \
    "$T" convert "$tmp/e6" "$tmp/empty" --target prepared-w4a4 --ep 4
[ -z "$(ls -A "$tmp/empty")" ] || fail "E % ep wrote into an empty DST"

expect 2 "model.layers.0.mlp.experts.3.down_proj.weight: not converted (excluded by '*.experts.3.down_proj*')" -- \
    "$T" convert "$tmp/e6" "$tmp/dst" --target prepared-w4a16 --exclude '*.experts.3.down_proj*'
[ ! -e "$tmp/dst" ] || fail "a partial layer created DST"

expect 2 "apply to the prepared targets only" -- "$T" convert "$tmp/e6" "$tmp/dst" --ep 2
expect 2 "apply to the prepared targets only" -- "$T" convert "$tmp/e6" "$tmp/dst" --scale-layout 8x4
[ ! -e "$tmp/dst" ] || fail "a usage error created DST"
echo "prepared refusals: exit 2 before anything is written"
