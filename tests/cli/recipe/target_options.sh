#!/usr/bin/env bash
# The prepared targets' recipe keys and flags (target.scale_layout, target.ep): accepted for
# prepared-w4a16/w4a4, a usage error (exit 2) with --target modelopt, before anything is
# written; their defaults (128x4, 1) are accepted by modelopt and change nothing.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
ONLY="apply to the prepared targets only"
printf 'target:\n  scale_layout: 8x4\n' >"$tmp/layout.yaml"
printf 'target: {ep: 2}\n' >"$tmp/ep.yaml"
printf 'target: {scale_layout: 128x4, ep: 1}\n' >"$tmp/defaults.yaml"
printf 'verify: {tokens: 99999999}\n' >"$tmp/tokens.yaml"

"$T" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --layers 1 --experts 2 --quiet
for extra in "--scale-layout 8x4" "--ep 2" "--recipe $tmp/layout.yaml" "--recipe $tmp/ep.yaml"; do
    # shellcheck disable=SC2086
    expect 2 "$ONLY" -- "$T" convert "$tmp/src" "$tmp/dst" $extra
    [ ! -e "$tmp/dst" ] || fail "convert $extra wrote $tmp/dst"
done
expect 0 "\"scale_layout\":\"8x4\"" -- "$T" quantize --print-recipe --recipe "$tmp/layout.yaml"
expect 0 "\"ep\":2" -- "$T" quantize --print-recipe --recipe "$tmp/ep.yaml"
expect 2 "verify.tokens" -- "$T" quantize --print-recipe --recipe "$tmp/tokens.yaml"
expect 2 "bad value '8x8'" -- "$T" convert "$tmp/src" "$tmp/dst" --scale-layout 8x8
expect 2 "bad value '0'" -- "$T" convert "$tmp/src" "$tmp/dst" --target prepared-w4a16 --ep 0

# The defaults are accepted, and the conversion is the same as without them.
"$T" convert "$tmp/src" "$tmp/a" --quiet
"$T" convert "$tmp/src" "$tmp/b" --quiet --scale-layout 128x4 --ep 1 --recipe "$tmp/defaults.yaml"
for f in "$tmp"/a/*.safetensors; do
    cmp "$f" "$tmp/b/$(basename "$f")" || fail "--scale-layout 128x4 --ep 1 changed $f"
done
echo "target options: 8x4 and ep > 1 refused with modelopt (exit 2), defaults accepted"
