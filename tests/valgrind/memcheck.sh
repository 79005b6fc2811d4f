#!/usr/bin/env bash
# Valgrind memcheck over the CPU paths of the CLI (issue 14): a representative set of commands on
# tiny inputs, each under
#   valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
# so that an invalid read or write, a use of uninitialised memory, a bad free or a definite leak
# fails it; each must also give its own exit code (0, or the documented one on the error paths).
# ctest's valgrind/memcheck, registered in builds without sanitizers only (ASan and valgrind do
# not mix). Every command runs with --device cpu where it takes one, so that no CUDA call is made
# even in a build that links the CUDA runtime (no suppression file is needed). Skipped (77)
# without valgrind.
set -euo pipefail
command -v valgrind >/dev/null || { echo "valgrind not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$NVFP4_SOURCE_DIR/tests/cli/lib.sh"
n=0
vg() { # vg WANT_EXIT ARGS...: the tool under valgrind
    local want=$1 rc=0 t0
    shift
    t0=$(date +%s%N)
    valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite --num-callers=30 --log-file="$tmp/vg.log" \
        "$NVFP4TOOL" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" -ne "$want" ]; then
        cat "$tmp/vg.log" >&2
        fail "'$*' exited $rc under valgrind, expected $want (99: memcheck errors): $(head -c 1000 "$tmp/err")"
    fi
    [ ! -s "$tmp/vg.log" ] || { cat "$tmp/vg.log" >&2; fail "'$*': valgrind reported"; }
    n=$((n + 1))
    echo "ok ($((($(date +%s%N) - t0) / 1000000)) ms): $*"
}
small=(--preset qwen3-moe --hidden 64 --experts 4 --moe-intermediate 64 --quiet)
vg 0 synth "$tmp/bf16" --dtype bf16 "${small[@]}"
vg 0 synth "$tmp/fp8" --dtype fp8-block "${small[@]}"
vg 0 synth "$tmp/nvfp4" --dtype nvfp4 "${small[@]}"
vg 0 inspect "$tmp/fp8"
vg 0 inspect "$tmp/nvfp4" --json
shard=$(find "$tmp/bf16" -name 'model-*.safetensors' | head -n 1)
vg 0 quantize "$shard" "$tmp/q.safetensors" --device cpu --threads 2 --quiet
vg 0 convert "$tmp/fp8" "$tmp/mo" --device cpu --threads 2 --quiet
vg 0 convert "$tmp/bf16" "$tmp/prep" --target prepared-w4a16 --ep 2 --device cpu --threads 2 \
    --quiet
vg 0 hash "$tmp/bf16" --quiet
vg 0 hash "$tmp/bf16" --check --tensors --quiet
# moe: one layer of the BF16 source on 4 tokens of F32 activations (H = 64).
"$NVFP4_PYTHON" - "$tmp/x.safetensors" <<'PY'
import json, struct, sys
t, h = 4, 64
hdr = json.dumps({"x": {"dtype": "F32", "shape": [t, h], "data_offsets": [0, 4 * t * h]}}).encode()
data = b"".join(struct.pack("<f", ((i * 37) % 17 - 8) / 8.0) for i in range(t * h))
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hdr)) + hdr + data)
PY
vg 0 moe "$tmp/bf16" --layer 1 --input "$tmp/x.safetensors" --output "$tmp/y.safetensors" \
    --device cpu --threads 2 --quiet
vg 0 verify "$tmp/mo" --reference "$tmp/fp8" --tokens 8 --device cpu --threads 2 --quiet
# Error paths: a malformed safetensors file (exit 3), a recipe over the alias bound (exit 2).
vg 3 inspect "$NVFP4_SOURCE_DIR/tests/fuzz/corpus/safetensors/offsets_overlap"
vg 3 quantize "$NVFP4_SOURCE_DIR/tests/fuzz/corpus/safetensors/header_past_eof" "$tmp/bad.out" \
    --device cpu --quiet
printf 'a: &a [x]\nb: [%s]\n' "$(printf '*a, %.0s' $(seq 1 300))" >"$tmp/aliases.yaml"
vg 2 quantize --print-recipe --recipe "$tmp/aliases.yaml"
echo "valgrind memcheck: $n commands clean"
