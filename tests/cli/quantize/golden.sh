#!/usr/bin/env bash
# The bytes `quantize` writes for the test checkpoints' shards and for synthetic checkpoints
# (BF16 and FP8-block, separate and fused experts, F32 and UE8M0 block scales), with the default
# recipe (4over6) and with --method rtn, are those of golden.sha256. The hashes were recorded
# with the quantize of commit 80945e8 (its own plan and loop in cmd/), before quantize became a
# conversion through the library; ref_match.sh checks the arithmetic against ref_quant.py.
# On a machine with a GPU, --device cuda must write the same bytes.
# NVFP4_GOLDEN_RECORD=FILE writes the (CPU) hashes to FILE instead of comparing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hf=$NVFP4_TESTDATA/hf
small=(--layers 2 --experts 4 --hidden 128 --moe-intermediate 64 --max-shard-size 1GB)
"$NVFP4TOOL" synth "$tmp/qwen-bf16" --preset qwen3-moe --dtype bf16 "${small[@]}" --quiet
"$NVFP4TOOL" synth "$tmp/qwen-fp8-fused" --preset qwen3-moe --dtype fp8-block --fused-experts \
    "${small[@]}" --quiet
"$NVFP4TOOL" synth "$tmp/dsv3-bf16" --preset deepseek-v3 --dtype bf16 "${small[@]}" --quiet
"$NVFP4TOOL" synth "$tmp/dsv3-fp8-ue8m0" --preset deepseek-v3 --dtype fp8-block \
    --scale-fmt ue8m0 "${small[@]}" --seed 7 --quiet
devices=cpu
if [ -z "${NVFP4_GOLDEN_RECORD:-}" ] && nvidia-smi -L >/dev/null 2>&1; then
    devices="cpu cuda"
fi
run_case() { # run_case NAME IN [options]
    local name=$1 in=$2
    shift 2
    "$NVFP4TOOL" quantize "$in" "$tmp/out.safetensors" --quiet --device "$dev" "$@" >/dev/null
    echo "$(sha256sum <"$tmp/out.safetensors" | cut -c1-64)  $name" >>"$tmp/got-$dev"
    rm -f "$tmp/out.safetensors"
}
for dev in $devices; do
    : >"$tmp/got-$dev"
    for f in "$hf"/*/model-*.safetensors "$tmp"/*/model-*.safetensors; do
        case "$f" in
        # weights whose _scale_inv is in another shard: exit 3 (fp8_scales.sh)
        */deepseekv3-fp8/model-00002-of-00003.safetensors) continue ;;
        esac
        rel=$(basename "$(dirname "$f")")/$(basename "$f")
        run_case "$rel default" "$f"
        run_case "$rel rtn" "$f" --method rtn
    done
    run_case "qwen3moe-fp8/model-00001-of-00003.safetensors rtn 128,128" \
        "$hf/qwen3moe-fp8/model-00001-of-00003.safetensors" --method rtn --weight-block-size 128,128
done
if [ -n "${NVFP4_GOLDEN_RECORD:-}" ]; then
    cp "$tmp/got-cpu" "$NVFP4_GOLDEN_RECORD"
    exit 0
fi
for dev in $devices; do
    diff "$here/golden.sha256" "$tmp/got-$dev" >&2 ||
        { echo "quantize --device $dev output differs from golden.sha256" >&2; exit 1; }
done
echo ok
