#!/usr/bin/env bash
# synth, then an independent Python stdlib reader: config fields, index <-> shards (every tensor
# exactly once, tiling, total_size), the --json summary, BF16 statistics, and the values of two
# tensors recomputed bit for bit from the generator documented in lib/include/nvfp4/synth.h.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$NVFP4TOOL" synth "$tmp/q" --preset qwen3-moe --dtype bf16 --seed 4 --json >"$tmp/summary.json" \
    2>"$tmp/log"

"$NVFP4_PYTHON" - "$tmp/q" "$tmp/summary.json" <<'EOF'
import json, os, struct, sys

ckpt, summary_path = sys.argv[1], sys.argv[2]
def fail(msg):
    sys.exit("reader: " + msg)

cfg = json.load(open(os.path.join(ckpt, "config.json")))
want = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 320,
        "moe_intermediate_size": 192, "num_experts": 8, "num_experts_per_tok": 2,
        "num_hidden_layers": 2, "norm_topk_prob": True, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "hidden_act": "silu", "head_dim": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
for k, v in want.items():
    if cfg.get(k) != v:
        fail(f"config.json {k} = {cfg.get(k)!r}, expected {v!r}")
for k in ("vocab_size", "rms_norm_eps", "rope_theta", "intermediate_size"):
    if k not in cfg:
        fail(f"config.json lacks {k}")
for f in ("generation_config.json", "tokenizer.json", "tokenizer_config.json",
          "special_tokens_map.json"):
    json.load(open(os.path.join(ckpt, f)))
tok = json.load(open(os.path.join(ckpt, "tokenizer.json")))
if tok["model"]["type"] != "BPE" or len(tok["model"]["vocab"]) != 256 + 3:
    fail("tokenizer.json model")

index = json.load(open(os.path.join(ckpt, "model.safetensors.index.json")))
wm = index["weight_map"]
shards = sorted(set(wm.values()))
if len(shards) < 3:
    fail(f"only {len(shards)} shards")
for i, s in enumerate(shards):
    if s != f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors":
        fail(f"shard name {s}")

sizes = {"BF16": 2, "F32": 4, "F8_E4M3": 1}
tensors, seen, total = {}, set(), 0
for s in shards:
    data = open(os.path.join(ckpt, s), "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    if header.pop("__metadata__") != {"format": "pt"}:
        fail(f"{s}: metadata")
    if (8 + n) % 8:
        fail(f"{s}: data area not 8-byte aligned")
    body = data[8 + n:]
    pos = 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        b, e = t["data_offsets"]
        numel = 1
        for d in t["shape"]:
            numel *= d
        if b != pos or e - b != numel * sizes[t["dtype"]]:
            fail(f"{s}: {name} offsets {b},{e} do not tile")
        pos = e
        if name in seen:
            fail(f"{name} in two shards")
        seen.add(name)
        if wm.get(name) != s:
            fail(f"{name}: index says {wm.get(name)}, found in {s}")
        tensors[name] = (t, body[b:e])
        total += e - b
    if pos != len(body):
        fail(f"{s}: {len(body) - pos} trailing bytes")
if seen != set(wm):
    fail(f"index and shards disagree: {sorted(set(wm) ^ seen)[:5]}")
if index["metadata"]["total_size"] != total:
    fail(f"total_size {index['metadata']['total_size']} != {total}")

summary = json.load(open(summary_path))
on_disk = sorted(os.listdir(ckpt))
if sorted(f["name"] for f in summary["files"]) != on_disk:
    fail(f"--json files {summary['files']} vs {on_disk}")
for f in summary["files"]:
    if os.path.getsize(os.path.join(ckpt, f["name"])) != f["bytes"]:
        fail(f"--json size of {f['name']}")
if summary["tensors"] != len(wm) or summary["tensor_bytes"] != total or summary["shards"] != len(shards):
    fail("--json counts")

def bf16_values(name):
    t, raw = tensors[name]
    hs = struct.unpack(f"<{len(raw) // 2}H", raw)
    return hs, [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in hs]

experts = [v for n in wm if ".mlp.experts." in n for v in bf16_values(n)[1]]
mean = sum(experts) / len(experts)
std = (sum((v - mean) ** 2 for v in experts) / len(experts)) ** 0.5
if abs(mean) > 5e-4 or not 0.0195 < std < 0.0225:
    fail(f"expert weights mean {mean} std {std}, expected ~0 and ~0.02")
big = sum(abs(v) > 0.12 for v in experts) / len(experts)  # beyond the Irwin-Hall range
if not 1 / 8000 < big < 1 / 4096:
    fail(f"outlier share {big}")

# The generator, as documented: splitmix64 counter stream keyed by FNV-1a of the name.
M = (1 << 64) - 1
def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)
def key(seed, name):
    h = 0xCBF29CE484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001B3) & M
    return mix(h ^ mix(seed))
def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]
def bf16(x):
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
def expected(name, std, mean, outliers, n):
    k, scale, out = key(4, name), f32(std / 4729.65336996275), []
    for i in range(n):
        r = mix((k + (i + 1) * 0x9E3779B97F4A7C15) & M)
        f = [(r >> s) & 0x1FFF for s in (0, 13, 26, 39)]
        v = f32((sum(f) - 16382) * scale)
        if outliers and r >> 52 == 0:
            v = f32(v * (8 + f[0] % 25))
        if mean:
            v = f32(v + mean)
        out.append(bf16(v))
    return out

name = "model.layers.1.mlp.experts.6.up_proj.weight"
got = bf16_values(name)[0]
if list(got) != expected(name, 0.02, 0.0, True, len(got)):
    fail(f"{name}: values differ from the documented generator")
name = "model.layers.0.self_attn.k_norm.weight"
got = bf16_values(name)[0]
if list(got) != expected(name, 0.05, 1.0, False, len(got)):
    fail(f"{name}: values differ from the documented generator")
EOF
grep -q "synth: wrote" "$tmp/log" || { echo "no progress log on stderr"; exit 1; }
