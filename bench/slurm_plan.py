#!/usr/bin/env python3
"""The README's plan on paper for DeepSeek-V3 FP8 -> NVFP4 on 1, 4 and 16 Slurm nodes.

Sizes come from DeepSeek-V3's shapes (its config.json: hidden 7168, 61 layers of which the
first 3 dense with intermediate 18432, 256 routed experts of intermediate 2048 plus one shared
expert, MLA with q_lora_rank 1536, kv_lora_rank 512, 128 heads of 128+64 / 128, vocabulary
129280) plus the multi-token-prediction layer the checkpoint stores as layer 61; every linear
but the router is FP8 with an F32 scale per 128x128 block. The output is convert's default
recipe: routed experts in NVFP4 (E2M1 pairs in a byte, one E4M3 scale per 16 values, two F32
scalars), other FP8 linears dequantized to BF16 (--keep-source-precision: kept FP8).
Rates come from the measured runs named below; run from the repository root.
"""
import json
import math

G = 1e9
H, V, LAYERS, DENSE = 7168, 129280, 61 + 1, 3
I_DENSE, I_MOE, E = 18432, 2048, 256
Q_RANK, KV_RANK, HEADS, D_NOPE, D_ROPE, D_V = 1536, 512, 128, 128, 64, 128


def fp8(o, i):
    return o * i + 4 * math.ceil(o / 128) * math.ceil(i / 128)


def nvfp4(o, i):
    return o * i // 2 + o * i // 16 + 8


def sizes():
    attn = [(Q_RANK, H), (HEADS * (D_NOPE + D_ROPE), Q_RANK), (KV_RANK + D_ROPE, H),
            (HEADS * (D_NOPE + D_V), KV_RANK), (H, HEADS * D_V)]
    src = out = keep = 0
    for layer in range(LAYERS):
        lin = list(attn)
        bf16 = 2 * (Q_RANK + KV_RANK + 2 * H)  # the layer's norms
        if layer < DENSE:
            lin += [(I_DENSE, H), (I_DENSE, H), (H, I_DENSE)]
        else:
            for o, i in [(I_MOE, H), (I_MOE, H), (H, I_MOE)]:
                src += E * fp8(o, i)
                out += E * nvfp4(o, i)
                keep += E * nvfp4(o, i)
            lin += [(I_MOE, H), (I_MOE, H), (H, I_MOE)]  # the shared expert
            bf16 += 2 * E * H + 4 * E  # router weight (BF16) and correction bias (F32)
        for o, i in lin:
            src += fp8(o, i)
            out += 2 * o * i
            keep += fp8(o, i)
        src += bf16
        out += bf16
        keep += bf16
    # embed_tokens, lm_head, final norm; the MTP layer's own embed_tokens, shared_head (head
    # and norm), enorm, hnorm and eh_proj [7168, 14336] (taken as BF16).
    rest = 2 * (2 * V * H + H) + 2 * (2 * V * H + H + 2 * H + 2 * H * H)
    return src + rest, out + rest, keep + rest


def main():
    src, out, keep = sizes()
    big = json.load(open("bench/results/convert-h200-159cd74.json"))
    large = big["large"]
    rd, wr = large["read_gbs"], large["write_gbs"]
    cold = large["source_bytes"] / G / large["convert_s"]
    cached = big["cached_dev"]["input_gbs"]
    cached_cpu = big["cached_cpu"]["input_gbs"]
    quant = json.load(open("bench/results/quant-cuda-h200.json"))["result"]["results"]
    kern = next(r["input_gb_per_s"] for r in quant if r["input"].startswith("F8_E4M3") and
                r["method"] == "4over6 mse scaled" and r["pass"] == "amax+quantize")
    S, O = src / G, out / G
    print(f"source {S:.1f} GB, output {O:.1f} GB (--keep-source-precision {keep / G:.1f} GB), "
          f"ratio {O / S:.3f}; the 23.2 GB synthetic of convert-h200-159cd74.json: "
          f"{large['output_bytes'] / large['source_bytes']:.3f}")
    print(f"rates (convert-h200-159cd74.json): read {rd} GB/s, write {wr} GB/s, cold "
          f"{cold:.2f} GB/s, cached {cached} GB/s (cpu {cached_cpu}); FP8 4over6 kernel "
          f"{kern:.0f} GB/s (quant-cuda-h200.json)")
    shards = math.ceil(O / 5)
    per_shard_in = 5 / (O / S)
    print(f"5 GB output shards: {shards}; one takes {per_shard_in:.2f} GB of input: kernels "
          f"{per_shard_in / kern * 1000:.0f} ms, node pipeline cached {per_shard_in / cached:.1f} s, "
          f"cold {per_shard_in / cold:.1f} s")
    print("| nodes | per node: read | write | storage floor | cached pipeline | largest part "
          "(5 GB shards) | aggregate FS bandwidth the nodes draw |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in (1, 4, 16):
        r_s, w_s = S / n / rd, O / n / wr
        floor = r_s + w_s
        most = math.ceil(shards / n) / (shards / n)
        print(f"| {n} | {S / n:.1f} GB in {r_s:.0f} s | {O / n:.1f} GB in {w_s:.0f} s | "
              f"{floor:.0f} s ({floor / 60:.1f} min) | {S / n / cached:.0f} s | "
              f"{math.ceil(shards / n)} shards: x{most:.2f} | {(S + O) / floor:.1f} GB/s "
              f"(cached pipeline: {(S + O) / (S / n / cached):.1f} GB/s) |")
    print(f"a full re-read of the output on one node (merge --rehash, hash --check): "
          f"{O / rd:.0f} s at {rd} GB/s")


if __name__ == "__main__":
    main()
