#!/usr/bin/env bash
# Usage and runtime errors: exit codes and messages.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$NVFP4_TESTDATA/hf/qwen3moe-bf16
expect() { # expect CODE PATTERN -- command...
    local code=$1 pat=$2 rc=0
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ $rc -eq "$code" ] || { echo "exit $rc, expected $code: $*" >&2; cat "$tmp/err" >&2; exit 1; }
    [ -z "$pat" ] || grep -q -- "$pat" "$tmp/err" || { echo "no '$pat' in: $(cat "$tmp/err")" >&2; exit 1; }
}
mkdir -p "$tmp/full" && echo x >"$tmp/full/keep.txt"
expect 2 "not empty" -- "$NVFP4TOOL" convert "$src" "$tmp/full"
[ -f "$tmp/full/keep.txt" ] || { echo "DST touched" >&2; exit 1; }
expect 1 "not implemented" -- "$NVFP4TOOL" convert "$src" "$tmp/p" --target prepared-w4a16
expect 2 "target" -- "$NVFP4TOOL" convert "$src" "$tmp/p" --target nonsense
expect 2 "SRC DST\|expected\|argument" -- "$NVFP4TOOL" convert "$src"
echo '{"model.layers.0.mlp.experts.0.gate_proj": 0}' >"$tmp/zero.json"
expect 2 "positive" -- "$NVFP4TOOL" convert "$src" "$tmp/z" --input-amax "$tmp/zero.json"
expect 1 "nope" -- "$NVFP4TOOL" convert "$tmp/nope" "$tmp/y"
expect 2 "max-host-memory" -- "$NVFP4TOOL" convert "$src" "$tmp/m" --max-host-memory lots
expect 0 "" -- "$NVFP4TOOL" convert "$src" "$tmp/full" --force --quiet
[ ! -e "$tmp/full/keep.txt" ] || [ -f "$tmp/full/nvfp4-manifest.json" ]
echo ok
