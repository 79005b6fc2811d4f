#!/usr/bin/env python3
"""Reference MoE-block outputs from transformers' own forward, for tests/data/moe/.

Run once on a machine with PyTorch, transformers and safetensors (the device machine):
    python3 tests/gpu/make_moe_reference.py OUTDIR
For each model family it builds a tiny model from its real config class (seeded random weights,
BF16), saves it with save_pretrained (config.json + model.safetensors), draws seeded activations
x [T, H] (BF16) and runs the MoE block of one layer (`model.model.layers[L].mlp`) in BF16 on the
CPU. OUTDIR/<family>/ then holds the checkpoint and io.safetensors with `x` (BF16 [T, H]) and `y`
(F32 [T, H], transformers' BF16 output widened), metadata {"layer": L, "tokens": T, versions}.
The tests compare nvfp4tool's CPU reference (`nvfp4tool moe`) with `y`.
"""
import json
import os
import sys
import traceback

import torch
import transformers
from safetensors.torch import save_file

T = 16
OUT = sys.argv[1] if len(sys.argv) > 1 else "moe-reference"


def build(name, cfg_cls_name, model_cls_name, kw, layer, bias_attr=None):
    cfg_cls = getattr(transformers, cfg_cls_name)
    model_cls = getattr(transformers, model_cls_name)
    cfg = cfg_cls(**kw)
    torch.manual_seed(1234)
    model = model_cls(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():
        g = torch.Generator().manual_seed(99)
        for n, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_((torch.randn(p.shape, generator=g) * 0.08).to(p.dtype))
        mlp = model.model.layers[layer].mlp
        if bias_attr:
            # DeepSeek's e_score_correction_bias is a buffer (zeros at init): make it matter
            gate = mlp.gate
            b = getattr(gate, bias_attr)
            b.copy_((torch.randn(b.shape, generator=g) * 0.5).to(b.dtype))
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    gx = torch.Generator().manual_seed(7)
    x = torch.randn((T, cfg.hidden_size), generator=gx).to(torch.bfloat16)
    with torch.no_grad():
        y = mlp(x.unsqueeze(0))
    if isinstance(y, tuple):
        y = y[0]
    y = y.reshape(T, cfg.hidden_size).float().contiguous()
    meta = {
        "layer": str(layer),
        "tokens": str(T),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "block": type(mlp).__name__,
    }
    save_file({"x": x.contiguous(), "y": y}, os.path.join(d, "io.safetensors"), metadata=meta)
    print(name, "ok", type(mlp).__name__, "y rms", float(y.pow(2).mean().sqrt()))
    with open(os.path.join(d, "state_names.txt"), "w") as f:
        for k, v in model.state_dict().items():
            f.write(f"{k} {tuple(v.shape)} {v.dtype}\n")


COMMON = dict(vocab_size=64, num_hidden_layers=2, max_position_embeddings=128,
              tie_word_embeddings=False)

MODELS = [
    ("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
     dict(COMMON, hidden_size=64, intermediate_size=128, moe_intermediate_size=64,
          num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, num_attention_heads=2,
          num_key_value_heads=1, head_dim=32, decoder_sparse_step=1, mlp_only_layers=[]),
     1, None),
    ("deepseek_v3", "DeepseekV3Config", "DeepseekV3ForCausalLM",
     dict(COMMON, hidden_size=64, intermediate_size=128, moe_intermediate_size=64,
          n_routed_experts=16, n_shared_experts=1, num_experts_per_tok=4, n_group=4,
          topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True,
          first_k_dense_replace=1, num_attention_heads=2, num_key_value_heads=2,
          q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
          v_head_dim=16),
     1, "e_score_correction_bias"),
    ("mixtral", "MixtralConfig", "MixtralForCausalLM",
     dict(COMMON, hidden_size=64, intermediate_size=64, num_local_experts=8,
          num_experts_per_tok=2, num_attention_heads=2, num_key_value_heads=1, head_dim=32),
     1, None),
    ("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
     dict(COMMON, hidden_size=64, intermediate_size=128, moe_intermediate_size=64,
          shared_expert_intermediate_size=128, num_experts=8, num_experts_per_tok=2,
          norm_topk_prob=False, num_attention_heads=2, num_key_value_heads=1,
          decoder_sparse_step=1, mlp_only_layers=[]),
     1, None),
]

failed = 0
for name, c, m, kw, layer, bias in MODELS:
    try:
        build(name, c, m, kw, layer, bias)
    except Exception:  # keep the other families
        failed += 1
        print(name, "FAILED")
        traceback.print_exc()
sys.exit(1 if failed == len(MODELS) else 0)
