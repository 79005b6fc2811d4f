#!/usr/bin/env bash
# convert of one shard file: config.json and the side files come from the shard's directory
# (the output config.json is the source's with a quantization_config; the other shards of that
# directory are not read or copied). A shard with no config.json beside it is refused (exit 2),
# and nothing is created.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --quiet >/dev/null
shard=$(cd "$tmp/src" && ls model-*-of-*.safetensors | head -1)
[ "$(ls "$tmp/src"/model-*-of-*.safetensors | wc -l)" -ge 2 ] || { echo "need 2+ shards" >&2; exit 1; }
"$NVFP4TOOL" convert "$tmp/src/$shard" "$tmp/dst" --quiet --allow-empty >/dev/null
"$NVFP4_PYTHON" - "$tmp/src" "$tmp/dst" "$shard" <<'PY'
import json, os, sys
src, dst, shard = sys.argv[1:4]
a = json.load(open(os.path.join(src, "config.json")))
b = json.load(open(os.path.join(dst, "config.json")))
q = b.pop("quantization_config")
assert q["quant_method"] == "modelopt", q
a.pop("quantization_config", None)
assert a == b, "config.json is not the source's"
m = json.load(open(os.path.join(dst, "nvfp4-manifest.json")))
names = sorted(f["name"] for f in m["source"]["files"])
others = sorted(f for f in os.listdir(src) if f.endswith(".safetensors") and f != shard)
assert shard in names and not set(others) & set(names), names
assert not [f for f in os.listdir(dst) if f.endswith(".safetensors.index.json") and f != "model.safetensors.index.json"]
PY
for f in tokenizer.json tokenizer_config.json generation_config.json; do
    cmp -s "$tmp/src/$f" "$tmp/dst/$f" || { echo "$f not copied" >&2; exit 1; }
done
"$NVFP4TOOL" hash --check "$tmp/dst" --quiet >/dev/null
mkdir "$tmp/lone"
cp "$tmp/src/$shard" "$tmp/lone/"
rc=0
"$NVFP4TOOL" convert "$tmp/lone/$shard" "$tmp/out" --quiet 2>"$tmp/err" || rc=$?
[ $rc -eq 2 ] || { echo "lone shard: exit $rc, expected 2" >&2; cat "$tmp/err" >&2; exit 1; }
grep -q "is a single shard and '$tmp/lone' has no config.json" "$tmp/err" ||
    { echo "message: $(cat "$tmp/err")" >&2; exit 1; }
[ ! -e "$tmp/out" ] || { echo "refused conversion created DST" >&2; exit 1; }
echo ok
