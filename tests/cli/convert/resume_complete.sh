#!/usr/bin/env bash
# --resume of a finished output: the manifest records this recipe, target and source, and DST
# verifies against it, so nothing is converted or rewritten (exit 0, every shard reused). A
# changed recipe or a damaged shard converts again.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$NVFP4_TESTDATA/hf/qwen3moe-bf16
listing() { (cd "$1" && find . -type f -printf '%p %i %s %T@\n' | sort); }
reused() { "$NVFP4_PYTHON" -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["shards_reused"], d["shards"])' "$1"; }
"$NVFP4TOOL" convert "$src" "$tmp/dst" --quiet >/dev/null
cp "$tmp/dst/nvfp4-manifest.json" "$tmp/ref.json"
listing "$tmp/dst" >"$tmp/before"
sleep 0.05
out=$("$NVFP4TOOL" convert "$src" "$tmp/dst" --resume --json)
read -r r n <<<"$(reused "$out")"
[ "$r" -eq "$n" ] && [ "$n" -ge 1 ] || { echo "complete output: $r of $n shards reused" >&2; exit 1; }
listing "$tmp/dst" >"$tmp/after"
cmp "$tmp/before" "$tmp/after" || { echo "a complete output was rewritten" >&2; diff "$tmp/before" "$tmp/after" >&2; exit 1; }
"$NVFP4TOOL" hash --check "$tmp/dst" --quiet >/dev/null

# Another recipe: converted again, as a fresh conversion with that recipe.
"$NVFP4TOOL" convert "$src" "$tmp/rtn" --quiet --method rtn >/dev/null
out=$("$NVFP4TOOL" convert "$src" "$tmp/dst" --resume --json --method rtn)
read -r r n <<<"$(reused "$out")"
[ "$r" -eq 0 ] || { echo "a changed recipe reused $r shards" >&2; exit 1; }
cmp "$tmp/rtn/nvfp4-manifest.json" "$tmp/dst/nvfp4-manifest.json"

# A damaged shard (one byte of its data flipped): converted again, and the output verifies.
"$NVFP4TOOL" convert "$src" "$tmp/dst" --force --quiet >/dev/null
"$NVFP4_PYTHON" - "$tmp/dst/model-00001-of-00001.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[-5] ^= 0x40
open(p, 'wb').write(b)
PY
out=$("$NVFP4TOOL" convert "$src" "$tmp/dst" --resume --json)
read -r r n <<<"$(reused "$out")"
[ "$r" -eq 0 ] || { echo "a damaged output reused $r shards" >&2; exit 1; }
cmp "$tmp/ref.json" "$tmp/dst/nvfp4-manifest.json"
"$NVFP4TOOL" hash --check "$tmp/dst" --quiet >/dev/null
echo ok
