#!/usr/bin/env bash
# synth --dtype fp8-block against --dtype bf16 of the same seed, read with Python's stdlib:
# quantization_config, weight_scale_inv shapes [ceil(out/128), ceil(in/128)] for every FP8
# weight, scale = blockamax / 448 in binary32, and dequantized values within E4M3 precision.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$NVFP4TOOL" synth "$tmp/b" --preset deepseek-v3 --dtype bf16 --seed 21 --quiet
"$NVFP4TOOL" synth "$tmp/f" --preset deepseek-v3 --dtype fp8-block --seed 21 --quiet \
    --max-shard-size 2MB

"$NVFP4_PYTHON" - "$tmp/b" "$tmp/f" <<'EOF'
import json, math, os, struct, sys

def fail(msg):
    sys.exit("fp8: " + msg)

def load(d):
    wm = json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"]
    out = {}
    for s in sorted(set(wm.values())):
        data = open(os.path.join(d, s), "rb").read()
        (n,) = struct.unpack("<Q", data[:8])
        h = json.loads(data[8:8 + n])
        h.pop("__metadata__", None)
        for name, t in h.items():
            b, e = t["data_offsets"]
            out[name] = (t["dtype"], t["shape"], data[8 + n + b:8 + n + e])
    return out

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]

def e4m3(b):  # OCP E4M3 "fn" decode
    s, e, m = -1.0 if b & 0x80 else 1.0, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return math.nan
    return s * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))

cfg = json.load(open(os.path.join(sys.argv[2], "config.json")))
q = cfg.get("quantization_config")
if q != {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
         "weight_block_size": [128, 128]}:
    fail(f"quantization_config {q}")
if cfg["model_type"] != "deepseek_v3" or cfg["n_routed_experts"] != 8 or cfg["scoring_func"] != "sigmoid":
    fail("config fields")

b, f = load(sys.argv[1]), load(sys.argv[2])
fp8 = [n for n, t in f.items() if t[0] == "F8_E4M3"]
if len(fp8) < 50:
    fail(f"only {len(fp8)} FP8 tensors")
for n in fp8:
    dt, (r, c), _ = f[n]
    sdt, sshape, _ = f[n + "_scale_inv"]
    if sdt != "F32" or sshape != [-(-r // 128), -(-c // 128)]:
        fail(f"{n}_scale_inv {sdt} {sshape} for [{r}, {c}]")
    if not (n.endswith("_proj.weight") or n.endswith("_mqa.weight")):
        fail(f"unexpected FP8 tensor {n}")
for n in ("model.layers.2.mlp.gate.weight", "model.embed_tokens.weight", "lm_head.weight"):
    if f[n][0] != "BF16" or f[n][2] != b[n][2]:
        fail(f"{n} must stay BF16 and equal")
if f["model.layers.1.mlp.gate.e_score_correction_bias"][0] != "F32":
    fail("e_score_correction_bias dtype")

for n in ("model.layers.1.self_attn.kv_a_proj_with_mqa.weight",
          "model.layers.1.mlp.experts.2.down_proj.weight"):
    _, (R, C), raw = b[n]
    w = [struct.unpack("<f", struct.pack("<I", h << 16))[0]
         for h in struct.unpack(f"<{R * C}H", raw)]
    qb = f[n][2]
    sraw = f[n + "_scale_inv"][2]
    cb = -(-C // 128)
    scales = struct.unpack(f"<{len(sraw) // 4}f", sraw)
    for i in range(-(-R // 128)):
        for j in range(cb):
            idx = [(r, c) for r in range(i * 128, min(R, i * 128 + 128))
                   for c in range(j * 128, min(C, j * 128 + 128))]
            amax = max(abs(w[r * C + c]) for r, c in idx)
            s = scales[i * cb + j]
            if s != f32(amax / 448):
                fail(f"{n} block ({i},{j}) scale {s!r} != amax/448 {f32(amax / 448)!r}")
            for r, c in idx:
                v, d = w[r * C + c], e4m3(qb[r * C + c]) * s
                if abs(d - v) > max(abs(v) / 16, s * 2.0 ** -10):
                    fail(f"{n}[{r},{c}] = {v}, dequantized {d}")
EOF
