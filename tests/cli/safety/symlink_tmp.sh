#!/usr/bin/env bash
# A symbolic link planted at an output's temporary name (NAME.tmp) is never written through:
# quantize, hash, synth and convert replace the link, the file it points to keeps its bytes,
# and the outputs are complete.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$NVFP4_TESTDATA/hf/qwen3moe-bf16
printf 'precious\n' >"$tmp/victim"
plant() { ln -sf "$tmp/victim" "$1.tmp"; }
intact() {
    [ "$(cat "$tmp/victim")" = precious ] || { echo "victim overwritten after $1" >&2; exit 1; }
    [ ! -L "$2.tmp" ] && [ ! -e "$2.tmp" ] || { echo "$2.tmp left after $1" >&2; exit 1; }
}

shard=$(ls "$src"/*.safetensors | head -1)
plant "$tmp/q.safetensors"
"$NVFP4TOOL" quantize "$shard" "$tmp/q.safetensors" --quiet --device cpu >/dev/null
intact quantize "$tmp/q.safetensors"
"$NVFP4TOOL" inspect "$tmp/q.safetensors" --quiet >/dev/null

cp -r "$src" "$tmp/ck"
plant "$tmp/ck/nvfp4-manifest.json"
"$NVFP4TOOL" hash "$tmp/ck" --quiet
intact hash "$tmp/ck/nvfp4-manifest.json"
"$NVFP4TOOL" hash --check "$tmp/ck" --quiet

mkdir -p "$tmp/syn"
plant "$tmp/syn/config.json"
plant "$tmp/syn/model-00002-of-00003.safetensors"
"$NVFP4TOOL" synth "$tmp/syn" --preset qwen3-moe --dtype bf16 --quiet --force >/dev/null
intact synth "$tmp/syn/config.json"
intact synth "$tmp/syn/model-00002-of-00003.safetensors"
"$NVFP4TOOL" inspect "$tmp/syn" --quiet >/dev/null

mkdir -p "$tmp/out"
plant "$tmp/out/model-00001-of-00001.safetensors"
plant "$tmp/out/config.json"
"$NVFP4TOOL" convert "$src" "$tmp/out" --force --quiet --device cpu >/dev/null
intact convert "$tmp/out/model-00001-of-00001.safetensors"
intact convert "$tmp/out/config.json"
"$NVFP4TOOL" hash --check "$tmp/out" --quiet
echo "symlinks at NAME.tmp: never written through"
