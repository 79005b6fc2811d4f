#!/usr/bin/env bash
# OUT may not be IN: `quantize IN IN`, OUT a symbolic link to IN, OUT a hard link of IN (same
# device and inode) are usage errors (exit 2), --force or not, and IN keeps its bytes. An
# existing OUT is exit 2 without --force and keeps its bytes; with --force it is replaced.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" "$here/ref_quant.py" make "$tmp/in.safetensors"
sum0=$(sha256sum <"$tmp/in.safetensors")
. "$here/expect.bash"
intact() {
    [ "$(sha256sum <"$tmp/in.safetensors")" = "$sum0" ] || { echo "IN changed after $1" >&2; exit 1; }
    [ -z "$(find "$tmp" -name '*.tmp')" ] || { echo "a .tmp file left after $1" >&2; exit 1; }
}
q() { "$NVFP4TOOL" quantize "$@" --quiet --device cpu; }
expect 2 "is the input file" -- q "$tmp/in.safetensors" "$tmp/in.safetensors"
intact "IN IN"
expect 2 "is the input file" -- q "$tmp/in.safetensors" "$tmp/in.safetensors" --force
intact "IN IN --force"
ln -s in.safetensors "$tmp/sym.safetensors"
expect 2 "is the input file" -- q "$tmp/in.safetensors" "$tmp/sym.safetensors" --force
intact "OUT a symlink to IN"
[ -L "$tmp/sym.safetensors" ] || { echo "the symlink was replaced" >&2; exit 1; }
ln "$tmp/in.safetensors" "$tmp/hard.safetensors"
expect 2 "is the input file" -- q "$tmp/in.safetensors" "$tmp/hard.safetensors" --force
intact "OUT a hard link of IN"
mkdir "$tmp/d"
expect 2 "is the input file" -- q "$tmp/in.safetensors" "$tmp/d/../in.safetensors"
intact "OUT IN by another path"
# IN must be one file: a checkpoint directory is for convert.
expect 2 "is a directory; quantize takes one .safetensors file" -- \
    q "$NVFP4_TESTDATA/hf/qwen3moe-bf16" "$tmp/dir.safetensors"
[ ! -e "$tmp/dir.safetensors" ] || { echo "a directory IN wrote OUT" >&2; exit 1; }
# An existing OUT: refused without --force, replaced with it.
printf 'keep me\n' >"$tmp/out.safetensors"
expect 2 "exists; use --force" -- q "$tmp/in.safetensors" "$tmp/out.safetensors"
[ "$(cat "$tmp/out.safetensors")" = "keep me" ] || { echo "OUT changed without --force" >&2; exit 1; }
intact "existing OUT"
q "$tmp/in.safetensors" "$tmp/out.safetensors" --force >/dev/null
q "$tmp/in.safetensors" "$tmp/fresh.safetensors" >/dev/null
cmp "$tmp/out.safetensors" "$tmp/fresh.safetensors" || { echo "--force output differs" >&2; exit 1; }
intact "--force"
echo ok
