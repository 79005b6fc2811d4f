#!/usr/bin/env bash
# What the inverse of a prepared checkpoint refuses (issue 12), each before DST is written:
#   - a rank directory removed: exit 3 naming it;
#   - a prepared checkpoint without nvfp4-inverse.json (as made before the record existed):
#     exit 3 saying it cannot be inverted exactly;
#   - a record that does not belong to the tensors (one weight_scale_2 changed): exit 3 naming
#     the alpha tensor;
#   - a record_version 2 record without "modelopt_jobs", and a record_version 3 one: exit 3;
#   - --input-amax (the inverse restores the recorded input scales): exit 2;
#   - one rank directory of a prepared checkpoint instead of its top: exit 2 saying so;
#   - DST the prepared checkpoint itself (even with --force): exit 2.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL

"$T" synth "$tmp/src" --preset qwen3-moe --dtype nvfp4 --hidden 128 --moe-intermediate 128 \
    --experts 4 --quiet
"$T" convert "$tmp/src" "$tmp/p" --target prepared-w4a16 --ep 2 --quiet
cp -r "$tmp/p" "$tmp/norank"
rm -rf "$tmp/norank/rank-00001-of-00002"
expect 3 "rank directory 'rank-00001-of-00002' is missing" -- \
    "$T" convert "$tmp/norank" "$tmp/d1" --target modelopt
cp -r "$tmp/p" "$tmp/old"
rm "$tmp/old/nvfp4-inverse.json"
expect 3 "is a prepared checkpoint without 'nvfp4-inverse.json'" -- \
    "$T" convert "$tmp/old" "$tmp/d2" --target modelopt
cp -r "$tmp/p" "$tmp/bad"
"$NVFP4_PYTHON" "$here/check_inverse.py" tamper "$tmp/bad" >/dev/null
expect 3 "model.layers.0.mlp.experts.w2_alpha'[0] alpha is" -- \
    "$T" convert "$tmp/bad" "$tmp/d3" --target modelopt
for v in 2 3; do
    cp -r "$tmp/p" "$tmp/v$v"
    "$NVFP4_PYTHON" - "$tmp/v$v/nvfp4-inverse.json" "$v" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
del doc["modelopt_jobs"]
doc["record_version"] = int(sys.argv[2])
json.dump(doc, open(sys.argv[1], "w"))
PY
done
expect 3 'record_version 2 without a "modelopt_jobs" array' -- \
    "$T" convert "$tmp/v2" "$tmp/d6" --target modelopt
expect 3 "record_version is not 1 or 2" -- "$T" convert "$tmp/v3" "$tmp/d7" --target modelopt
echo '{}' >"$tmp/amax.json"
expect 2 "--input-amax" -- "$T" convert "$tmp/p" "$tmp/d4" --target modelopt \
    --input-amax "$tmp/amax.json"
expect 2 "is one rank directory of a prepared checkpoint" -- \
    "$T" convert "$tmp/p/rank-00001-of-00002" "$tmp/d5" --target modelopt
expect 2 "is the source directory" -- "$T" convert "$tmp/p" "$tmp/p" --target modelopt --force
"$T" hash --check "$tmp/p" --quiet || fail "DST = SRC touched the prepared checkpoint"
for d in d1 d2 d3 d4 d5 d6 d7; do
    [ ! -e "$tmp/$d/nvfp4-manifest.json" ] && [ ! -e "$tmp/$d.unprepare.tmp" ] ||
        fail "$d: a refused inverse left files"
done
echo "inverse refusals: missing rank, no record, a foreign record, record versions, --input-amax," \
    "one rank"
