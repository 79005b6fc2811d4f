#!/usr/bin/env python3
"""Check `nvfp4tool inspect --json` reports against an independent reading of the checkpoint.

Usage: check_inspect.py CKPT OUT SCHEMA, where OUT.default.json is the report with the default
scope, OUT.all.json with --include '*' --exclude '*.mlp.gate.*', OUT.summary.json with
--summary. The expected numbers come from the safetensors headers (parsed here with the
standard library) and config.json; nothing is taken from the report under test.
"""
import fnmatch, json, os, struct, sys
import jsonschema

ckpt, out, schema_path = sys.argv[1:4]
schema = json.load(open(schema_path))
FLOAT = {"F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F4", "F6_E2M3",
         "F6_E3M2", "F16", "BF16", "F32", "F64"}

def fail(msg):
    sys.exit(f"{os.path.basename(ckpt)}: {msg}")

def expect(what, got, want):
    if got != want:
        fail(f"{what}: got {got!r}, expected {want!r}")

# Independent reading of the checkpoint.
index = json.load(open(os.path.join(ckpt, "model.safetensors.index.json")))
files = sorted(set(index["weight_map"].values()))
tensors = {}
for f in files:
    with open(os.path.join(ckpt, f), "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        hdr = json.loads(fh.read(n))
    for k, v in hdr.items():
        if k != "__metadata__":
            b, e = v["data_offsets"]
            tensors[k] = {"dtype": v["dtype"], "shape": v["shape"], "bytes": e - b, "shard": f}
cfg = json.load(open(os.path.join(ckpt, "config.json")))
qc = cfg.get("quantization_config") or {}

def numel(t):
    n = 1
    for d in t["shape"]:
        n *= d
    return n

def fused(k):
    return k.endswith((".experts.gate_up_proj", ".experts.down_proj"))

def nvfp4_bytes(k):
    t = tensors[k]
    linears = t["shape"][0] if len(t["shape"]) == 3 else 1
    return numel(t) // 2 + numel(t) // 16 + 8 * linears

def plan(include, exclude):
    quant, skip = set(), set()
    for k, t in tensors.items():
        if not any(fnmatch.fnmatchcase(k, g) for g in include):
            continue
        if any(fnmatch.fnmatchcase(k, g) for g in exclude):
            continue
        if k.endswith("_scale_inv") or k.endswith("bias"):
            continue
        dims_ok = len(t["shape"]) == 2 or (len(t["shape"]) == 3 and fused(k))
        ok = (t["dtype"] in FLOAT and dims_ok and "embed" not in k
              and t["shape"][-1] % 16 == 0)
        (quant if ok else skip).add(k)
    return quant, skip

def check(rep, include, exclude, with_tensors=True):
    jsonschema.Draft202012Validator(schema).validate(rep)
    expect("format", rep["format"], "fp8-block" if qc.get("quant_method") == "fp8" else "bf16")
    expect("n_tensors", rep["n_tensors"], len(tensors))
    expect("data_bytes", rep["data_bytes"], sum(t["bytes"] for t in tensors.values()))
    expect("index_total_size", rep["index_total_size"], index["metadata"]["total_size"])
    expect("files", [(f["name"], f["bytes"], f["tensors"]) for f in rep["files"]],
           [(f, os.path.getsize(os.path.join(ckpt, f)),
             sum(1 for t in tensors.values() if t["shard"] == f)) for f in files])
    if with_tensors:
        expect("tensor names", [t["name"] for t in rep["tensors"]], sorted(tensors))
        for t in rep["tensors"]:
            want = tensors[t["name"]]
            for key in ("dtype", "shape", "bytes", "shard"):
                expect(f"{t['name']} {key}", t[key], want[key])
    else:
        expect("tensors left out", "tensors" in rep, False)
    n_experts = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
    dense = cfg.get("first_k_dense_replace", 0)
    c = rep["moe"]["config"]
    for key in ("norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group",
                "first_k_dense_replace", "hidden_size", "moe_intermediate_size",
                "intermediate_size", "n_shared_experts", "hidden_act", "scoring_func"):
        expect(f"config {key}", c[key], cfg.get(key))
    expect("config top_k", c["top_k"], cfg.get("num_experts_per_tok"))
    expect("config n_experts", c["n_experts"], n_experts)
    s = rep["moe"]["summary"]
    expect("n_moe", s["n_moe"], cfg["num_hidden_layers"] - dense)
    expect("n_dense", s["n_dense"], dense)
    expect("n_experts", s["n_experts"], n_experts)
    expect("experts_present", s["experts_present"], n_experts * (cfg["num_hidden_layers"] - dense))
    expect("hidden", s["hidden"], cfg["hidden_size"])
    expect("intermediate", s["intermediate"], cfg["moe_intermediate_size"])
    expect("top_k", s["top_k"], cfg["num_experts_per_tok"])
    expect("router", s["router"],
           "deepseek_v3" if cfg["model_type"] == "deepseek_v3" else "softmax_topk")
    for layer in rep["moe"]["layers"]:
        if layer["kind"] == "moe":
            expect("layout", layer["layout"],
                   "fused" if any(fused(k) for k in tensors) else "per-expert")
            expect("shared experts", layer["shared_experts"], bool(cfg.get("n_shared_experts")))
            expect("router bias", layer["router_bias"], cfg["model_type"] == "deepseek_v3")
    quant, skip = plan(include, exclude)
    p = rep["plan"]
    expect("plan include", p["include"], include)
    expect("quantize count", p["quantize"]["tensors"], len(quant))
    expect("quantize bytes", p["quantize"]["bytes"], sum(tensors[k]["bytes"] for k in quant))
    expect("nvfp4 bytes", p["quantize"]["nvfp4_bytes"],
           sum(nvfp4_bytes(k) for k in quant))
    if with_tensors:
        expect("skip list", sorted(x["name"] for x in p["skip"]["list"]), sorted(skip))
    else:
        expect("no skip list in a summary", "list" in p["skip"], False)
    expect("skip reasons", sum(x["tensors"] for x in p["skip"]["reasons"]), len(skip))
    expect("drop count", p["drop"]["tensors"],
           sum(1 for k in quant if k + "_scale_inv" in tensors))
    if with_tensors:
        expect("quantized", sorted(t["name"] for t in rep["tensors"] if t["action"] == "quantize"),
               sorted(quant))
    expect("warnings", rep["warnings"], [])

check(json.load(open(out + ".default.json")), ["*.mlp.experts.*"], [])
check(json.load(open(out + ".all.json")), ["*"], ["*.mlp.gate.*"])
check(json.load(open(out + ".summary.json")), ["*.mlp.experts.*"], [], with_tensors=False)
print(f"{os.path.basename(ckpt)}: ok")
