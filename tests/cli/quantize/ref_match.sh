#!/usr/bin/env bash
# quantize writes exactly the tensors, dtypes, shapes and bytes that an independent Python
# implementation (ref_quant.py) computes, for RTN and every 4over6 variant; FP8-block sources
# are dequantized and their _scale_inv dropped; other tensors are copied.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" "$here/ref_quant.py" make "$tmp/in.safetensors"
while read -r method error domain emax; do
    "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" --quiet --threads 2 --force \
        --method "$method" --error "$error" --error-domain "$domain" --e4m3-max "$emax" >/dev/null
    "$NVFP4_PYTHON" "$here/ref_quant.py" check "$tmp/in.safetensors" "$tmp/out.safetensors" \
        "$method" "$error" "$domain" "$emax" >/dev/null ||
        { echo "mismatch for $method $error $domain $emax" >&2; exit 1; }
done <<'CASES'
rtn mse scaled 448
4over6 mse scaled 256
4over6 mse original 256
4over6 mae scaled 448
4over6 mae original 256
CASES
# The default recipe is 4over6 / mse / scaled / 256.
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/def.safetensors" --quiet >/dev/null
"$NVFP4_PYTHON" "$here/ref_quant.py" check "$tmp/in.safetensors" "$tmp/def.safetensors" \
    4over6 mse scaled 256 >/dev/null || { echo "default recipe mismatch" >&2; exit 1; }
echo ok
