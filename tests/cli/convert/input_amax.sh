#!/usr/bin/env bash
# --input-amax is read by the strict JSON reader every document of the tool goes through:
# duplicate keys, numbers beyond a double, invalid UTF-8 and trailing text are usage errors
# (exit 2) naming the file and the fault, and nothing is written.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$NVFP4_TESTDATA/hf/qwen3moe-bf16
m=model.layers.0.mlp.experts.0.gate_proj
expect() { # expect PATTERN FILE
    local rc=0
    "$NVFP4TOOL" convert "$src" "$tmp/out" --input-amax "$2" >"$tmp/o" 2>"$tmp/err" || rc=$?
    [ $rc -eq 2 ] || { echo "exit $rc, expected 2 for $2" >&2; cat "$tmp/err" >&2; exit 1; }
    grep -q -- "$1" "$tmp/err" || { echo "no '$1' in: $(cat "$tmp/err")" >&2; exit 1; }
    grep -q -- "$2" "$tmp/err" || { echo "file not named: $(cat "$tmp/err")" >&2; exit 1; }
    [ ! -e "$tmp/out" ] || { echo "DST created for $2" >&2; exit 1; }
}
printf '{"%s": 2.0, "%s": 3.0}' $m $m >"$tmp/dup.json"
expect "duplicate key '$m'" "$tmp/dup.json"
printf '{"%s": 1e999}' $m >"$tmp/inf.json"
expect "beyond the range of a double" "$tmp/inf.json"
printf '{"%s": 2.0} {}' $m >"$tmp/trail.json"
expect "not valid JSON" "$tmp/trail.json"
printf '{"\xff": 2.0}' >"$tmp/utf8.json"
expect "not valid UTF-8 at byte 2" "$tmp/utf8.json"
printf '[1, 2]' >"$tmp/arr.json"
expect "not a JSON object" "$tmp/arr.json"
printf '{"%s": 2.0}' $m >"$tmp/ok.json"
"$NVFP4TOOL" convert "$src" "$tmp/out" --input-amax "$tmp/ok.json" --quiet >/dev/null
echo "--input-amax: strict JSON"
