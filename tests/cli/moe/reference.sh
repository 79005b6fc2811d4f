#!/usr/bin/env bash
# The CPU reference reproduces transformers' own BF16 forward of the MoE block (tests/data/moe,
# made on the H200 with tests/gpu/make_moe_reference.py) within 2e-2 rel-L2 for Qwen3-MoE,
# DeepSeek-V3, Mixtral and Qwen2-MoE; the output is one F32 tensor "y" with the layer and
# precision in its metadata, and the same run twice gives the same bytes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/../lib.sh"
for f in qwen3_moe deepseek_v3 mixtral qwen2_moe; do
    d=$NVFP4_TESTDATA/moe/$f
    "$NVFP4TOOL" moe "$d" --layer 1 --input "$d/io.safetensors" --output "$tmp/$f.safetensors" \
        --device cpu --quiet
    r=$("$NVFP4_PYTHON" "$here/moe_check.py" rel_l2 "$tmp/$f.safetensors" y "$d/io.safetensors" y)
    "$NVFP4_PYTHON" -c "import sys; sys.exit(0 if float('$r') <= 2e-2 else 1)" ||
        fail "$f: rel-L2 $r against transformers exceeds 2e-2"
    [ "$("$NVFP4_PYTHON" "$here/moe_check.py" meta "$tmp/$f.safetensors" layer)" = 1 ] ||
        fail "$f: metadata layer"
    [ "$("$NVFP4_PYTHON" "$here/moe_check.py" meta "$tmp/$f.safetensors" precision)" = bf16 ] ||
        fail "$f: metadata precision"
    echo "$f bf16 rel-L2 $r"
done
d=$NVFP4_TESTDATA/moe/deepseek_v3
"$NVFP4TOOL" moe "$d" --layer 1 --input "$d/io.safetensors" --output "$tmp/again.safetensors" \
    --quiet
cmp "$tmp/deepseek_v3.safetensors" "$tmp/again.safetensors" || fail "two runs differ"
[ ! -e "$tmp/again.safetensors.tmp" ] || fail "temporary output left behind"
