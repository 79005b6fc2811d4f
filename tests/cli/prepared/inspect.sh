#!/usr/bin/env bash
# inspect of prepared conversions: a rank directory (and an --ep 1 DST) shows the target,
# layout, scale layout, precision and the EP rank and expert range, without warnings about its
# stacked expert tensors; a DST holding rank directories shows the split and every rank. The
# --json forms validate against schemas/inspect.schema.json and inspect-ranks.schema.json.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL

"$T" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --layers 1 --experts 4 --quiet
"$T" convert "$tmp/src" "$tmp/e2" --quiet --target prepared-w4a4 --ep 2 --scale-layout 8x4
"$T" convert "$tmp/src" "$tmp/e1" --quiet --target prepared-w4a16

expect 0 "Prepared: target prepared-w4a4, layout flashinfer-cutedsl-nvfp4-v1, scale layout 8x4, precision w4a4" \
    -- "$T" inspect "$tmp/e2/rank-00001-of-00002" --summary
grep -qF "EP: rank 1 of 2, experts 2..3 (2)" "$tmp/out" || fail "rank line: $(cat "$tmp/out")"
grep -qF "Format: nvfp4-prepared" "$tmp/out" || fail "format line: $(cat "$tmp/out")"
! grep -q "warn" "$tmp/err" || fail "inspect of a rank warns: $(cat "$tmp/err")"
expect 0 "EP: rank 0 of 1, experts 0..3 (4)" -- "$T" inspect "$tmp/e1" --summary
grep -qF "scale layout 128x4, precision w4a16" "$tmp/out" || fail "ep 1: $(cat "$tmp/out")"

expect 0 "Format: prepared, expert-parallel: 2 ranks" -- "$T" inspect "$tmp/e2"
grep -qF "rank 0 of 2: rank-00000-of-00002/  experts 0..1 (2)" "$tmp/out" || fail "$(cat "$tmp/out")"
grep -qF "rank 1 of 2: rank-00001-of-00002/  experts 2..3 (2)" "$tmp/out" || fail "$(cat "$tmp/out")"

"$T" inspect "$tmp/e2" --json >"$tmp/ranks.json"
"$T" inspect "$tmp/e2/rank-00000-of-00002" --json >"$tmp/rank0.json"
"$NVFP4_PYTHON" - "$tmp/ranks.json" "$tmp/rank0.json" "$NVFP4_SCHEMAS" <<'PY'
import json, os, sys
ranks, rank0, schemas = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert ranks["ep_size"] == 2 and [r["expert_range"] for r in ranks["ranks"]] == [[0, 2], [2, 2]], ranks
assert all(r["precision"] == "w4a4" and r["scale_layout"] == "8x4" for r in ranks["ranks"]), ranks
p = rank0["quantization"]["prepared"]
assert p == {"precision": "w4a4", "layout": "flashinfer-cutedsl-nvfp4-v1", "scale_layout": "8x4",
             "ep_size": 2, "ep_rank": 0, "expert_range": [0, 2]}, p
try:
    import jsonschema
except ImportError:
    sys.exit(0)
for doc, name in ((ranks, "inspect-ranks"), (rank0, "inspect")):
    jsonschema.Draft202012Validator(json.load(open(os.path.join(schemas, name + ".schema.json")))).validate(doc)
PY
echo "inspect: prepared ranks and their split"
