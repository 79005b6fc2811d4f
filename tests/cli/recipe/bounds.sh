#!/usr/bin/env bash
# Recipes are bounded before YAML loading (issue #11 item 14): more than 1 MiB, or nested deeper
# than 64 levels, is exit 2 at once with a message saying which limit; 400 KB of '[' took
# minutes before. Exactly 64 levels and exactly 1 MiB are within the bounds.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
expect() { # expect CODE PATTERN RECIPE: quantize --print-recipe within 20 s
    local rc=0
    timeout 20 "$NVFP4TOOL" quantize --print-recipe --recipe "$3" >"$tmp/out" 2>"$tmp/err" ||
        rc=$?
    [ "$rc" -eq "$1" ] || fail "$3: exit $rc, expected $1: $(head -c 300 "$tmp/err")"
    [ -z "$2" ] || grep -qF -- "$2" "$tmp/err" || fail "$3: did not say '$2': $(head -c 300 "$tmp/err")"
}
nest() { # nest N: 'quantization: ' and N '[' ... ']' (the root mapping is one more level)
    printf 'quantization: %s%s\n' "$(head -c "$1" /dev/zero | tr '\0' '[')" \
        "$(head -c "$1" /dev/zero | tr '\0' ']')" >"$tmp/n$1.yaml"
}
nest 200000
expect 2 "$tmp/n200000.yaml:1:78: nested deeper than 64 levels" "$tmp/n200000.yaml"
nest 64
expect 2 "$tmp/n64.yaml:1:78: nested deeper than 64 levels" "$tmp/n64.yaml"
nest 63
expect 2 "section 'quantization' must be a mapping" "$tmp/n63.yaml"
# Block style counts too: 70 nested mappings.
for i in $(seq 0 69); do printf '%*sk%d:\n' $((i * 2)) '' "$i"; done >"$tmp/block.yaml"
expect 2 "nested deeper than 64 levels" "$tmp/block.yaml"

# Size: a comment line padded to exactly 1 MiB is accepted, one byte more is not.
{ printf 'version: 1\n#'; head -c $((1048576 - 13)) /dev/zero | tr '\0' 'x'; echo; } >"$tmp/1m.yaml"
[ "$(stat -c %s "$tmp/1m.yaml")" -eq 1048576 ] || fail "1m.yaml is not 1 MiB"
expect 0 "" "$tmp/1m.yaml"
grep -q '"version":1' "$tmp/out" || fail "1 MiB recipe: $(cat "$tmp/out")"
printf ' ' >>"$tmp/1m.yaml"
expect 2 "a recipe is at most" "$tmp/1m.yaml"
echo "recipe bounds: 1 MiB, 64 levels"
