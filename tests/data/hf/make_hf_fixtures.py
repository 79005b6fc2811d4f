#!/usr/bin/env python3
"""Write small checkpoints with Hugging Face transformers, to test that nvfp4tool reads what
another tool writes. Runs on the device machine (it has torch + transformers and a GPU, which
transformers' FineGrainedFP8 quantizer needs). Usage: make_hf_fixtures.py OUTDIR

Writes OUTDIR/<name>/ for:
  qwen3moe-bf16          Qwen3-MoE, BF16, sharded (index + several shards)
  qwen3moe-fp8           the same model quantized by FineGrainedFP8Config (128x128 blocks)
  deepseekv3-bf16        DeepSeek-V3 with a dense first layer, router bias, shared expert
  deepseekv3-fp8         the same, FineGrainedFP8
and OUTDIR/PROVENANCE.json with the library versions and each directory's tensor list.
"""
import json
import os
import sys
import traceback

import torch
import transformers
from transformers import AutoModelForCausalLM

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
prov = {"torch": torch.__version__, "transformers": transformers.__version__, "dirs": {}}
try:
    import safetensors
    prov["safetensors"] = safetensors.__version__
except Exception:  # noqa: BLE001
    pass


def listing(d):
    from safetensors import safe_open
    rows = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), "pt") as h:
                for k in h.keys():
                    t = h.get_slice(k)
                    rows[k] = {"file": f, "dtype": str(t.get_dtype()), "shape": list(t.get_shape())}
    return rows


def qwen3_config():
    from transformers import Qwen3MoeConfig
    return Qwen3MoeConfig(vocab_size=512, hidden_size=128, intermediate_size=256,
                          moe_intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                          num_key_value_heads=1, head_dim=64, num_experts=4,
                          num_experts_per_tok=2, norm_topk_prob=True, max_position_embeddings=512,
                          tie_word_embeddings=False)


def deepseek_config():
    from transformers import DeepseekV3Config
    return DeepseekV3Config(vocab_size=512, hidden_size=128, intermediate_size=256,
                            moe_intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=2, n_shared_experts=1,
                            n_routed_experts=4, num_experts_per_tok=2, n_group=2, topk_group=1,
                            first_k_dense_replace=1, kv_lora_rank=64, q_lora_rank=64,
                            qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=32,
                            routed_scaling_factor=2.5, max_position_embeddings=512,
                            tie_word_embeddings=False)


def make(name, cfg_fn):
    torch.manual_seed(0)
    cfg = cfg_fn()
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    bf16_dir = os.path.join(OUT, f"{name}-bf16")
    model.save_pretrained(bf16_dir, max_shard_size="300KB")
    prov["dirs"][f"{name}-bf16"] = listing(bf16_dir)
    print(f"wrote {bf16_dir}", flush=True)
    from transformers import FineGrainedFP8Config
    fp8_dir = os.path.join(OUT, f"{name}-fp8")
    q = AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16, device_map="cuda:0",
                                             quantization_config=FineGrainedFP8Config())
    q.save_pretrained(fp8_dir, max_shard_size="300KB")
    prov["dirs"][f"{name}-fp8"] = listing(fp8_dir)
    print(f"wrote {fp8_dir}", flush=True)


for name, fn in (("qwen3moe", qwen3_config), ("deepseekv3", deepseek_config)):
    try:
        make(name, fn)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        prov.setdefault("errors", {})[name] = traceback.format_exc()

with open(os.path.join(OUT, "PROVENANCE.json"), "w") as f:
    json.dump(prov, f, indent=1, sort_keys=True)
for d, rows in prov["dirs"].items():
    print(d)
    for k, v in rows.items():
        print("  ", k, v["dtype"], v["shape"], v["file"])
