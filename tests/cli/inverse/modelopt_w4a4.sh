#!/usr/bin/env bash
# The inverse of prepared-w4a4 (issue 12): a ModelOpt NVFP4 checkpoint -> prepared-w4a4
# (--scale-layout 128x4 and 8x4, --ep 1 and 2) -> `convert --target modelopt` gives the source's
# tensors byte for byte (an independent Python reader) and the directory of a direct
# `convert SRC --target modelopt`. W4A4 stores alpha = input_scale * weight_scale_2: the record
# holds weight_scale_2; without it (null, a resumed run) alpha gives it exactly only while the
# input scale is 1.0, and another input scale is refused (exit 3) naming the module.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL
C() { "$NVFP4_PYTHON" "$here/check_inverse.py" "$@" >/dev/null; }

"$T" synth "$tmp/src" --preset qwen3-moe --dtype nvfp4 --hidden 128 --moe-intermediate 128 \
    --experts 4 --quiet
"$T" convert "$tmp/src" "$tmp/direct" --target modelopt --allow-empty --quiet
n=0
for opts in "--ep 1" "--ep 2" "--ep 1 --scale-layout 8x4" "--ep 2 --scale-layout 8x4"; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    "$T" convert "$tmp/src" "$tmp/p$n" --target prepared-w4a4 $opts --quiet
    "$T" convert "$tmp/p$n" "$tmp/b$n" --target modelopt --quiet ||
        fail "$opts: the inverse failed"
    C tensors "$tmp/src" "$tmp/b$n" || fail "$opts: restored tensors differ from the source"
    C files "$tmp/direct" "$tmp/b$n" || fail "$opts: the directory differs from the direct one"
done
C forget "$tmp/p1"
"$T" convert "$tmp/p1" "$tmp/f1" --target modelopt --quiet || fail "null weight_scale_2 refused"
C tensors "$tmp/src" "$tmp/f1" || fail "null weight_scale_2: tensors differ from the source"
"$NVFP4_PYTHON" "$here/check_inverse.py" forget "$tmp/p2" 0x40000000 >/dev/null
expect 3 "model.layers.0.mlp.experts.0.down_proj': its weight_scale_2 was not recorded" -- \
    "$T" convert "$tmp/p2" "$tmp/f2" --target modelopt
[ ! -e "$tmp/f2/nvfp4-manifest.json" ] && [ ! -e "$tmp/f2.unprepare.tmp" ] ||
    fail "a refused inverse left files"
echo "prepared-w4a4 --ep 1/2, 128x4/8x4 -> modelopt: the source's tensors, the direct directory"
