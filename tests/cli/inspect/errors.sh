#!/usr/bin/env bash
# Exit codes and messages of inspect on bad input: a path that does not exist (1), usage
# errors (2), checkpoints whose index and shards disagree, a broken config.json, FP8 block
# scales of the wrong size (3). The FP8 checkpoints are written here by a Python safetensors
# writer, independent of the library's.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # expect CODE STDERR-PHRASE -- ARGS...
    local code=$1 phrase=$2 rc=0
    shift 3
    "$NVFP4TOOL" inspect "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ $rc -ne "$code" ]; then
        echo "inspect $*: exit $rc, expected $code"; cat "$tmp/err"; fail=1; return
    fi
    if ! grep -qF -- "$phrase" "$tmp/err"; then
        echo "inspect $*: stderr lacks \"$phrase\":"; cat "$tmp/err"; fail=1
    fi
}

expect 1 "nvfp4tool inspect: error: cannot open checkpoint '$tmp/nope': No such file" -- "$tmp/nope"
expect 2 "expected 1 argument, got 0" --
expect 2 "unknown option '--bogus'" -- "$tmp" --bogus
expect 2 "unexpected argument 'b'" -- a b
"$NVFP4TOOL" inspect --help >"$tmp/help"
grep -qF "Usage: nvfp4tool inspect CKPT [options]" "$tmp/help" || { echo "--help"; fail=1; }
grep -qF -- "--summary" "$tmp/help" || { echo "--help lacks --summary"; fail=1; }

# Index and shards disagree (copies of the transformers Qwen3 fixture).
src="$NVFP4_TESTDATA/hf/qwen3moe-bf16"
cp -r "$src" "$tmp/noshard"
rm "$tmp/noshard/model-00002-of-00005.safetensors"
expect 3 "model-00002-of-00005.safetensors', which does not exist" -- "$tmp/noshard"
cp -r "$src" "$tmp/extra"
"$NVFP4_PYTHON" - "$tmp/extra/model.safetensors.index.json" <<'PY'
import json, sys
p = sys.argv[1]
j = json.load(open(p))
j["weight_map"]["model.layers.9.mlp.gate.weight"] = "model-00001-of-00005.safetensors"
json.dump(j, open(p, "w"))
PY
expect 3 "maps tensor 'model.layers.9.mlp.gate.weight' to 'model-00001-of-00005.safetensors', which does not hold it" -- "$tmp/extra"
cp -r "$src" "$tmp/unlisted"
"$NVFP4_PYTHON" - "$tmp/unlisted/model.safetensors.index.json" <<'PY'
import json, sys
p = sys.argv[1]
j = json.load(open(p))
del j["weight_map"]["model.norm.weight"]
json.dump(j, open(p, "w"))
PY
expect 3 "tensor 'model.norm.weight' of shard" -- "$tmp/unlisted"
cp -r "$src" "$tmp/badcfg"
echo '["not", "an", "object"]' >"$tmp/badcfg/config.json"
expect 3 "invalid JSON file '$tmp/badcfg/config.json': not a JSON object" -- "$tmp/badcfg"
mkdir "$tmp/empty"
expect 3 "holds no .safetensors file" -- "$tmp/empty"

# FP8 block checkpoints: [192, 320] weights (2 x 3 blocks of 128, partial at the edges).
"$NVFP4_PYTHON" - "$tmp" <<'PY'
import json, os, struct, sys
root = sys.argv[1]
SIZE = {"F8_E4M3": 1, "F32": 4, "BF16": 2}

def write(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name, dtype, shape in tensors:
        n = SIZE[dtype]
        for d in shape:
            n *= d
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
        blobs.append(bytes(n))
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

cfg = {"num_experts": 1, "hidden_size": 320, "moe_intermediate_size": 192,
       "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                               "weight_block_size": [128, 128]}}
E = "model.layers.0.mlp.experts.0."
for name, up_scale in (("fp8ok", [6]), ("fp8bad", [2, 2])):
    d = os.path.join(root, name)
    os.mkdir(d)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    write(os.path.join(d, "model.safetensors"), [
        (E + "gate_proj.weight", "F8_E4M3", [192, 320]),
        (E + "gate_proj.weight_scale_inv", "F32", [2, 3]),
        (E + "up_proj.weight", "F8_E4M3", [192, 320]),
        (E + "up_proj.weight_scale_inv", "F32", up_scale),
        (E + "down_proj.weight", "F8_E4M3", [320, 192]),
        (E + "down_proj.weight_scale_inv", "F32", [3, 2]),
        ("model.layers.0.mlp.gate.weight", "BF16", [1, 320]),
    ])
PY
expect 3 "scale tensor 'model.layers.0.mlp.experts.0.up_proj.weight_scale_inv' has shape [2, 2] (4 elements) but weight 'model.layers.0.mlp.experts.0.up_proj.weight' of shape [192, 320] with 128x128 blocks needs 6" -- "$tmp/fp8bad"
"$NVFP4TOOL" inspect "$tmp/fp8ok" --json >"$tmp/fp8ok.json"
"$NVFP4_PYTHON" - "$tmp/fp8ok.json" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
got = (r["format"], r["plan"]["quantize"]["tensors"], r["plan"]["drop"]["tensors"],
       r["moe"]["summary"]["hidden"], r["moe"]["summary"]["intermediate"])
want = ("fp8-block", 3, 3, 320, 192)
if got != want:
    sys.exit(f"fp8ok: got {got}, expected {want}")
PY
[ $fail -eq 0 ] && echo "inspect errors: ok"
exit $fail
