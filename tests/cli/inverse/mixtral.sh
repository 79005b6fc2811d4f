#!/usr/bin/env bash
# A Mixtral-named ModelOpt source (issue 12): block_sparse_moe.experts.{e}.w1 / w3 / w2 (a renamed
# copy of a synth checkpoint, made by the Python helper) -> prepared-w4a4 --ep 2 -> modelopt
# restores those names and bytes (an independent Python reader), equal to the direct modelopt
# conversion of the renamed copy; the record names the Mixtral modules. A compressed-tensors
# source (weight_packed, weight_global_scale) comes back as ModelOpt: the tensors of the
# ModelOpt synth checkpoint of the same seed, byte for byte.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL
C() { "$NVFP4_PYTHON" "$here/check_inverse.py" "$@" >/dev/null; }

"$T" synth "$tmp/qwen" --preset qwen3-moe --dtype nvfp4 --hidden 128 --moe-intermediate 128 \
    --experts 4 --quiet
C mixtral "$tmp/qwen" "$tmp/src"
inc=(--include '*.block_sparse_moe.experts.*')
"$T" convert "$tmp/src" "$tmp/direct" --target modelopt "${inc[@]}" --allow-empty --quiet
"$T" convert "$tmp/src" "$tmp/p" --target prepared-w4a4 --ep 2 "${inc[@]}" --quiet
grep -qF '"model.layers.1.block_sparse_moe.experts.3.w3"' "$tmp/p/nvfp4-inverse.json" ||
    fail "the record does not name the Mixtral modules"
"$T" convert "$tmp/p" "$tmp/b" --target modelopt "${inc[@]}" --quiet || fail "the inverse failed"
C tensors "$tmp/src" "$tmp/b" || fail "restored tensors differ from the Mixtral-named source"
C files "$tmp/direct" "$tmp/b" || fail "the directory differs from the direct one"
"$T" synth "$tmp/ct" --preset qwen3-moe --dtype nvfp4-ct --hidden 128 --moe-intermediate 128 \
    --experts 4 --quiet
"$T" convert "$tmp/ct" "$tmp/pct" --target prepared-w4a16 --quiet
"$T" convert "$tmp/pct" "$tmp/bct" --target modelopt --quiet || fail "the inverse of a CT source"
C tensors "$tmp/qwen" "$tmp/bct" || fail "a CT source did not come back as its ModelOpt twin"
echo "Mixtral-named source -> prepared-w4a4 --ep 2 -> modelopt: names and bytes restored"
