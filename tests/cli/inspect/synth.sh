#!/usr/bin/env bash
# inspect on checkpoints from `nvfp4tool synth`: for each preset and dtype the JSON report
# validates and matches an independent reading of the files and config.json
# (check_inspect.py), and the MoE summary matches the preset's config values.
set -euo pipefail
if ! "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    echo "python3 jsonschema missing (scripts/deps.sh installs python3-jsonschema)" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$NVFP4TOOL" synth "$tmp/probe" --preset qwen3-moe --dtype bf16 --quiet 2>"$tmp/err"; then
    if grep -q "not implemented" "$tmp/err"; then
        echo "synth not implemented yet: skipped"; exit 77
    fi
    cat "$tmp/err"; exit 1
fi
n=0
while read -r name args; do
    # shellcheck disable=SC2086
    "$NVFP4TOOL" synth "$tmp/$name" $args --quiet
    "$NVFP4TOOL" inspect "$tmp/$name" --json >"$tmp/$name.default.json"
    "$NVFP4TOOL" inspect "$tmp/$name" --json --include '*' --exclude '*.mlp.gate.*' \
        >"$tmp/$name.all.json"
    "$NVFP4TOOL" inspect "$tmp/$name" --json --summary >"$tmp/$name.summary.json"
    "$NVFP4_PYTHON" "$(dirname "$0")/check_inspect.py" "$tmp/$name" "$tmp/$name" \
        "$NVFP4_SCHEMAS/inspect.schema.json"
    n=$((n + 1))
done <<'CASES'
qwen-bf16 --preset qwen3-moe --dtype bf16
qwen-fp8-fused --preset qwen3-moe --dtype fp8-block --fused-experts
dsv3-fp8 --preset deepseek-v3 --dtype fp8-block
dsv3-bf16-small --preset deepseek-v3 --dtype bf16 --layers 4 --experts 16 --hidden 256 --moe-intermediate 128
CASES
# The preset values themselves, as the synth brief pins them (DeepSeek-V3: dense first
# layer, sigmoid routing with groups, 2.5 scaling, one shared expert).
"$NVFP4_PYTHON" - "$tmp/dsv3-fp8.default.json" "$tmp/dsv3-bf16-small.default.json" <<'PY'
import json, sys
for path, layers, experts, hidden, inter in ((sys.argv[1], 3, 8, 320, 192),
                                             (sys.argv[2], 4, 16, 256, 128)):
    r = json.load(open(path))
    s, c = r["moe"]["summary"], r["moe"]["config"]
    got = (s["n_layers"], s["n_dense"], s["n_experts"], s["hidden"], s["intermediate"],
           s["router"], c["routed_scaling_factor"], c["first_k_dense_replace"],
           [l["shared_experts"] for l in r["moe"]["layers"] if l["kind"] == "moe"])
    want = (layers, 1, experts, hidden, inter, "deepseek_v3", 2.5, 1, [True] * (layers - 1))
    if got != want:
        sys.exit(f"{path}: got {got}, expected {want}")
PY
echo "inspect on synth checkpoints: $n match"
