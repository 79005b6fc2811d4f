#!/usr/bin/env bash
# A symbolic link planted at an output's own name (issue #11 item 4): quantize refuses it
# without --force (exit 2, the link and its target untouched); with --force the link itself is
# replaced by the new file and the file it pointed to keeps its bytes. hash reads an existing
# manifest before replacing it: a planted link to something that is not a manifest is refused
# (exit 3 naming it), nothing written.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
src=$NVFP4_TESTDATA/hf/qwen3moe-bf16
shard=$(ls "$src"/*.safetensors | head -1)
printf 'precious\n' >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/q.safetensors"
expect 2 "exists" -- "$NVFP4TOOL" quantize "$shard" "$tmp/q.safetensors" --quiet --device cpu
[ -L "$tmp/q.safetensors" ] || fail "the link was removed by a refused run"
[ "$(cat "$tmp/victim")" = precious ] || fail "victim changed by a refused run"
"$NVFP4TOOL" quantize "$shard" "$tmp/q.safetensors" --quiet --device cpu --force >/dev/null
[ ! -L "$tmp/q.safetensors" ] || fail "--force wrote through the link instead of replacing it"
[ "$(cat "$tmp/victim")" = precious ] || fail "victim overwritten through the output link"
"$NVFP4TOOL" inspect "$tmp/q.safetensors" --quiet >/dev/null

cp -r "$src" "$tmp/ck"
ln -s "$tmp/victim" "$tmp/ck/nvfp4-manifest.json"
expect 3 "nvfp4-manifest.json" -- "$NVFP4TOOL" hash "$tmp/ck" --quiet
[ -L "$tmp/ck/nvfp4-manifest.json" ] || fail "hash removed the link after refusing"
[ "$(cat "$tmp/victim")" = precious ] || fail "victim overwritten by hash"
[ -z "$(find "$tmp/ck" -name '*.tmp')" ] || fail "hash left a temporary"
echo "output links are refused or replaced, never written through"
