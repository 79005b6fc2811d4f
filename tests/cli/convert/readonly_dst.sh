#!/usr/bin/env bash
# A destination that cannot be written (issue 14): `convert` exits 1 naming DST (or the file in
# it that it could not make) and writes nothing anywhere: DST's parent, SRC and SRC's parent are
# the same before and after, names, sizes and mtimes.
#   1. read-only file system (as root: a tmpfs remounted ro), DST absent and DST present (empty);
#   2. no write permission (as root through "nobody", lib.sh unprivileged; otherwise chmod):
#      a directory DST's user cannot write into, DST absent and DST present.
# Case 1 is skipped (with the reason printed) when not root or mount is refused; case 2 always
# runs.
set -euo pipefail
tmp=$(mktemp -d)
w=$tmp/w # SRC and the parents of the DSTs
mkdir -p "$w/ro" "$w/locked"
cleanup() {
    mountpoint -q "$w/ro" 2>/dev/null && umount "$w/ro"
    chmod -R u+rwX "$tmp" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$(dirname "$0")/../lib.sh"
"$NVFP4TOOL" synth "$w/src" --preset qwen3-moe --dtype bf16 --hidden 256 --experts 8 \
    --moe-intermediate 256 --quiet >/dev/null
opts=(--quiet --threads 1 --max-shard-size 512KB)
nothing_written() { # nothing_written WHAT BEFORE
    local now
    now=$(snapshot "$w")
    [ "$2" = "$now" ] || fail "$1: something was written: $(diff <(echo "$2") <(echo "$now") | head)"
}

# 1. Read-only file system.
if [ "$(id -u)" -ne 0 ]; then
    echo "read-only file system: skipped (not root, uid $(id -u): cannot mount)"
elif ! mount -t tmpfs -o size=1m tmpfs "$w/ro" 2>"$tmp/err"; then
    echo "read-only file system: skipped (mount -t tmpfs refused: $(cat "$tmp/err"))"
else
    mkdir "$w/ro/dst"
    mount -o remount,ro "$w/ro"
    before=$(snapshot "$w")
    expect 1 "'$w/ro/new'" -- "$NVFP4TOOL" convert "$w/src" "$w/ro/new" "${opts[@]}"
    grep -q "Read-only file system" "$tmp/err" || fail "ro, DST absent: $(cat "$tmp/err")"
    nothing_written "ro, DST absent" "$before"
    expect 1 "'$w/ro/dst/" -- "$NVFP4TOOL" convert "$w/src" "$w/ro/dst" "${opts[@]}"
    grep -q "Read-only file system" "$tmp/err" || fail "ro, DST present: $(cat "$tmp/err")"
    nothing_written "ro, DST present" "$before"
    echo "read-only file system: $(head -c 300 "$tmp/err")"
    umount "$w/ro"
fi

# 2. No write permission.
unprivileged
chmod -R a+rX "$tmp"
mkdir "$w/locked/dst"
if [ "$(id -u)" -ne 0 ]; then
    chmod 0555 "$w/locked" "$w/locked/dst"
fi # as root, nobody cannot write into root's 0755 directories
before=$(snapshot "$w")
expect 1 "'$w/locked/new'" -- "${TOOL[@]}" convert "$w/src" "$w/locked/new" "${opts[@]}"
grep -q "Permission denied" "$tmp/err" || fail "no permission, DST absent: $(cat "$tmp/err")"
nothing_written "no permission, DST absent" "$before"
expect 1 "'$w/locked/dst/" -- "${TOOL[@]}" convert "$w/src" "$w/locked/dst" "${opts[@]}"
grep -q "Permission denied" "$tmp/err" || fail "no permission, DST present: $(cat "$tmp/err")"
nothing_written "no permission, DST present" "$before"
echo "no permission: $(head -c 300 "$tmp/err")"
echo "ok: read-only destination"
