#!/usr/bin/env bash
# convert of every synthetic source format (BF16, FP8-block with f32 and ue8m0 scales, fused 3-D
# experts in BF16 and FP8) against check_convert.py, which recomputes every output tensor
# independently (FP8 dequantized by hand, NVFP4 bytes from tests/cli/quantize/ref_quant.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
while read -r preset dtype extra; do
    rm -rf "$tmp/src" "$tmp/dst"
    # shellcheck disable=SC2086
    "$NVFP4TOOL" synth "$tmp/src" --preset "$preset" --dtype "$dtype" --hidden 64 \
        --moe-intermediate 32 --experts 4 --quiet $extra >/dev/null
    "$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" --quiet --threads 2 >/dev/null
    "$NVFP4_PYTHON" "$here/check_convert.py" "$tmp/src" "$tmp/dst" >/dev/null ||
        { echo "mismatch for $preset $dtype $extra" >&2; exit 1; }
    [ -f "$tmp/dst/nvfp4-manifest.json" ] || { echo "no manifest" >&2; exit 1; }
    for f in tokenizer.json tokenizer_config.json generation_config.json README.md; do
        cmp -s "$tmp/src/$f" "$tmp/dst/$f" || { echo "$f not copied" >&2; exit 1; }
    done
done <<'CASES'
qwen3-moe bf16
qwen3-moe fp8-block
qwen3-moe fp8-block --fused-experts
deepseek-v3 fp8-block --scale-fmt ue8m0
deepseek-v3 bf16 --fused-experts
CASES
echo ok
