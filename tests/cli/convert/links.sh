#!/usr/bin/env bash
# Files of SRC that are symbolic links. A Hugging Face cache snapshot (REPO/snapshots/REV/FILE
# -> ../../blobs/SHA, REPO/blobs) converts like the plain directory, with no warning. A link out
# of SRC (a side file or a shard) is followed with a warning naming the link and its target;
# with --no-follow-outside it is exit 3 naming both, and DST is not created.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --quiet >/dev/null
echo "model card" >"$tmp/src/README.md"
"$NVFP4TOOL" convert "$tmp/src" "$tmp/plain" --quiet --allow-empty >/dev/null

# The cache layout: every file of src as a blob named by its SHA-256, linked from the snapshot.
repo=$tmp/hub/models--org--tiny
snap=$repo/snapshots/0123abcd
mkdir -p "$repo/blobs" "$repo/refs" "$snap"
echo 0123abcd >"$repo/refs/main"
for f in "$tmp/src"/*; do
    sha=$(sha256sum "$f" | cut -d' ' -f1)
    cp "$f" "$repo/blobs/$sha"
    ln -s "../../blobs/$sha" "$snap/$(basename "$f")"
done
[ -L "$snap/config.json" ] || fail "the snapshot is not made of links"
"$NVFP4TOOL" convert "$snap" "$tmp/fromcache" --allow-empty >"$tmp/out" 2>"$tmp/err" ||
    fail "cache snapshot: exit $?: $(cat "$tmp/err")"
! grep -qi "link" "$tmp/err" || fail "cache snapshot warned: $(cat "$tmp/err")"
for f in "$tmp/plain"/*; do
    n=$(basename "$f")
    [ "$n" = nvfp4-manifest.json ] && continue
    cmp -s "$f" "$tmp/fromcache/$n" || fail "$n differs from the plain directory's conversion"
done
"$NVFP4_PYTHON" - "$tmp/plain/nvfp4-manifest.json" "$tmp/fromcache/nvfp4-manifest.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["source"]["files"] == b["source"]["files"], "source lists differ"
assert a["files"] == b["files"], "output file lists differ"
PY
[ ! -L "$tmp/fromcache/README.md" ] || fail "a side file was copied as a link"

# A side file linking out of the cache: followed, with a warning naming link and target.
mkdir "$tmp/elsewhere"
echo "secret notes" >"$tmp/elsewhere/notes.md"
target=$(realpath "$tmp/elsewhere/notes.md")
rm "$snap/README.md"
ln -s "$tmp/elsewhere/notes.md" "$snap/README.md"
expect 0 "'$snap/README.md' is a link to '$target', outside '$(realpath "$repo")'" -- \
    "$NVFP4TOOL" convert "$snap" "$tmp/warned" --allow-empty
cmp -s "$tmp/elsewhere/notes.md" "$tmp/warned/README.md" || fail "the followed link was not copied"
[ "$(grep -c "is a link to" "$tmp/err")" -eq 1 ] || fail "expected one link warning: $(cat "$tmp/err")"
expect 3 "'$snap/README.md' is a link to '$target'" -- \
    "$NVFP4TOOL" convert "$snap" "$tmp/refused" --allow-empty --no-follow-outside
[ ! -e "$tmp/refused" ] || fail "--no-follow-outside created DST"
# An existing, empty DST stays empty.
mkdir "$tmp/empty"
expect 3 "outside" -- "$NVFP4TOOL" convert "$snap" "$tmp/empty" --allow-empty --no-follow-outside
[ -z "$(ls -A "$tmp/empty")" ] || fail "--no-follow-outside wrote into DST: $(ls -A "$tmp/empty")"

# A plain directory: a link inside it is silent, a shard linking out of it is not.
cp -r "$tmp/src" "$tmp/dir"
mv "$tmp/dir/tokenizer.json" "$tmp/dir/tokenizer.real"
ln -s tokenizer.real "$tmp/dir/tokenizer.json"
shard=$(cd "$tmp/dir" && ls model-*-of-*.safetensors | head -1)
mv "$tmp/dir/$shard" "$tmp/elsewhere/$shard"
ln -s "$tmp/elsewhere/$shard" "$tmp/dir/$shard"
expect 0 "'$tmp/dir/$shard' is a link to '$(realpath "$tmp/elsewhere/$shard")', outside" -- \
    "$NVFP4TOOL" convert "$tmp/dir" "$tmp/d1" --allow-empty
! grep -q "tokenizer.json' is a link" "$tmp/err" || fail "a link inside SRC warned"
for f in "$tmp/plain"/*; do
    n=$(basename "$f")
    [ "$n" = nvfp4-manifest.json ] || cmp -s "$f" "$tmp/d1/$n" || fail "$n differs with linked files"
done
expect 3 "'$tmp/dir/$shard' is a link to '$(realpath "$tmp/elsewhere/$shard")'" -- \
    "$NVFP4TOOL" convert "$tmp/dir" "$tmp/d2" --allow-empty --no-follow-outside
[ ! -e "$tmp/d2" ] || fail "--no-follow-outside created DST"

# snapshots/ without a blobs/ beside it is not a cache: its links out of SRC warn.
mkdir -p "$tmp/fake/snapshots/r" "$tmp/fake/data"
for f in "$tmp/src"/*; do
    cp "$f" "$tmp/fake/data/"
    ln -s "../../data/$(basename "$f")" "$tmp/fake/snapshots/r/$(basename "$f")"
done
expect 0 "is a link to" -- "$NVFP4TOOL" convert "$tmp/fake/snapshots/r" "$tmp/d3" --allow-empty
echo ok
