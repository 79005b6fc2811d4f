#!/usr/bin/env bash
# inspect's text output on the transformers DeepSeek-V3 FP8 fixture: the lines a reader looks
# for, with numbers worked out by hand from tests/data/hf/README.md (H=128, I=128, 4 routed
# experts + 1 shared, dense layer 0; 12 expert weights of 128x128 FP8 = 16384 bytes each, NVFP4
# 8192 packed + 1024 scales + 8 scalar bytes each).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ckpt="$NVFP4_TESTDATA/hf/deepseekv3-fp8"
"$NVFP4TOOL" inspect "$ckpt" >"$tmp/out.txt"
"$NVFP4TOOL" inspect "$ckpt" --summary >"$tmp/summary.txt"
fail=0
want() { # want FILE FIXED-STRING
    grep -qF -- "$2" "$1" || { echo "missing in $(basename "$1"): $2"; fail=1; }
}
want_re() { # want_re FILE ERE
    grep -qE -- "$2" "$1" || { echo "no line of $(basename "$1") matches: $2"; fail=1; }
}
for f in "$tmp/out.txt" "$tmp/summary.txt"; do
    want "$f" "Checkpoint: $ckpt"
    want "$f" "Format: fp8-block (from config.json; quant_method fp8, blocks 128x128)"
    want "$f" "Files: 3 (index model.safetensors.index.json)"
    want_re "$f" "^  model-00001-of-00003\.safetensors  [0-9]+ bytes  [0-9]+ tensors$"
    want "$f" "MoE: 1 MoE layer, 1 dense layer"
    want "$f" "router: deepseek_v3, top-k 2, norm_topk_prob true, routed_scaling_factor 2.5, n_group 2, topk_group 1"
    want "$f" "experts: 4 per layer (config n_routed_experts 4), present 4, missing 0, shared experts yes"
    want "$f" "hidden 128, intermediate 128, per-expert tensors, hidden_act silu, first_k_dense_replace 1"
    want_re "$f" "^  model\.layers\.0 +dense +- +- +128 +256 +- "
    want_re "$f" "^  model\.layers\.1 +moe +4 +4 +128 +128 +per-expert +yes +yes +yes +-$"
    want "$f" "Plan: include *.mlp.experts.*; exclude (none)"
    want "$f" "quantize: 12 tensors, 196608 bytes -> 110688 bytes NVFP4"
    want "$f" "drop: 12 source scales"
    want "$f" "skip: 0 tensors in scope that cannot be quantized"
done
want_re "$tmp/out.txt" "^  model\.layers\.1\.mlp\.experts\.2\.up_proj\.weight +F8_E4M3 +\[128, 128\] +16384 +model-0000[123]-of-00003\.safetensors +expert_weight +quantize$"
want_re "$tmp/out.txt" "^  model\.layers\.1\.mlp\.experts\.2\.up_proj\.weight_scale_inv +F32 +\[\] +4 +model-0000[123]-of-00003\.safetensors +scale +drop$"
want_re "$tmp/out.txt" "^  model\.layers\.1\.mlp\.gate\.e_score_correction_bias +F32 +\[4\] +16 .* router_bias +keep$"
if grep -qE '^  NAME ' "$tmp/summary.txt"; then
    echo "--summary still prints the tensor table"; fail=1
fi
# A scope with a skip: the norms are 1-D, the embedding is not a linear. The full output lists
# each skipped tensor; --summary counts them per reason: 8 norms (input_layernorm,
# post_attention_layernorm, q_a_layernorm, kv_a_layernorm in each of 2 layers), 1 embedding.
"$NVFP4TOOL" inspect "$ckpt" --include '*layernorm*' --include '*embed*' >"$tmp/skip.txt"
"$NVFP4TOOL" inspect "$ckpt" --summary --include '*layernorm*' --include '*embed*' >"$tmp/skips.txt"
for f in "$tmp/skip.txt" "$tmp/skips.txt"; do
    want "$f" "Plan: include *layernorm*, *embed*; exclude (none)"
    want "$f" "quantize: 0 tensors, 0 bytes -> 0 bytes NVFP4"
    want "$f" "skip: 9 tensors in scope that cannot be quantized"
done
want "$tmp/skip.txt" "    model.embed_tokens.weight: embedding table, not a linear layer"
want "$tmp/skip.txt" "    model.layers.1.self_attn.kv_a_layernorm.weight: 1-D tensor, not a 2-D linear weight"
want "$tmp/skips.txt" "    8 tensors: 1-D tensor, not a 2-D linear weight"
want "$tmp/skips.txt" "    1 tensor: embedding table, not a linear layer"
if grep -qF "kv_a_layernorm.weight:" "$tmp/skips.txt"; then
    echo "--summary still lists skipped tensors one per line"; fail=1
fi
[ $fail -eq 0 ] && echo "inspect text output: ok"
exit $fail
