#!/usr/bin/env bash
# bench moe times GPU kernels: on the CPU it is a usage error (exit 2) naming --device cuda;
# without a usable GPU --device cuda is exit 4. On a GPU machine: a bad shape, token list,
# precision, --ep or --router-bias is exit 2 naming the value, a baseline routed with another
# router bias is exit 3 naming it, and one small run prints its table, replaying a CUDA graph of
# the block or (--eager) launching its kernels one by one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/../lib.sh"
expect 2 "give --device cuda" -- "$NVFP4TOOL" bench moe
expect 2 "give --device cuda" -- "$NVFP4TOOL" bench moe --device cpu --shape qwen3-30b-a3b
expect 0 "--baseline FILE" -- "$NVFP4TOOL" bench --help
if ! nvidia-smi -L >/dev/null 2>&1; then
    expect 4 "cuda" -- "$NVFP4TOOL" bench moe --device cuda
    exit 0
fi
expect 2 "--shape llama" -- "$NVFP4TOOL" bench moe --device cuda --shape llama
expect 2 "--tokens 1,x" -- "$NVFP4TOOL" bench moe --device cuda --tokens 1,x
expect 2 "--precision fp8" -- "$NVFP4TOOL" bench moe --device cuda --precision fp8
expect 2 "--ep 3 does not divide" -- "$NVFP4TOOL" bench moe --device cuda --ep 3
expect 2 "--router-bias 2: expected a number in [0, 1]" -- "$NVFP4TOOL" bench moe --device cuda \
    --router-bias 2
expect 2 "qwen3-30b-a3b router takes no correction bias" -- "$NVFP4TOOL" bench moe --device cuda \
    --shape qwen3-30b-a3b --router-bias 0.1
# a baseline of the script before --router-bias drew DeepSeek-V3's bias in (-0.1, 0.1)
echo '{"shape": "deepseek-v3", "ep": 8, "results": [{"tokens": 1, "ms": 1.0}]}' >"$tmp/old.json"
expect 3 "routed with router bias 0.1, this bench with 0" -- "$NVFP4TOOL" bench moe --device cuda \
    --tokens 1 --runs 1 --baseline "$tmp/old.json"
expect 1 "cannot open '$tmp/none.json'" -- "$NVFP4TOOL" bench moe --device cuda --tokens 1 \
    --runs 1 --baseline "$tmp/none.json"
"$NVFP4TOOL" bench moe --device cuda --shape qwen3-30b-a3b --tokens 1,37 --runs 3 --json \
    >"$tmp/b.json"
"$NVFP4TOOL" bench moe --device cuda --shape qwen3-30b-a3b --tokens 1,37 --runs 3 --json \
    --eager >"$tmp/e.json"
"$NVFP4_PYTHON" - "$tmp/b.json" "$tmp/e.json" <<'PY'
import json, sys
d, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d["bench"] == "moe" and d["shape"] == "qwen3-30b-a3b" and d["router_bias"] == 0, d
assert d["graph"] is True and e["graph"] is False, (d["graph"], e["graph"])
# the same routing and weights either way: the experts reached agree
assert [r["active_experts"] for r in d["results"]] == [r["active_experts"] for r in e["results"]]
rows = d["results"]
assert [(r["tokens"], r["precision"]) for r in rows] == \
    [(1, "w4a16"), (37, "w4a16"), (1, "w4a4"), (37, "w4a4")], rows
for r in rows:
    assert r["ms"] > 0 and r["weight_gb_per_s"] > 0, r
    # 1 token reaches top-k = 8 experts of 128 at most
    assert 1 <= r["active_experts"] <= (8 if r["tokens"] == 1 else 128), r
print("bench moe json ok")
PY
