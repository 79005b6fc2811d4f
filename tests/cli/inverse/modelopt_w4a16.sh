#!/usr/bin/env bash
# The inverse of prepared-w4a16 (issue 12): a ModelOpt NVFP4 checkpoint -> prepared-w4a16 (--ep 1,
# --ep 2, and --ep 2 with --scale-layout 8x4) -> `convert --target modelopt` gives the source's
# tensors byte for byte (names, dtypes, shapes, bytes: an independent Python reader), and the
# whole directory (config.json, hf_quant_config.json, index, shards, side files) equals a direct
# `convert SRC --target modelopt` of the source. A record whose weight_scale_2 values are all
# null (a record of an earlier version) still restores exactly: W4A16's alpha is the decode scale.
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
for opts in "--ep 1" "--ep 2" "--ep 2 --scale-layout 8x4"; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    "$T" convert "$tmp/src" "$tmp/p$n" --target prepared-w4a16 $opts --quiet
    [ -f "$tmp/p$n/nvfp4-inverse.json" ] || fail "$opts: no nvfp4-inverse.json"
    "$T" hash --check "$tmp/p$n" --quiet || fail "$opts: hash --check of the prepared output"
    "$T" convert "$tmp/p$n" "$tmp/b$n" --target modelopt --quiet ||
        fail "$opts: the inverse failed"
    C tensors "$tmp/src" "$tmp/b$n" || fail "$opts: restored tensors differ from the source"
    C files "$tmp/direct" "$tmp/b$n" || fail "$opts: the directory differs from the direct one"
    [ ! -e "$tmp/b$n.unprepare.tmp" ] || fail "$opts: the temporary source was left"
done
C forget "$tmp/p2"
"$T" convert "$tmp/p2" "$tmp/f2" --target modelopt --quiet || fail "null weight_scale_2 refused"
C tensors "$tmp/src" "$tmp/f2" || fail "null weight_scale_2: tensors differ from the source"
echo "prepared-w4a16 --ep 1/2, 128x4/8x4 -> modelopt: the source's tensors, the direct directory"
