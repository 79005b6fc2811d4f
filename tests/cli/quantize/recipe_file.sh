#!/usr/bin/env bash
# --recipe supplies the quantization keys; each flag overrides its key.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" "$here/ref_quant.py" make "$tmp/in.safetensors"
recipes="$NVFP4_TESTDATA/recipes"
# good-rtn.yaml: rtn with e4m3_max following the method (448).
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/a.safetensors" --quiet \
    --recipe "$recipes/good-rtn.yaml" >/dev/null
"$NVFP4_PYTHON" "$here/ref_quant.py" check "$tmp/in.safetensors" "$tmp/a.safetensors" \
    rtn mse scaled 448 >/dev/null || { echo "good-rtn.yaml mismatch" >&2; exit 1; }
# good-mae-original.yaml (4over6 mae original 448), with --e4m3-max 256 and --error mse on top.
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/b.safetensors" --quiet \
    --recipe "$recipes/good-mae-original.yaml" --e4m3-max 256 --error mse >/dev/null
"$NVFP4_PYTHON" "$here/ref_quant.py" check "$tmp/in.safetensors" "$tmp/b.safetensors" \
    4over6 mse original 256 >/dev/null || { echo "flag override mismatch" >&2; exit 1; }
out=$("$NVFP4TOOL" quantize --print-recipe --recipe "$recipes/good-rtn.yaml" --method 4over6)
case "$out" in
*'"method":"4over6"'*'"e4m3_max":256'*) ;;
*) echo "unexpected effective recipe: $out" >&2; exit 1 ;;
esac
echo ok
