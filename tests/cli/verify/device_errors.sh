#!/usr/bin/env bash
# verify --device cuda where no GPU can be used: exit 4 naming the device, nothing on stdout,
# --per-token-activations too (it runs on the GPU kernels since stop 34; before, a usage error).
# On a machine with a GPU these checks do not apply: skipped (77; cuda.sh runs the kernels).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
if nvidia-smi -L >/dev/null 2>&1; then
    echo "a GPU is present: the exit-4 checks do not apply (cuda.sh runs the kernels)"
    exit 77
fi
"$T" synth "$tmp/syn" --preset qwen3-moe --dtype bf16 --layers 1 --experts 4 --quiet
"$T" convert "$tmp/syn" "$tmp/mo" --quiet
for extra in "" "--precision w4a4 --per-token-activations"; do
    rc=0
    # shellcheck disable=SC2086
    "$T" verify "$tmp/mo" --device cuda $extra >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq 4 ] || fail "no GPU ($extra): exit $rc, want 4: $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "no GPU ($extra): stdout not empty"
    grep -qi "cuda" "$tmp/err" ||
        fail "no GPU ($extra): the message does not name the device: $(cat "$tmp/err")"
done
echo "verify --device cuda without a GPU: exit 4, with and without --per-token-activations"
