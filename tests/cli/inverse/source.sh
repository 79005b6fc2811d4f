#!/usr/bin/env bash
# BF16 and FP8-block sources (issue 12): source -> prepared-w4a16 / prepared-w4a4 (--ep 2) ->
# `convert --target modelopt` holds the tensors of a direct `convert SRC --target modelopt`
# byte for byte (an independent Python reader), with the same config.json, hf_quant_config.json
# and index (the shard holds the same tensors, in the order of a copy of stored NVFP4). The FP8
# source also converts its attention o_proj (a dense prepared linear, restored from X.alpha and
# the record) with calibrated input scales (--input-amax: W4A4's alpha alone would not give
# weight_scale_2 back; the record does).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL
C() { "$NVFP4_PYTHON" "$here/check_inverse.py" "$@" >/dev/null; }

"$T" synth "$tmp/bf16" --preset qwen3-moe --dtype bf16 --hidden 128 --moe-intermediate 128 \
    --experts 4 --quiet
"$T" synth "$tmp/fp8" --preset deepseek-v3 --dtype fp8-block --hidden 256 \
    --moe-intermediate 128 --experts 4 --quiet
"$NVFP4_PYTHON" - "$tmp/amax.json" <<'PY'
import json, sys
amax = {}
for l in range(3):
    amax["model.layers.%d.self_attn.o_proj" % l] = 3.5 + l
    for e in range(4):
        for p, v in (("gate_proj", 7.0), ("up_proj", 7.0), ("down_proj", 11.0 + e)):
            amax["model.layers.%d.mlp.experts.%d.%s" % (l, e, p)] = v
json.dump(amax, open(sys.argv[1], "w"))
PY
for s in bf16 fp8; do
    o=(--method rtn)
    [ $s = bf16 ] || o+=(--include '*.mlp.experts.*' --include '*o_proj*' --input-amax "$tmp/amax.json")
    "$T" convert "$tmp/$s" "$tmp/$s.direct" "${o[@]}" --quiet
    for t in "prepared-w4a16" "prepared-w4a4 --ep 2"; do
        # shellcheck disable=SC2086
        "$T" convert "$tmp/$s" "$tmp/p" "${o[@]}" --target $t --quiet
        [ $s = bf16 ] || grep -qF '"model.layers.2.self_attn.o_proj"' "$tmp/p/nvfp4-inverse.json" ||
            fail "$s $t: the record has no dense o_proj"
        "$T" convert "$tmp/p" "$tmp/b" --quiet || fail "$s $t: the inverse failed"
        C tensors "$tmp/$s.direct" "$tmp/b" || fail "$s $t: tensors differ from the direct"
        for f in config.json hf_quant_config.json model.safetensors.index.json; do
            cmp -s "$tmp/$s.direct/$f" "$tmp/b/$f" || fail "$s $t: $f differs from the direct"
        done
        rm -rf "$tmp/p" "$tmp/b"
    done
done
echo "bf16 and fp8-block -> prepared -> modelopt: the tensors of the direct modelopt conversion"
