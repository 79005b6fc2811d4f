#!/usr/bin/env bash
# Usage errors, device errors and non-finite sources get the pinned exit codes and messages
# that name the tensor (and index).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" "$here/ref_quant.py" make "$tmp/in.safetensors"
expect() { # expect CODE PATTERN -- command...
    local code=$1 pat=$2
    shift 3
    set +e
    "$@" >"$tmp/stdout" 2>"$tmp/stderr"
    local rc=$?
    set -e
    if [ "$rc" != "$code" ] || ! grep -q -- "$pat" "$tmp/stderr"; then
        echo "expected exit $code and '$pat' from: $*" >&2
        echo "got exit $rc, stderr:" >&2
        cat "$tmp/stderr" >&2
        exit 1
    fi
}
# --help prints on stdout only and exits 0.
"$NVFP4TOOL" quantize --help >"$tmp/help" 2>"$tmp/help.err"
grep -q -- "--e4m3-max" "$tmp/help" && [ ! -s "$tmp/help.err" ] || { echo "quantize --help" >&2; exit 1; }
q() { "$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/out.safetensors" "$@"; }
expect 2 "no such tensor" -- q --tensor missing.weight
expect 2 "'model.norm.weight' cannot be quantized" -- q --tensor model.norm.weight
expect 2 "multiple of 16" -- q --tensor model.embed_tokens.weight
expect 2 "bad value 'fast'" -- q --method fast
expect 2 "expected IN and OUT" -- "$NVFP4TOOL" quantize "$tmp/in.safetensors"
# Without a usable GPU (CI, this build without CUDA) --device cuda is exit 4; on a GPU machine
# the GPU tests cover it.
if ! nvidia-smi -L >/dev/null 2>&1; then
    expect 4 "cuda" -- q --device cuda
fi
expect 1 "cannot open\|No such file" -- "$NVFP4TOOL" quantize "$tmp/none.safetensors" "$tmp/o.safetensors"
[ ! -e "$tmp/out.safetensors" ] || { echo "a failed run left an output file" >&2; exit 1; }
# --tensor: only the named tensor is quantized.
"$NVFP4TOOL" quantize "$tmp/in.safetensors" "$tmp/one.safetensors" --json --quiet \
    --tensor model.layers.0.self_attn.o_proj.weight >"$tmp/one.json"
"$NVFP4_PYTHON" - "$tmp/one.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["tensors_quantized"] == 1 and s["tensors_kept"] == 8, s
assert [t["name"] for t in s["tensors"] if t["action"] == "quantized"] == \
    ["model.layers.0.self_attn.o_proj.weight"]
PY
# A NaN in a source tensor: exit 3 naming tensor and [row, col]; --allow-nonfinite passes it.
"$NVFP4_PYTHON" - "$tmp/nan.safetensors" <<'PY'
import json, struct, sys
vals = [0.5] * 64
vals[16 + 5] = float("nan")
hdr = json.dumps({"w.weight": {"dtype": "F32", "shape": [2, 32], "data_offsets": [0, 256]}}).encode()
hdr += b" " * ((8 - len(hdr) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hdr)) + hdr + struct.pack("<64f", *vals))
PY
expect 3 "tensor 'w.weight': non-finite value nan at index \[0, 21\]" -- \
    "$NVFP4TOOL" quantize "$tmp/nan.safetensors" "$tmp/o.safetensors"
"$NVFP4TOOL" quantize "$tmp/nan.safetensors" "$tmp/o.safetensors" --allow-nonfinite --quiet >/dev/null
# bench: moe times GPU kernels (on the CPU a usage error, exit 2: tests/cli/bench/moe_usage.sh);
# quant reports every variant and pass.
expect 2 "give --device cuda" -- "$NVFP4TOOL" bench moe
"$NVFP4TOOL" bench quant --device cpu --size-mb 1 --runs 1 --json --quiet >"$tmp/bench.json"
"$NVFP4_PYTHON" - "$tmp/bench.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
assert b["device"] == "cpu" and b["dtype"] == "BF16", b
assert len(b["results"]) == 12, b
assert sorted({r["method"] for r in b["results"]}) == [
    "4over6 mae original", "4over6 mae scaled", "4over6 mse original", "4over6 mse scaled",
    "rtn", "rtn modelopt"], b
assert all(r["gb_per_s"] > 0 for r in b["results"]), b
PY
echo ok
