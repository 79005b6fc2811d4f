#!/usr/bin/env python3
"""BF16 baseline of `nvfp4tool bench moe`: the same MoE block with torch._grouped_mm.

Same shapes, token counts and method as the NVFP4 bench (kernels/moe_bench.cu): random BF16
weights of one expert-parallel rank (the first n_local experts), per run fresh random logits
in (-4, 4) routed over all experts by the shape's own router as the NVFP4 bench routes them
(outside the timed region; route() below: DeepSeek-V3's sigmoid + a correction bias in (-R, R)
drawn once, R = --router-bias, default 0, + 8 groups keeping 4, renormalized, x 2.5; Qwen3's
softmax top-k renormalized; GPT-OSS's top-k of the logits then softmax over the k), activations
read from a rotating offset of a 256 MiB pool; timed with CUDA events around the block (gather
by expert, FC1 grouped_mm, silu(gate) * up, FC2 grouped_mm, weighted combine), 3 warm-up runs,
median of --runs. Only the rank's slots are gathered and computed (up to the most of any run,
a static bound; before, every slot of every rank was, 8x the rows with EP8). The block runs as a
CUDA graph captured once per token count (its inputs copied into the graph's buffers before each
timed replay, outside the events), so the time is the GPU's and not Python's launch rate;
--eager launches the ops one by one.
Writes JSON that `nvfp4tool bench moe --baseline` reads: {"shape", "ep", "router_bias", "graph",
"device", "runs", "results": [{"tokens", "ms"}]}.

    python3 bench/moe_baseline.py --shape deepseek-v3 --out /tmp/bf16-dsv3.json
"""
import argparse
import json
import statistics

import torch

SHAPES = {  # hidden, intermediate, experts, top-k, default ep
    "deepseek-v3": (7168, 2048, 256, 8, 8),
    "qwen3-30b-a3b": (2048, 768, 128, 8, 1),
    "gpt-oss-120b": (2880, 2880, 128, 4, 1),
}
ROUTERS = {"deepseek-v3": "deepseek_v3", "qwen3-30b-a3b": "softmax_topk",
           "gpt-oss-120b": "topk_softmax"}


