#!/usr/bin/env bash
# verify catches checkpoints broken on purpose (break_ckpt.py, written without the tool): each a
# copy of a good modelopt or prepared conversion with one defect (nibbles swapped in one expert or
# all, gate and up exchanged, scales in linear order instead of the layout / rows reversed /
# read column-major (transposed), weight_scale_2 or alpha inverted, one expert replaced by
# another, the router correction bias dropped from DeepSeek-V3). Each exits 3 with --reference, and its JSON report (schema-valid)
# names the layer, and the expert where the defect is one expert's.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../../data/moe" && pwd)
T=$NVFP4TOOL
S=$NVFP4_SCHEMAS/report.schema.json
Q=$data/qwen3_moe
D=$data/deepseek_v3

"$T" synth "$tmp/syn" --preset qwen3-moe --dtype bf16 --layers 2 --experts 4 --quiet
"$T" convert "$Q" "$tmp/q-mo" --quiet
"$T" convert "$Q" "$tmp/q-pr" --quiet --target prepared-w4a16
"$T" convert "$tmp/syn" "$tmp/s-pr8" --quiet --target prepared-w4a16 --scale-layout 8x4
"$T" convert "$D" "$tmp/d-mo" --quiet
"$T" convert "$D" "$tmp/d-pr" --quiet --target prepared-w4a16

# broken CKPT REF CASE LAYER EXPERT [OTHER] -- WANT_EXPERT [CHECK]
broken() {
    local ck=$1 ref=$2 case=$3 layer=$4 expert=$5 other=${6:-0} want=$7 check=${8:-}
    local bk=$tmp/bk rc=0
    "$NVFP4_PYTHON" "$here/break_ckpt.py" "$tmp/$ck" "$bk" "$case" "$layer" "$expert" "$other"
    "$T" verify "$bk" --reference "$ref" --json >"$tmp/r.json" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq 3 ] || fail "$ck $case: verify exited $rc, expected 3: $(tail -3 "$tmp/err")"
    "$NVFP4_PYTHON" "$here/check_report.py" "$S" "$tmp/r.json" fail "$layer" "$want" $check ||
        fail "$ck $case: the report does not name layer $layer / expert $want"
    # the table says the same, with the exit code
    rc=0
    "$T" verify "$bk" --reference "$ref" >"$tmp/table" 2>/dev/null || rc=$?
    [ "$rc" -eq 3 ] && grep -q "failed: FAIL$" "$tmp/table" || fail "$ck $case: table verdict"
}
broken q-mo "$Q" nibbles 1 3 0 3 expert_rel_l2
broken q-mo "$Q" nibbles 0 -1 0 - expert_rel_l2
broken q-mo "$Q" gate_up 1 6 0 6 expert_rel_l2
broken q-mo "$Q" ws2_inverted 0 2 0 2
broken q-mo "$Q" replaced 1 3 5 3 expert_rel_l2
broken q-pr "$Q" nibbles 1 3 0 3 layout_expert
broken q-pr "$Q" gate_up 1 4 0 4 layout_expert
broken q-pr "$Q" scales_linear 1 5 0 5 layout_expert
broken q-pr "$Q" scales_transposed 1 6 0 6 layout_expert
broken s-pr8 "$tmp/syn" scales_transposed 0 3 0 3 layout_expert
broken q-pr "$Q" ws2_inverted 1 2 0 2 layout_expert
broken q-pr "$Q" replaced 0 3 5 3 expert_rel_l2
broken s-pr8 "$tmp/syn" scales_linear 1 2 0 2 layout_expert
broken s-pr8 "$tmp/syn" gate_up 0 1 0 1 layout_expert
broken d-mo "$D" bias_dropped 1 0 0 - router_bias
broken d-pr "$D" bias_dropped 1 0 0 - router_bias
echo "verify: every broken checkpoint exits 3 and its report names the layer and expert"
