#!/usr/bin/env bash
# Runs on the device machine: `moe --device cuda` of two nvfp4tool builds (NVFP4_BIN, the one
# under test, and NVFP4_OLD_BIN, an earlier one) on the transformers-written test checkpoints
# converted to NVFP4, W4A16 and W4A4, then whether the outputs' y tensors are bit-identical: a
# kernel change meant to keep every floating-point operation and its order shows here.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/device-env.sh
OLD=$PWD/${NVFP4_OLD_BIN:?NVFP4_OLD_BIN: the earlier build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
for f in deepseek_v3 qwen2_moe mixtral qwen3_moe; do
    d=tests/data/moe/$f
    scope=()
    [ $f = mixtral ] && scope=(--include '*.block_sparse_moe.experts.*')
    rm -rf "$tmp/nv"
    "$BIN" convert "$d" "$tmp/nv" "${scope[@]}" --quiet >/dev/null || { echo "convert $f failed"; rc=1; continue; }
    for p in w4a16 w4a4; do
        for b in new old; do
            exe=$BIN
            [ $b = old ] && exe=$OLD
            "$exe" moe "$tmp/nv" --layer 1 --input "$d/io.safetensors" --precision $p \
                --output "$tmp/$b.safetensors" --device cuda --quiet || { echo "moe $f $p $b failed"; rc=1; }
        done
        python3 - "$tmp/new.safetensors" "$tmp/old.safetensors" "$f $p" <<'PY' || rc=1
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1])["y"], load_file(sys.argv[2])["y"]
same = a.shape == b.shape and a.tobytes() == b.tobytes()
print("%s: new and old y %s (%d values)" % (sys.argv[3], "IDENTICAL" if same else "DIFFER", a.size))
sys.exit(0 if same else 1)
PY
    done
done
exit $rc
