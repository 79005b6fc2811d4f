#!/usr/bin/env bash
# An unreadable source file (issue 14): `convert` exits 1 naming it, and DST holds nothing that
# looks complete or half-written (no manifest, index, config.json, hf_quant_config.json or
# *.tmp); nothing is written outside DST. Root ignores file permissions, so as root the tool
# runs as "nobody" (lib.sh unprivileged); the files are made unreadable with chmod.
#   1. a shard (mode 0000): refused when the checkpoint is opened, before DST is made;
#   2. a side file (tokenizer.json, copied in the finish): every shard is written first, the
#      failure comes in the finish, and --resume (once readable) gives the reference's bytes.
set -euo pipefail
tmp=$(mktemp -d)
trap 'chmod -R u+rwX "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
unprivileged
w=$tmp/w # SRC, the reference and DST's parent
mkdir -p "$w/out"
"$NVFP4TOOL" synth "$w/src" --preset qwen3-moe --dtype bf16 --hidden 256 --experts 8 \
    --moe-intermediate 256 --quiet >/dev/null
opts=(--quiet --threads 1 --max-shard-size 512KB)
"$NVFP4TOOL" convert "$w/src" "$w/ref" "${opts[@]}" >/dev/null
chmod -R a+rX "$tmp"
[ "$(id -u)" -ne 0 ] || chown 65534:65534 "$w/out" # nobody writes DST, as its owner would
dst=$w/out/dst
complete_looking() {
    find "$dst" \( -name '*.tmp' -o -name nvfp4-manifest.json -o \
        -name model.safetensors.index.json -o -name config.json -o -name hf_quant_config.json \) \
        -print 2>/dev/null || true
}
src_sums() { (cd "$w/src" && find . -type f -exec sha256sum {} + | sort -k 2); }
before=$(snapshot "$w" out ref)
src_before=$(src_sums)

# 1. An unreadable shard.
shard=$(find "$w/src" -name "model-00002-of-*.safetensors")
[ -f "$shard" ] || fail "no second shard in SRC: $(ls "$w/src")"
chmod 0000 "$shard"
expect 1 "$shard" -- "${TOOL[@]}" convert "$w/src" "$dst" "${opts[@]}"
grep -q "Permission denied" "$tmp/err" || fail "shard: not 'Permission denied': $(cat "$tmp/err")"
[ ! -e "$dst" ] || fail "shard: DST made: $(ls -A "$dst")"
chmod 0644 "$shard"

# 2. An unreadable side file: fails in the finish.
side=$w/src/tokenizer.json
chmod 0000 "$side"
expect 1 "$side" -- "${TOOL[@]}" convert "$w/src" "$dst" "${opts[@]}"
grep -q "Permission denied" "$tmp/err" || fail "side file: not 'Permission denied': $(cat "$tmp/err")"
left=$(complete_looking)
[ -z "$left" ] || fail "side file: DST holds $left"
n=$(find "$dst" -name 'model-*-of-*.safetensors' | wc -l)
echo "side file: $(head -c 300 "$tmp/err"); $n finished shards kept for --resume"
chmod 0644 "$side"
"${TOOL[@]}" convert "$w/src" "$dst" "${opts[@]}" --resume >/dev/null ||
    fail "--resume after the side file failed"
diff -r "$w/ref" "$dst" >/dev/null || fail "resumed output differs from the reference"
rm -rf "$dst"

after=$(snapshot "$w" out ref)
[ "$before" = "$after" ] || fail "written outside DST: $(diff <(echo "$before") <(echo "$after") | head)"
[ "$src_before" = "$(src_sums)" ] || fail "SRC changed"
echo "ok: unreadable shard and side file ($([ "$(id -u)" -eq 0 ] && echo "as nobody" || echo "as uid $(id -u)"))"
