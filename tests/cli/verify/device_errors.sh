#!/usr/bin/env bash
# verify --device cuda where no GPU can be used: exit 4 naming the device, nothing on stdout;
# --per-token-activations with --device cuda is a usage error (exit 2). On a machine with a GPU
# the first check does not apply: skipped (77) after the usage check.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
"$T" synth "$tmp/syn" --preset qwen3-moe --dtype bf16 --layers 1 --experts 4 --quiet
"$T" convert "$tmp/syn" "$tmp/mo" --quiet
rc=0
"$T" verify "$tmp/mo" --device cuda --precision w4a4 --per-token-activations >"$tmp/out" \
    2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] || fail "per-token on cuda: exit $rc, want 2"
grep -q "per-token-activations" "$tmp/err" || fail "per-token on cuda: $(cat "$tmp/err")"
if nvidia-smi -L >/dev/null 2>&1; then
    echo "a GPU is present: the exit-4 check does not apply (cuda.sh runs the kernels)"
    exit 77
fi
rc=0
"$T" verify "$tmp/mo" --device cuda >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 4 ] || fail "no GPU: exit $rc, want 4: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "no GPU: stdout not empty"
grep -qi "cuda" "$tmp/err" || fail "no GPU: the message does not name the device: $(cat "$tmp/err")"
echo "verify --device cuda without a GPU: exit 4; per-token on cuda: exit 2"
