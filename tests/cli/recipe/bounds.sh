#!/usr/bin/env bash
# Recipes are bounded before YAML loading (issue #11 item 14): more than 1 MiB, nested deeper
# than 64 levels, more than 64 anchors or more than 256 aliases is exit 2 at once with a message
# saying which limit; 400 KB of '[' took minutes before, and 1 MiB of anchors a minute (libyaml's
# loader looks each one up in a list). Exactly 64 levels, 64 anchors, 256 aliases and 1 MiB are
# within the bounds, and a "billion laughs" (aliases of aliases, never expanded) is read at once.
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

# Anchors and aliases: 64 anchors and 256 aliases are read (the recipe's verify.tokens is an
# alias of the last anchor), one more of either is refused, naming the line and column.
anchors() { # anchors N ALIASES: N anchored items in a list, then ALIASES aliases of the last
    { printf 'x: ['
      for i in $(seq 1 "$1"); do printf '&a%d %d, ' "$i" "$i"; done
      printf ']\ny: ['
      for _ in $(seq 1 "$2"); do printf '*a%d, ' "$1"; done
      printf ']\n'; } >"$tmp/a$1-$2.yaml"
}
anchors 64 256
expect 2 "unknown section 'x'" "$tmp/a64-256.yaml"
anchors 65 0
expect 2 "$tmp/a65-0.yaml:1:" "$tmp/a65-0.yaml"
grep -qF "more than 64 anchors" "$tmp/err" || fail "65 anchors: $(cat "$tmp/err")"
anchors 1 257
expect 2 "more than 256 aliases" "$tmp/a1-257.yaml"
printf 'verify: {tokens: &t 8, seed: *t}\n' >"$tmp/ok.yaml"
expect 0 "" "$tmp/ok.yaml"
grep -q '"seed":8' "$tmp/out" || fail "alias of a scalar: $(cat "$tmp/out")"
# 1 MiB of anchors: refused within the time limit (a minute before).
{ printf 'x: ['; seq 1 90000 | sed 's/.*/\&a& 1,/' | tr -d '\n'; printf ']\n'; } | head -c 1048000 \
    >"$tmp/many.yaml"
start=$(date +%s%N)
expect 2 "more than 64 anchors" "$tmp/many.yaml"
ms=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -lt 2000 ] || fail "1 MiB of anchors took $ms ms"
# Billion laughs: 9 levels of 10 aliases each, 10^9 scalars if expanded; the reader does not
# expand them and stops at the first value that is not what its key takes.
{ printf 'scope:\n  include: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n'
  for i in $(seq 1 9); do
      printf '  k%d: &l%d [' "$i" "$i"
      for _ in $(seq 1 10); do printf '*l%d, ' $((i - 1)); done
      printf ']\n'
  done
  printf 'target: {ep: *l9}\n'; } >"$tmp/laughs.yaml"
start=$(date +%s%N)
expect 2 "unknown key 'k1' in section 'scope'" "$tmp/laughs.yaml"
ms=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -lt 2000 ] || fail "billion laughs took $ms ms"
echo "recipe bounds: 1 MiB, 64 levels, 64 anchors, 256 aliases"
