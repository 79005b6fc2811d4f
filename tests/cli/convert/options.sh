#!/usr/bin/env bash
# --keep-source-precision (FP8 kept, MIXED_PRECISION with quantized_layers), --include/--exclude
# scopes (dense MLPs too, router excluded), --input-amax (input_scale = amax / (6 * 448), one
# value for gate and up), FP16/F32 sources and an FP8 per-tensor source.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$NVFP4_TESTDATA/hf/deepseekv3-fp8
"$NVFP4TOOL" convert "$src" "$tmp/a" --quiet --keep-source-precision --include '*.mlp.*' \
    --exclude '*.mlp.gate.weight' --method rtn >/dev/null
"$NVFP4_PYTHON" "$here/check_convert.py" "$src" "$tmp/a" --method rtn --emax 448 \
    --keep-source-precision --include '*.mlp.*' --exclude '*.mlp.gate.weight' >/dev/null
grep -q '"FP8_PB_WO"' "$tmp/a/hf_quant_config.json" || { echo "no FP8 layers listed" >&2; exit 1; }

cat >"$tmp/amax.json" <<'JSON'
{"model.layers.1.mlp.experts.0.gate_proj": 3.5, "model.layers.1.mlp.experts.0.up_proj": 5.25,
 "model.layers.1.mlp.experts.2.down_proj": 0.75}
JSON
"$NVFP4TOOL" convert "$src" "$tmp/b" --quiet --input-amax "$tmp/amax.json" >/dev/null
"$NVFP4_PYTHON" "$here/check_convert.py" "$src" "$tmp/b" --input-amax "$tmp/amax.json" >/dev/null
# Hand-worked: 5.25 / 2688 = 0.001953125 exactly (2^-9), shared by gate and up.
"$NVFP4_PYTHON" - "$tmp/b" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, 'model.safetensors.index.json')))['weight_map']
def scalar(name):
    raw = open(os.path.join(d, idx[name]), 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    b, e = json.loads(raw[8:8 + n])[name]['data_offsets']
    return struct.unpack('<f', raw[8 + n + b:8 + n + e])[0]
p = 'model.layers.1.mlp.experts.0.'
assert scalar(p + 'gate_proj.input_scale') == 2.0 ** -9, scalar(p + 'gate_proj.input_scale')
assert scalar(p + 'up_proj.input_scale') == 2.0 ** -9
assert scalar(p + 'gate_proj.weight_scale_2') == scalar(p + 'up_proj.weight_scale_2')
assert scalar('model.layers.1.mlp.experts.1.down_proj.input_scale') == 1.0
PY

# FP16 and F32 experts, and an FP8 per-tensor expert (weight F8_E4M3 + scalar weight_scale).
mkdir -p "$tmp/c"
"$NVFP4_PYTHON" - "$tmp/c" "$here/../quantize" <<'PY'
import json, random, struct, sys
sys.path.insert(0, sys.argv[2])
import ref_quant as rq
d = sys.argv[1]
rng = random.Random(7)
vals = lambda n, s: [rng.gauss(0, s) for _ in range(n)]
fp8 = bytes(rq.e4m3_encode(v) for v in vals(32 * 64, 40.0))
t = {
    'model.layers.0.mlp.experts.0.gate_proj.weight': ('F16', [32, 64], struct.pack('<2048e', *vals(2048, 0.02))),
    'model.layers.0.mlp.experts.0.up_proj.weight': ('F32', [32, 64], struct.pack('<2048f', *vals(2048, 0.03))),
    'model.layers.0.mlp.experts.0.down_proj.weight': ('F32', [64, 32], struct.pack('<2048f', *vals(2048, 0.01))),
    'model.layers.0.mlp.experts.1.gate_proj.weight': ('F8_E4M3', [32, 64], fp8),
    'model.layers.0.mlp.experts.1.gate_proj.weight_scale': ('F32', [], struct.pack('<f', 0.0007)),
    'model.layers.0.mlp.gate.weight': ('F32', [2, 64], struct.pack('<128f', *vals(128, 0.1))),
}
rq.st_write(d + '/model.safetensors', t)
json.dump({'weight_map': {k: 'model.safetensors' for k in t}, 'metadata': {'total_size': 0}},
          open(d + '/model.safetensors.index.json', 'w'))
json.dump({'model_type': 'qwen3_moe', 'num_experts': 2, 'hidden_size': 64}, open(d + '/config.json', 'w'))
PY
"$NVFP4_PYTHON" - "$tmp/c" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
raw = open(d + '/model.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
total = sum(e['data_offsets'][1] - e['data_offsets'][0] for k, e in json.loads(raw[8:8 + n]).items() if k != '__metadata__')
p = d + '/model.safetensors.index.json'
j = json.load(open(p)); j['metadata']['total_size'] = total; json.dump(j, open(p, 'w'))
PY
"$NVFP4TOOL" convert "$tmp/c" "$tmp/cd" --quiet >/dev/null
"$NVFP4_PYTHON" "$here/check_convert.py" "$tmp/c" "$tmp/cd" >/dev/null
echo ok
