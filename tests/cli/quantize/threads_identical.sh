#!/usr/bin/env bash
# The output file is byte-identical for --threads 1, 2, 3 and 7.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" "$here/ref_quant.py" make "$tmp/in.safetensors"
for m in rtn 4over6; do
    for t in 1 2 3 7; do
        "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out-$m-$t.safetensors" --quiet \
            --method "$m" --threads "$t" >/dev/null
    done
    for t in 2 3 7; do
        cmp "$tmp/out-$m-1.safetensors" "$tmp/out-$m-$t.safetensors" ||
            { echo "$m: --threads $t differs from --threads 1" >&2; exit 1; }
    done
done
echo ok
