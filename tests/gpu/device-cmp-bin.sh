#!/usr/bin/env bash
# Runs on the device machine: `moe --device cuda` of two nvfp4tool builds (NVFP4_BIN, the one
# under test, and NVFP4_OLD_BIN, an earlier one) on the transformers-written test checkpoints
# converted to NVFP4, W4A16 and W4A4, then whether the outputs' y tensors are bit-identical: a
# kernel change meant to keep every floating-point operation and its order shows here.
#   NVFP4_OLD_ENV="VAR=VALUE ...": the environment of the old run (e.g. NVFP4_MOE_GEMM=v13);
#   without NVFP4_OLD_BIN the old run is NVFP4_BIN's too. NVFP4_CMP_TOKENS=T: T random tokens
#   (normal, seed 7) instead of the checkpoints' io.safetensors, so that experts get hundreds of
#   rows (the tall tiles of the wgmma kernel).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/device-env.sh
[ -n "${NVFP4_OLD_BIN:-}${NVFP4_OLD_ENV:-}" ] || { echo "NVFP4_OLD_BIN or NVFP4_OLD_ENV: what to compare with"; exit 2; }
OLD=$BIN
[ -n "${NVFP4_OLD_BIN:-}" ] && OLD=$PWD/$NVFP4_OLD_BIN
read -r -a old_env <<<"${NVFP4_OLD_ENV:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
for f in deepseek_v3 qwen2_moe mixtral qwen3_moe; do
    d=tests/data/moe/$f
    scope=()
    [ $f = mixtral ] && scope=(--include '*.block_sparse_moe.experts.*')
    rm -rf "$tmp/nv"
    "$BIN" convert "$d" "$tmp/nv" "${scope[@]}" --quiet >/dev/null || { echo "convert $f failed"; rc=1; continue; }
    x=$d/io.safetensors
    if [ -n "${NVFP4_CMP_TOKENS:-}" ]; then
        x=$tmp/x.safetensors
        python3 - "$d/config.json" "$x" "$NVFP4_CMP_TOKENS" <<'PY' || { echo "input $f failed"; rc=1; continue; }
import json, sys
import numpy as np
from safetensors.numpy import save_file
h = json.load(open(sys.argv[1]))["hidden_size"]
x = np.random.default_rng(7).standard_normal((int(sys.argv[3]), h)).astype(np.float32)
save_file({"x": x}, sys.argv[2])
PY
    fi
    for p in w4a16 w4a4; do
        for b in new old; do
            run=("$BIN")
            [ $b = old ] && run=(env "${old_env[@]}" "$OLD")
            "${run[@]}" moe "$tmp/nv" --layer 1 --input "$x" --precision $p \
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
