#!/usr/bin/env bash
# --ep 2 and --ep 4: one directory per rank (rank-0000r-of-0000N/) with its own shards, index,
# config.json and side files; its expert tensors concatenated over the ranks equal --ep 1, every
# other tensor is the same in each rank; each rank matches the modelopt conversion for its expert
# range; one manifest at the top covers every file of every rank (hash --check) and names the
# split; a small --max-shard-size gives several shards per rank; --resume of the finished output
# does nothing and --force into a DST of another split replaces it.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL

"$T" synth "$tmp/src" --preset deepseek-v3 --dtype bf16 --experts 8 --quiet
opts=(--quiet --method rtn --target prepared-w4a4)
"$T" convert "$tmp/src" "$tmp/mo" --quiet --method rtn
"$T" convert "$tmp/src" "$tmp/e1" "${opts[@]}"
"$T" convert "$tmp/src" "$tmp/e2" "${opts[@]}" --ep 2
"$T" convert "$tmp/src" "$tmp/e4" "${opts[@]}" --ep 4 --max-shard-size 300KB
for n in 2 4; do
    "$NVFP4_PYTHON" "$here/check_prepared.py" ranks "$tmp/e1" "$tmp/e$n" $n >/dev/null ||
        fail "--ep $n ranks differ from --ep 1"
    "$T" hash --check "$tmp/e$n" --quiet || fail "--ep $n: hash --check"
    for r in $(seq 0 $((n - 1))); do
        d=$(printf '%s/e%d/rank-%05d-of-%05d' "$tmp" $n $r $n)
        [ -f "$d/config.json" ] && [ -f "$d/model.safetensors.index.json" ] &&
            [ -f "$d/tokenizer.json" ] || fail "$d is not a complete checkpoint"
        "$NVFP4_PYTHON" "$here/check_prepared.py" compare "$d" "$tmp/mo" --precision w4a4 \
            --layout 128x4 >/dev/null || fail "$d differs from modelopt"
    done
    ls "$tmp/e$n"/*.safetensors >/dev/null 2>&1 && fail "--ep $n wrote shards at the top"
done
[ "$(ls "$tmp/e4/rank-00003-of-00004" | grep -c safetensors$)" -gt 1 ] ||
    fail "--max-shard-size 300KB gave one shard per rank"
if "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    "$NVFP4_PYTHON" - "$NVFP4_SCHEMAS/manifest.schema.json" "$tmp/e4" <<'PY'
import json, os, sys, jsonschema
schema = json.load(open(sys.argv[1]))
m = json.load(open(os.path.join(sys.argv[2], "nvfp4-manifest.json")))
jsonschema.Draft202012Validator(schema).validate(m)
t = m["target"]
assert t["format"] == "prepared-w4a4" and t["precision"] == "w4a4", t
assert t["layout"] == "flashinfer-cutedsl-nvfp4-v1" and t["scale_layout"] == "128x4", t
assert t["ep"] == {"size": 4, "ranks": [
    {"rank": r, "dir": "rank-%05d-of-00004" % r, "experts": [2 * r, 2]} for r in range(4)]}, t
names = [f["name"] for f in m["files"]]
for r in range(4):
    for f in ("config.json", "model.safetensors.index.json"):
        assert "rank-%05d-of-00004/%s" % (r, f) in names, names
PY
fi
expect 0 "already holds this conversion, verified; nothing to do" -- "$T" convert "$tmp/src" \
    "$tmp/e4" --method rtn --target prepared-w4a4 --ep 4 --max-shard-size 300KB --resume
"$T" convert "$tmp/src" "$tmp/e4" "${opts[@]}" --ep 2 --force
"$NVFP4_PYTHON" "$here/check_prepared.py" ranks "$tmp/e1" "$tmp/e4" 2 >/dev/null ||
    fail "--force --ep 2 over --ep 4"
[ ! -e "$tmp/e4/rank-00003-of-00004" ] || fail "--force left the ranks of --ep 4"
"$T" hash --check "$tmp/e4" --quiet || fail "--force --ep 2: hash --check"
echo "--ep 2 and 4: ranks concatenated equal --ep 1, one manifest over every rank"
