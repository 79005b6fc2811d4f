#!/usr/bin/env bash
# synth --dtype nvfp4 and nvfp4-ct, checked with a reader written here (standard library only):
# inspect says nvfp4-modelopt / nvfp4-compressed-tensors; two runs write the same bytes; no
# temporary directory is left; every expert's gate and up share weight_scale_2; the values,
# dequantized here (E2M1 table x E4M3 scale x weight_scale_2), are within rel-L2 0.15 of the bf16
# synth of the same seed, per weight; nvfp4-ct holds the same packed bytes and block scales under
# compressed-tensors names, with 1/weight_global_scale == weight_scale_2 in binary32.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "nvfp4: $*" >&2; exit 1; }
T=$NVFP4TOOL
opts=(--preset qwen3-moe --seed 9 --layers 2 --experts 4 --hidden 128 --moe-intermediate 64 --quiet)
"$T" synth "$tmp/b" --dtype bf16 "${opts[@]}"
"$T" synth "$tmp/n" --dtype nvfp4 "${opts[@]}"
"$T" synth "$tmp/n2" --dtype nvfp4 "${opts[@]}" --threads 1
"$T" synth "$tmp/c" --dtype nvfp4-ct "${opts[@]}"
for f in "$tmp"/n/*; do
    cmp -s "$f" "$tmp/n2/$(basename "$f")" || fail "$(basename "$f") differs between two runs"
done
ls -a "$tmp" | grep -q 'synth-bf16' && fail "a temporary bf16 directory was left behind"
"$T" inspect "$tmp/n" >"$tmp/in.txt"
"$T" inspect "$tmp/c" >"$tmp/ic.txt"
grep -q '^Format: nvfp4-modelopt ' "$tmp/in.txt" || fail "inspect: not nvfp4-modelopt"
grep -q '^Format: nvfp4-compressed-tensors ' "$tmp/ic.txt" ||
    fail "inspect: not nvfp4-compressed-tensors"
[ -f "$tmp/n/hf_quant_config.json" ] && [ -f "$tmp/n/nvfp4-manifest.json" ] ||
    fail "nvfp4 lacks the ModelOpt files"
[ ! -e "$tmp/c/hf_quant_config.json" ] && [ ! -e "$tmp/c/nvfp4-manifest.json" ] ||
    fail "nvfp4-ct kept ModelOpt files"
"$NVFP4_PYTHON" - "$tmp/b" "$tmp/n" "$tmp/c" <<'PY'
import json, math, os, re, struct, sys

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e4m3(b):
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    assert not (e == 15 and m == 7), 'NaN scale'
    v = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if s else v


def f32(raw):
    return struct.unpack('<f', raw)[0]


def load(d):
    idx = json.load(open(os.path.join(d, 'model.safetensors.index.json')))
    out = {}
    for shard in sorted(set(idx['weight_map'].values())):
        data = open(os.path.join(d, shard), 'rb').read()
        n = struct.unpack('<Q', data[:8])[0]
        for k, t in json.loads(data[8:8 + n]).items():
            if k != '__metadata__':
                b, e = t['data_offsets']
                out[k] = (t['dtype'], t['shape'], data[8 + n + b:8 + n + e])
    assert sorted(out) == sorted(idx['weight_map']), 'index and shards disagree'
    return out


b, n, c = (load(d) for d in sys.argv[1:4])
cfg_n = json.load(open(os.path.join(sys.argv[2], 'config.json')))['quantization_config']
assert cfg_n['quant_method'] == 'modelopt' and cfg_n['quant_algo'] == 'NVFP4', cfg_n
cfg_c = json.load(open(os.path.join(sys.argv[3], 'config.json')))['quantization_config']
assert cfg_c['quant_method'] == 'compressed-tensors', cfg_c
assert cfg_c['format'] == 'nvfp4-pack-quantized', cfg_c
w = cfg_c['config_groups']['group_0']['weights']
assert (w['num_bits'], w['type'], w['group_size']) == (4, 'float', 16), w

weights = sorted(k for k in n if re.search(r'\.experts\.\d+\.(gate|up|down)_proj\.weight$', k))
assert len(weights) == 2 * 4 * 3, len(weights)
worst = 0.0
for k in weights:
    m = k[:-len('.weight')]
    dt, (rows, half), packed = n[k]
    assert dt == 'U8', (k, dt)
    cols = 2 * half
    sdt, sshape, scales = n[m + '.weight_scale']
    assert sdt == 'F8_E4M3' and sshape == [rows, cols // 16], (m, sdt, sshape)
    ws2 = f32(n[m + '.weight_scale_2'][2])
    assert f32(n[m + '.input_scale'][2]) == 1.0
    bdt, bshape, braw = b[k]
    assert bdt == 'BF16' and bshape == [rows, cols], (k, bdt, bshape)
    num = den = 0.0
    for i in range(rows * cols):
        code = (packed[i // 2] >> (4 * (i % 2))) & 15
        v = E2M1[code & 7] * e4m3(scales[(i // cols) * (cols // 16) + (i % cols) // 16]) * ws2
        v = -v if code & 8 else v
        ref = struct.unpack('<f', b'\0\0' + braw[2 * i:2 * i + 2])[0]
        num += (v - ref) ** 2
        den += ref * ref
    rel = math.sqrt(num / den)
    worst = max(worst, rel)
    assert rel < 0.15, '%s: rel-L2 %.4f' % (k, rel)
    # compressed-tensors: same bytes, reciprocal global scale
    assert c[m + '.weight_packed'] == n[k], m
    assert c[m + '.weight_scale'] == n[m + '.weight_scale'], m
    gdt, gshape, graw = c[m + '.weight_global_scale']
    assert gdt == 'F32' and gshape == [1], (m, gdt, gshape)
    inv = struct.unpack('<f', struct.pack('<f', 1.0 / f32(graw)))[0]  # binary32 RN(1/gs)
    assert inv == ws2, (m, f32(graw), ws2)
    assert f32(c[m + '.input_global_scale'][2]) == 1.0
    assert k not in c and m + '.weight_scale_2' not in c, m
for k in weights:
    if '.gate_proj.' in k:
        up = k.replace('.gate_proj.', '.up_proj.')
        assert n[k[:-7] + '.weight_scale_2'] == n[up[:-7] + '.weight_scale_2'], k
print('nvfp4: %d weights, worst rel-L2 %.4f' % (len(weights), worst))
PY
echo "synth nvfp4 / nvfp4-ct: ok"
