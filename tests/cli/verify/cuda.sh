#!/usr/bin/env bash
# verify --device cuda: each layer's routed experts run on the GPU MoE kernels: a 128x4 prepared
# checkpoint at its own precision (prepared-w4a16 at W4A16, prepared-w4a4 at W4A4) as its bytes
# are stored; any other (modelopt, 8x4) through a 128x4 layout built from the layer's NVFP4
# values (the debug log says which). On the transformers-written qwen3_moe and deepseek_v3
# converted to modelopt, prepared-w4a16 (128x4 and 8x4) and prepared-w4a4, with --reference: exit 0, method cuda-kernels, the kernel_rel_l2 check (kernels against the CPU
# reference on the same NVFP4 values) present and <= 1e-2 on every layer, the report
# schema-valid; W4A4 on the modelopt conversion too, and per token; a copy with one expert's nibbles swapped
# fails (exit 3) naming that expert. Without a GPU: skipped (77); device_errors.sh checks the
# exit 4 of a GPU-less run.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../../data/moe" && pwd)
T=$NVFP4TOOL
S=$NVFP4_SCHEMAS/report.schema.json
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "no GPU: skipped"
    exit 77
fi
# The report $1 ran on the kernels, and every layer's kernel check passed within 1e-2.
kernel_check() {
    "$NVFP4_PYTHON" - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["settings"]["method"] == "cuda-kernels", r["settings"]
for l in r["layers"]:
    k = [c for c in l["checks"] if c["id"] == "kernel_rel_l2"]
    assert len(k) == 1 and k[0]["pass"] and k[0]["value"] <= 1e-2, (l["layer"], k)
    print("layer", l["layer"], "kernel rel-L2", k[0]["value"])
PY
}
for src in "$data/qwen3_moe" "$data/deepseek_v3"; do
    n=$(basename "$src")
    "$T" convert "$src" "$tmp/$n-mo" --quiet
    "$T" convert "$src" "$tmp/$n-pr" --quiet --target prepared-w4a16
    "$T" convert "$src" "$tmp/$n-pr4" --quiet --target prepared-w4a4
    "$T" convert "$src" "$tmp/$n-pr8" --quiet --target prepared-w4a16 --scale-layout 8x4
    for c in mo pr pr4 pr8; do
        for p in w4a16 w4a4; do
            case $c-$p in pr-w4a4 | pr8-w4a4 | pr4-w4a16) continue ;; esac
            rc=0
            "$T" verify "$tmp/$n-$c" --reference "$src" --device cuda --precision $p --json \
                --tokens 48 --seed 5 --log-level debug >"$tmp/r.json" 2>"$tmp/err" || rc=$?
            [ "$rc" -eq 0 ] || fail "$n-$c $p: exit $rc: $(tail -3 "$tmp/err")"
            # a 128x4 prepared checkpoint at its own precision: the kernels read its bytes as
            # stored; otherwise a layout built from the values
            want="a 128x4 prepared layout built from"
            case $c in pr | pr4) want="the checkpoint's prepared bytes as stored" ;; esac
            grep -q "MoE kernels read $want" "$tmp/err" ||
                fail "$n-$c $p: the kernels did not read $want: $(grep 'MoE kernels' "$tmp/err")"
            "$NVFP4_PYTHON" "$here/check_report.py" "$S" "$tmp/r.json" pass ||
                fail "$n-$c $p: report"
            kernel_check "$tmp/r.json" || fail "$n-$c $p: kernel check"
        done
    done
done
# W4A4 with per-token activation scales on the GPU (kernels since stop 34): passes, each
# layer's kernel check within 1e-2 of the CPU reference with the same per-token scales.
rc=0
"$T" verify "$tmp/qwen3_moe-mo" --device cuda --precision w4a4 --per-token-activations --json \
    --tokens 48 --seed 5 >"$tmp/r.json" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 0 ] || fail "per-token w4a4: exit $rc: $(tail -3 "$tmp/err")"
kernel_check "$tmp/r.json" || fail "per-token w4a4: kernel check"
# One expert broken: the kernels read the broken bytes, the layer fails naming the expert.
"$NVFP4_PYTHON" "$here/break_ckpt.py" "$tmp/qwen3_moe-pr" "$tmp/bk" nibbles 1 2 0
rc=0
"$T" verify "$tmp/bk" --reference "$data/qwen3_moe" --device cuda --json --tokens 48 \
    >"$tmp/r.json" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 3 ] || fail "broken: exit $rc, want 3: $(tail -3 "$tmp/err")"
"$NVFP4_PYTHON" "$here/check_report.py" "$S" "$tmp/r.json" fail 1 2 || fail "broken: report"
echo "verify --device cuda: good conversions pass, a broken expert is named"
