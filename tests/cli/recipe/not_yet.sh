#!/usr/bin/env bash
# Recipe keys and flags of features not built yet (the prepared targets' scale layout and
# expert-parallel split) are refused with exit 2 and "not supported yet", never silently
# ignored; their defaults (128x4, 1) are accepted. verify.* keys are checked now for verify.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
NS="is not supported yet"
printf 'target:\n  scale_layout: 8x4\n' >"$tmp/layout.yaml"
printf 'target: {ep: 2}\n' >"$tmp/ep.yaml"
printf 'target: {scale_layout: 128x4, ep: 1}\n' >"$tmp/defaults.yaml"
printf 'verify: {tokens: 99999999}\n' >"$tmp/tokens.yaml"

"$T" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --layers 1 --experts 2 --quiet
for extra in "--scale-layout 8x4" "--ep 2" "--recipe $tmp/layout.yaml" "--recipe $tmp/ep.yaml"; do
    # shellcheck disable=SC2086
    expect 2 "$NS" -- "$T" convert "$tmp/src" "$tmp/dst" $extra
    [ ! -e "$tmp/dst" ] || fail "convert $extra wrote $tmp/dst"
done
expect 2 "$tmp/layout.yaml:2:17: 'target.scale_layout: 8x4' $NS" -- \
    "$T" quantize --print-recipe --recipe "$tmp/layout.yaml"
expect 2 "$tmp/ep.yaml:1:14: 'target.ep: 2' $NS" -- \
    "$T" quantize --print-recipe --recipe "$tmp/ep.yaml"
expect 2 "verify.tokens" -- "$T" quantize --print-recipe --recipe "$tmp/tokens.yaml"
expect 2 "bad value '8x8'" -- "$T" convert "$tmp/src" "$tmp/dst" --scale-layout 8x8

# The defaults are accepted, and the conversion is the same as without them.
"$T" convert "$tmp/src" "$tmp/a" --quiet
"$T" convert "$tmp/src" "$tmp/b" --quiet --scale-layout 128x4 --ep 1 --recipe "$tmp/defaults.yaml"
for f in "$tmp"/a/*.safetensors; do
    cmp "$f" "$tmp/b/$(basename "$f")" || fail "--scale-layout 128x4 --ep 1 changed $f"
done
echo "not yet built: scale layouts other than 128x4 and ep > 1 are refused with exit 2"
