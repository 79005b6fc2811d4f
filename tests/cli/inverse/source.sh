#!/usr/bin/env bash
# BF16 and FP8-block sources (issue 12): source -> prepared-w4a16 / prepared-w4a4 (--ep 2) ->
# `convert --target modelopt` holds the tensors of a direct `convert SRC --target modelopt`
# byte for byte (an independent Python reader), with the same config.json, hf_quant_config.json
# and index (the shard holds the same tensors, in the order of a copy of stored NVFP4).
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
for s in bf16 fp8; do
    "$T" convert "$tmp/$s" "$tmp/$s.direct" --method rtn --quiet
    for t in "prepared-w4a16" "prepared-w4a4 --ep 2"; do
        # shellcheck disable=SC2086
        "$T" convert "$tmp/$s" "$tmp/p" --method rtn --target $t --quiet
        "$T" convert "$tmp/p" "$tmp/b" --quiet || fail "$s $t: the inverse failed"
        C tensors "$tmp/$s.direct" "$tmp/b" || fail "$s $t: tensors differ from the direct"
        for f in config.json hf_quant_config.json model.safetensors.index.json; do
            cmp -s "$tmp/$s.direct/$f" "$tmp/b/$f" || fail "$s $t: $f differs from the direct"
        done
        rm -rf "$tmp/p" "$tmp/b"
    done
done
echo "bf16 and fp8-block -> prepared -> modelopt: the tensors of the direct modelopt conversion"
