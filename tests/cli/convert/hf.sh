#!/usr/bin/env bash
# The transformers-written fixtures (Qwen3-MoE, DeepSeek-V3; BF16 and FineGrainedFP8) convert,
# with RTN and with the default recipe, and every tensor matches check_convert.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in qwen3moe-bf16 qwen3moe-fp8 deepseekv3-bf16 deepseekv3-fp8; do
    rm -rf "$tmp/dst"
    "$NVFP4TOOL" convert "$NVFP4_TESTDATA/hf/$d" "$tmp/dst" --quiet --method rtn >/dev/null
    "$NVFP4_PYTHON" "$here/check_convert.py" "$NVFP4_TESTDATA/hf/$d" "$tmp/dst" --method rtn \
        --emax 448 >/dev/null || { echo "mismatch for $d" >&2; exit 1; }
done
rm -rf "$tmp/dst"
"$NVFP4TOOL" convert "$NVFP4_TESTDATA/hf/deepseekv3-fp8" "$tmp/dst" --quiet >/dev/null
"$NVFP4_PYTHON" "$here/check_convert.py" "$NVFP4_TESTDATA/hf/deepseekv3-fp8" "$tmp/dst" >/dev/null
echo ok
