#!/usr/bin/env bash
# Serialized NVFP4 in: convert of an NVFP4 checkpoint to a prepared target lays out the stored
# bytes without re-quantizing. Where gate and up share weight_scale_2 (every expert of a
# conversion's output), the prepared output of the ModelOpt checkpoint M (S -> M) equals the
# prepared output of S itself, shard file by shard file (w4a16 128x4; w4a4 8x4 --ep 2; fused
# DeepSeek experts); the compressed-tensors copy of the same values gives the same bytes; and
# check_prepared.py (layout formulas typed from SPEC section 5) finds the prepared experts equal
# to M's stored linears.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL

same_shards() { # A B: the same shard files, byte for byte
    local n=0 f
    for f in $(cd "$1" && find . -name '*.safetensors' | sort); do
        cmp -s "$1/$f" "$2/$f" || fail "$1 and $2 differ in $f"
        n=$((n + 1))
    done
    [ "$n" -gt 0 ] || fail "$1 holds no shard"
    [ "$(cd "$1" && find . -name '*.safetensors' | sort)" = \
        "$(cd "$2" && find . -name '*.safetensors' | sort)" ] || fail "$1 and $2: other shards"
}

"$T" synth "$tmp/s" --preset qwen3-moe --dtype bf16 --layers 2 --experts 4 --quiet
"$T" synth "$tmp/m" --preset qwen3-moe --dtype nvfp4 --layers 2 --experts 4 --quiet
"$T" synth "$tmp/c" --preset qwen3-moe --dtype nvfp4-ct --layers 2 --experts 4 --quiet
# synth --dtype nvfp4 is S converted with the default recipe.
"$T" convert "$tmp/s" "$tmp/m2" --quiet
same_shards "$tmp/m" "$tmp/m2"

"$T" convert "$tmp/s" "$tmp/p-s" --quiet --target prepared-w4a16
"$T" convert "$tmp/m" "$tmp/p-m" --quiet --target prepared-w4a16
"$T" convert "$tmp/c" "$tmp/p-c" --quiet --target prepared-w4a16
same_shards "$tmp/p-s" "$tmp/p-m"
same_shards "$tmp/p-s" "$tmp/p-c"
"$NVFP4_PYTHON" "$here/../prepared/check_prepared.py" compare "$tmp/p-m" "$tmp/m" \
    --precision w4a16 --layout 128x4 >/dev/null || fail "prepared of M differs from M"
"$T" hash --check "$tmp/p-m" --quiet || fail "hash --check of the prepared NVFP4 source"
[ ! -e "$tmp/p-m/hf_quant_config.json" ] || fail "hf_quant_config.json copied from M"
"$NVFP4_PYTHON" -c 'import json, sys
q = json.load(open(sys.argv[1]))["quantization_config"]
sys.exit(q["quant_method"] != "nvfp4tool-prepared")' "$tmp/p-c/config.json" ||
    fail "config.json of the CT source keeps its quantization_config"
grep -q requantized "$tmp/p-m/nvfp4-manifest.json" && fail "nothing to re-quantize, reported"

"$T" convert "$tmp/s" "$tmp/q-s" --quiet --target prepared-w4a4 --scale-layout 8x4 --ep 2
"$T" convert "$tmp/m" "$tmp/q-m" --quiet --target prepared-w4a4 --scale-layout 8x4 --ep 2
"$T" convert "$tmp/c" "$tmp/q-c" --quiet --target prepared-w4a4 --scale-layout 8x4 --ep 2
same_shards "$tmp/q-s" "$tmp/q-m"
same_shards "$tmp/q-s" "$tmp/q-c"
"$NVFP4_PYTHON" "$here/../prepared/check_prepared.py" compare "$tmp/q-m/rank-00001-of-00002" \
    "$tmp/m" --precision w4a4 --layout 8x4 >/dev/null || fail "w4a4 rank 1 of M differs from M"

"$T" synth "$tmp/fs" --preset deepseek-v3 --dtype bf16 --experts 4 --fused-experts \
    --moe-intermediate 128 --quiet
"$T" synth "$tmp/fm" --preset deepseek-v3 --dtype nvfp4 --experts 4 --fused-experts \
    --moe-intermediate 128 --quiet
"$T" convert "$tmp/fs" "$tmp/fp-s" --quiet --target prepared-w4a4
"$T" convert "$tmp/fm" "$tmp/fp-m" --quiet --target prepared-w4a4
same_shards "$tmp/fp-s" "$tmp/fp-m"
echo "NVFP4 sources: prepared bytes equal those of the original source"
