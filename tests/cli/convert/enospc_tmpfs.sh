#!/usr/bin/env bash
# ENOSPC on a real file system (issue 14): DST on a small tmpfs (mounted here, as root), too
# small for the output. Sizes make the disk fill up in the first shard, in a later one, and in
# the finish (the shards fit, the index, configs, side files do not; all but the manifest fits).
# Each time:
# exit 1, the message names a file in DST and says "No space left on device"; DST holds nothing
# that looks complete or half-written (no manifest, index, config.json, hf_quant_config.json or
# *.tmp; finished shards and the journal may stay for --resume); SRC is untouched; nothing is
# written outside DST (its parent and SRC's are the same before and after). Then, on a tmpfs
# large enough, --resume finishes what is left into the reference's bytes.
# Not root, or mount refused (no CAP_SYS_ADMIN): skipped (exit 77) with the reason.
# (enospc.sh fakes ENOSPC with an LD_PRELOAD shim, at byte-exact points.)
set -euo pipefail
tmp=$(mktemp -d)
w=$tmp/w # SRC, the reference and the mount point; the test's own files stay in $tmp
mnt=$w/mnt
cleanup() {
    mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "not root (uid $(id -u)): cannot mount a tmpfs: skipped"; exit 77; }
mkdir -p "$mnt"
mount -t tmpfs -o size=64k tmpfs "$mnt" 2>"$tmp/err" ||
    { echo "mount -t tmpfs refused: $(cat "$tmp/err"): skipped"; exit 77; }
umount "$mnt"

"$NVFP4TOOL" synth "$w/src" --preset qwen3-moe --dtype bf16 --hidden 256 --experts 8 \
    --moe-intermediate 256 --quiet >/dev/null
opts=(--quiet --threads 1 --max-shard-size 512KB)
"$NVFP4TOOL" convert "$w/src" "$w/ref" "${opts[@]}" >/dev/null
# What the output takes on a tmpfs: every file rounded up to 4 KiB pages.
pages() { find "$1" -type f ${2:+-name "$2"} -printf '%s\n' | awk '{p += int(($1 + 4095) / 4096)} END {print p}'; }
all=$(pages "$w/ref")
shards=$(pages "$w/ref" 'model-*-of-*.safetensors')
first=$(pages "$w/ref" 'model-00001-of-*.safetensors')
src_before=$(cd "$w/src" && find . -type f -exec sha256sum {} + | sort -k 2)
around_before=$(snapshot "$w" mnt ref)

# size in pages: half the first shard; one and a half; the shards and the journal but not the
# index (the side files, index and configs fail); all but the manifest (the largest file after
# the shards: its write fails)
for size in $((first / 2)) $((first + first / 2)) $((shards + 6)) $((all - 5)); do
    mount -t tmpfs -o size=$((size * 4))k,mode=0755 tmpfs "$mnt"
    dst=$mnt/dst
    rc=0
    "$NVFP4TOOL" convert "$w/src" "$dst" "${opts[@]}" >/dev/null 2>"$tmp/err" || rc=$?
    [ $rc -eq 1 ] || fail "$size pages: exit $rc, expected 1: $(head -c 500 "$tmp/err")"
    grep -q "No space left on device" "$tmp/err" && grep -qF "'$dst/" "$tmp/err" ||
        fail "$size pages: the message does not name the file: $(cat "$tmp/err")"
    if [ -d "$dst" ]; then
        left=$(find "$dst" \( -name '*.tmp' -o -name nvfp4-manifest.json -o \
            -name model.safetensors.index.json -o -name config.json -o \
            -name hf_quant_config.json \) -print)
        [ -z "$left" ] || fail "$size pages: left $left"
    fi
    # Nothing beside DST on the tmpfs.
    [ -z "$(find "$mnt" -mindepth 1 -maxdepth 1 ! -name dst)" ] ||
        fail "$size pages: written beside DST: $(ls -A "$mnt")"
    what=$(ls -A "$dst" 2>/dev/null | tr "\n" " " || true)
    echo "$size pages of $all: $(sed 's/^nvfp4tool convert: error: //' "$tmp/err" | head -c 300)"
    echo "  DST left: ${what:-(removed)}"
    # What is left resumes, on a tmpfs with room, into the reference's bytes (a shard renamed
    # but not yet in the journal is written again beside itself: twice the room).
    rm -rf "$tmp/kept"
    [ ! -d "$dst" ] || cp -a "$dst" "$tmp/kept"
    umount "$mnt"
    mount -t tmpfs -o size=$((all * 8))k tmpfs "$mnt"
    [ ! -d "$tmp/kept" ] || cp -a "$tmp/kept" "$dst"
    "$NVFP4TOOL" convert "$w/src" "$dst" "${opts[@]}" --resume >/dev/null ||
        fail "$size pages: --resume failed"
    diff -r "$w/ref" "$dst" >/dev/null || fail "$size pages: resumed output differs from the reference"
    umount "$mnt"
done
src_after=$(cd "$w/src" && find . -type f -exec sha256sum {} + | sort -k 2)
[ "$src_before" = "$src_after" ] || fail "SRC changed"
around_after=$(snapshot "$w" mnt ref)
[ "$around_before" = "$around_after" ] ||
    fail "written outside DST: $(diff <(echo "$around_before") <(echo "$around_after") | head)"
echo "ok: ENOSPC on a tmpfs of 4 sizes, each resumed to the reference's bytes"
