#!/usr/bin/env bash
# A CKPT that cannot be opened is an I/O error (exit 1, README "Exit codes"), as in inspect and
# convert, not a usage error: a missing path, a symbolic-link loop, an unreadable directory
# (issue #11 item 12). A path that exists and is not a directory stays a usage error (2).
set -euo pipefail
tmp=$(mktemp -d)
trap 'chmod -R u+rwx "$tmp"; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
ln -s "$tmp/loop" "$tmp/loop"
for check in "" --check; do
    expect 1 "cannot open checkpoint directory '/nonexistent': No such file" -- \
        "$T" hash $check /nonexistent
    expect 1 "cannot open checkpoint directory '$tmp/loop': Too many levels of symbolic links" -- \
        "$T" hash $check "$tmp/loop"
done
echo x >"$tmp/file"
expect 2 "is not a checkpoint directory" -- "$T" hash "$tmp/file"

# A directory whose entries cannot be listed (skipped as root, who reads everything).
if [ "$(id -u)" -ne 0 ]; then
    mkdir -p "$tmp/ck/sub"
    echo '{}' >"$tmp/ck/sub/a.json"
    chmod 000 "$tmp/ck/sub"
    expect 1 "cannot open directory" -- "$T" hash "$tmp/ck"
    [ ! -e "$tmp/ck/nvfp4-manifest.json" ] || fail "a failed hash wrote a manifest"
fi
echo "hash: unreadable CKPT is exit 1"
