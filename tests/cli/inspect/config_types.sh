#!/usr/bin/env bash
# config.json fields of the wrong type or range are warnings that name the field, the value (as
# JSON, long ones cut with "...") and what was expected; the field is read as absent and the
# checkpoint stays loadable: inspect exits 0, the experts are found from the tensors, and convert
# still converts it.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --quiet >/dev/null
"$NVFP4_PYTHON" - "$tmp/src/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update({
    "num_experts": "eight", "num_local_experts": -8, "n_routed_experts": 1e300,
    "hidden_size": 320.5, "moe_intermediate_size": "192", "num_experts_per_tok": [2],
    "norm_topk_prob": "yes", "routed_scaling_factor": -2.5, "hidden_act": 7,
    "quantization_config": [], "text_config": "llama",
    "first_k_dense_replace": {"note": "x" * 100},
})
json.dump(c, open(sys.argv[1], "w"))
PY
cat >"$tmp/want" <<'EOF2'
config.json num_experts is "eight", expected an integer from 0 to 1000000: ignored
config.json num_local_experts is -8, expected an integer from 0 to 1000000: ignored
config.json n_routed_experts is 1e+300, expected an integer from 0 to 1000000: ignored
config.json num_experts_per_tok is [2], expected an integer from 0 to 9007199254740992: ignored
config.json hidden_size is 320.5, expected an integer from 0 to 9007199254740992: ignored
config.json moe_intermediate_size is "192", expected an integer from 0 to 9007199254740992: ignored
config.json norm_topk_prob is "yes", expected true or false: ignored
config.json routed_scaling_factor is -2.5, expected a positive number: ignored
config.json hidden_act is 7, expected a string: ignored
config.json quantization_config is [], expected an object: ignored
config.json text_config is "llama", expected an object: ignored
config.json first_k_dense_replace is {"note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..., expected an integer from 0 to 9007199254740992: ignored
EOF2
expect 0 "Warnings: 12" -- "$NVFP4TOOL" inspect "$tmp/src"
while IFS= read -r line; do
    grep -qxF "  $line" "$tmp/out" || fail "inspect did not warn: $line"
done <"$tmp/want"
grep -qF "experts: 8 per layer, present 16, missing 0" "$tmp/out" ||
    fail "the experts were not found from the tensors: $(grep experts: "$tmp/out")"
"$NVFP4TOOL" inspect "$tmp/src" --json >"$tmp/j"
"$NVFP4_PYTHON" - "$tmp/j" "$tmp/want" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
want = open(sys.argv[2]).read().splitlines()
assert sorted(j["warnings"]) == sorted(want), j["warnings"]
c = j["moe"]["config"]
for k in ("n_experts", "n_experts_key", "top_k", "hidden_size", "moe_intermediate_size",
          "norm_topk_prob", "routed_scaling_factor", "hidden_act", "first_k_dense_replace"):
    assert c[k] is None, (k, c[k])
assert c["intermediate_size"] == 960, c
assert [l["n_experts"] for l in j["moe"]["layers"]] == [8, 8], j["moe"]["layers"]
PY
"$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" --quiet >/dev/null || fail "convert failed"
echo ok
