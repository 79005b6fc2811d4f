#!/usr/bin/env bash
# Unbroken conversions pass verify (exit 0): modelopt and prepared (128x4, 8x4) of
# tests/data/moe/qwen3_moe, deepseek_v3 and a synth, with --reference (layout values from it,
# quality within FlashInfer's tolerance) and without (structure, finiteness, inverse layout);
# the JSON report validates against schemas/report.schema.json and says how it checked. --layers
# picks layers; a non-MoE layer is a usage error (exit 2).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../../data/moe" && pwd)
T=$NVFP4TOOL
S=$NVFP4_SCHEMAS/report.schema.json

"$T" synth "$tmp/syn" --preset qwen3-moe --dtype bf16 --layers 2 --experts 4 --quiet
for src in "$data/qwen3_moe" "$data/deepseek_v3" "$tmp/syn"; do
    n=$(basename "$src")
    "$T" convert "$src" "$tmp/$n-mo" --quiet
    "$T" convert "$src" "$tmp/$n-pr" --quiet --target prepared-w4a16
    "$T" convert "$src" "$tmp/$n-pr8" --quiet --target prepared-w4a16 --scale-layout 8x4
    for c in mo pr pr8; do
        for ref in yes no; do
            args=()
            [ $ref = yes ] && args=(--reference "$src")
            rc=0
            "$T" verify "$tmp/$n-$c" "${args[@]}" --json --tokens 48 --seed 5 \
                >"$tmp/r.json" 2>"$tmp/err" || rc=$?
            [ "$rc" -eq 0 ] || fail "$n-$c (reference $ref): exit $rc: $(tail -3 "$tmp/err")"
            "$NVFP4_PYTHON" "$here/check_report.py" "$S" "$tmp/r.json" pass ||
                fail "$n-$c (reference $ref): report"
            "$NVFP4_PYTHON" - "$tmp/r.json" "$c" "$ref" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
kind, ref = sys.argv[2], sys.argv[3] == "yes"
s = r["settings"]
assert s["tokens"] == 48 and s["seed"] == 5 and s["precision"] == "w4a16", s
ids = {c["id"] for l in r["layers"] for c in l["checks"]}
if kind == "mo":
    assert s["method"] == "cpu-reference" and s["layout_source"] is None, s
    assert "layout_rel_l2" not in ids and "weight_scale_2" in ids, ids
else:
    assert s["method"] == "cpu-prepared-reader", s
    assert s["layout_source"] == ("reference" if ref else "inverse-layout"), s
    assert "layout_rel_l2" in ids, ids
assert ("within_tolerance" in ids) == ref and ("expert_rel_l2" in ids) == ref, ids
for l in r["layers"]:
    for c in l["checks"]:
        if c["id"] == "layout_rel_l2" and ref:
            assert c["value"] == 0, c  # the same NVFP4 values, the same arithmetic
        if c["id"] == "within_tolerance":
            assert c["value"] >= 0.97, c
PY
        done
    done
done
# A --method rtn conversion: verify quantizes the reference with the recipe recorded in the
# manifest (layout rel-L2 0, exit 0); without the manifest it takes the default recipe (4over6),
# whose values differ: the layout check fails (exit 3) unless --recipe names rtn.
"$T" convert "$tmp/syn" "$tmp/rtn" --quiet --method rtn --target prepared-w4a16
expect 0 "failed: PASS" -- "$T" verify "$tmp/rtn" --reference "$tmp/syn"
grep -q "layout_rel_l2      0 " "$tmp/out" || fail "rtn: layout rel-L2 not 0: $(cat "$tmp/out")"
rm "$tmp/rtn/nvfp4-manifest.json"
expect 3 "failed: FAIL" -- "$T" verify "$tmp/rtn" --reference "$tmp/syn"
printf 'quantization: {method: rtn}\n' >"$tmp/rtn.yaml"
expect 0 "failed: PASS" -- "$T" verify "$tmp/rtn" --reference "$tmp/syn" --recipe "$tmp/rtn.yaml"
# DeepSeek-V3's layer 0 is dense: only layer 1 is verified
"$NVFP4_PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [l["layer"] for l in r["layers"]] == [1], r["layers"]' \
    <("$T" verify "$tmp/deepseek_v3-pr" --json 2>/dev/null)
expect 0 "1 layer(s), 1 passed, 0 failed: PASS" -- "$T" verify "$tmp/syn-mo" --layers 1
expect 2 "layer 0 is not an MoE layer" -- "$T" verify "$tmp/deepseek_v3-mo" --layers 0-1
expect 2 "--layers" -- "$T" verify "$tmp/syn-mo" --layers 1-
echo "verify: unbroken modelopt and prepared conversions pass, reports valid"