def route(router, logits, bias, top_k):
    """ids, weights [T, top_k] of the NVFP4 bench's router (cmd/cmd_bench_moe.c, lib/moe's
    nvf_moe_route_ref)."""
    if router == "softmax_topk":
        wts, ids = torch.topk(torch.softmax(logits, dim=-1), top_k, dim=-1)
        return ids, wts / wts.sum(-1, keepdim=True)
    if router == "topk_softmax":
        vals, ids = torch.topk(logits, top_k, dim=-1)
        return ids, torch.softmax(vals, dim=-1)
    n_group, topk_group, scale = 8, 4, 2.5  # deepseek_v3
    t, e = logits.shape
    s = torch.sigmoid(logits)
    sb = s + bias
    gscore = sb.view(t, n_group, -1).topk(2, dim=-1).values.sum(-1)
    keep = torch.zeros_like(gscore).scatter_(1, gscore.topk(topk_group, dim=-1).indices, 1.0)
    mask = keep[:, :, None].expand(t, n_group, e // n_group).reshape(t, e)
    ids = sb.masked_fill(mask == 0, float("-inf")).topk(top_k, dim=-1).indices
    wts = s.gather(1, ids)
    return ids, wts / (wts.sum(-1, keepdim=True) + 1e-20) * scale


def block(x, ids, wts, w13, w2, n_local, inter, rows):
    """y [T, H] = sum over local slots of weight * expert MLP (silu) of x, in BF16, without a
    host synchronization: slots of other ranks' experts sort last, past the grouped GEMMs'
    last offset; the first `rows` sorted slots (at least the local ones) are gathered and
    computed, and those of other ranks among them masked out of the combine."""
    t, k = ids.shape
    flat = ids.reshape(-1)
    key = torch.where(flat < n_local, flat, n_local)
    order = torch.argsort(key, stable=True)[:rows]
    counts = torch.zeros(n_local + 1, dtype=torch.int32, device=x.device)
    counts.scatter_add_(0, key, torch.ones_like(key, dtype=torch.int32))
    offs = torch.cumsum(counts[:n_local], 0, dtype=torch.int32)
    tok = order // k
    a = x[tok]
    h = torch._grouped_mm(a, w13.transpose(-2, -1), offs=offs)
    h = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
    o = torch._grouped_mm(h, w2.transpose(-2, -1), offs=offs)
    local = (key[order] < n_local)[:, None]
    o = torch.where(local, o * wts.reshape(-1)[order, None].to(o.dtype), 0)
    y = torch.zeros_like(x)
    y.index_add_(0, tok, o)
    return y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="deepseek-v3", choices=sorted(SHAPES))
    ap.add_argument("--tokens", default=",".join(str(1 << i) for i in range(13)))
    ap.add_argument("--ep", type=int, default=0)
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--router-bias", type=float, default=0.0,
                    help="deepseek-v3: correction bias uniform in (-R, R), as bench moe's")
    ap.add_argument("--eager", action="store_true",
                    help="launch the block's ops one by one (default: replay a CUDA graph of them)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    hidden, inter, experts, top_k, ep_default = SHAPES[args.shape]
    ep = args.ep or ep_default
    n_local = experts // ep
    dev = torch.device("cuda")
    torch.manual_seed(0)
    w13 = (torch.randn(n_local, 2 * inter, hidden, device=dev) * 0.02).to(torch.bfloat16)
    w2 = (torch.randn(n_local, hidden, inter, device=dev) * 0.02).to(torch.bfloat16)
    pool = torch.randn((256 << 20) // 2, device=dev).to(torch.bfloat16)
    if args.router_bias and ROUTERS[args.shape] != "deepseek_v3":
        ap.error("--router-bias: the %s router takes no correction bias" % args.shape)
    bias = (torch.rand(experts, device=dev) * 2 - 1) * args.router_bias
    results = []
    for t in [int(v) for v in args.tokens.split(",")]:
        times, off = [], 0
        graph = None
        # every run's routing first: the most local slots of any run bounds the rows the block
        # computes (other ranks' slots are 7/8 of them with EP8), a static shape for the graph
        routes = [route(ROUTERS[args.shape], torch.rand(t, experts, device=dev) * 8 - 4, bias,
                        top_k) for _ in range(-3, args.runs)]
        rows = max(1, max(int((ids < n_local).sum()) for ids, _ in routes))
        for r in range(-3, args.runs):
            ids, wts = routes[r + 3]
            off = (off + t * hidden + 4095) // 4096 * 4096
            if off + t * hidden > pool.numel():
                off = 0
            x = pool[off:off + t * hidden].view(t, hidden)
            if not args.eager:
                if graph is None:  # static inputs, the block captured once per token count
                    sx, sids, swts = x.clone(), ids.clone(), wts.clone()
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        block(sx, sids, swts, w13, w2, n_local, inter, rows)
                    torch.cuda.current_stream().wait_stream(side)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        block(sx, sids, swts, w13, w2, n_local, inter, rows)
                sx.copy_(x)
                sids.copy_(ids)
                swts.copy_(wts)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            if args.eager:
                block(x, ids, wts, w13, w2, n_local, inter, rows)
            else:
                graph.replay()
            e1.record()
            e1.synchronize()
            if r >= 0:
                times.append(e0.elapsed_time(e1))
        del graph
        ms = statistics.median(times)
        results.append({"tokens": t, "ms": ms})
        print(f"{args.shape} ep {ep} tokens {t:5d}: {ms:.4f} ms")
    with open(args.out, "w") as f:
        json.dump({"shape": args.shape, "ep": ep, "router_bias": args.router_bias,
                   "graph": not args.eager,
                   "device": torch.cuda.get_device_name(),
                   "runs": args.runs, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
