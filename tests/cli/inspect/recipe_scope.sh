#!/usr/bin/env bash
# inspect --recipe: the recipe's scope decides the plan, --include/--exclude replace its globs,
# and the plan is the one convert follows with the same recipe. Qwen3-MoE fixture (2 layers,
# self_attn q/k/v/o_proj [*, 128] + q_norm/k_norm [64] each): scope *.self_attn.* minus
# *.o_proj.* is 10 tensors, of which q/k/v (6) are quantized and the 4 norms skipped (1-D).
# A recipe that cannot be read is an error, not ignored.
set -euo pipefail
if ! "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    echo "python3 jsonschema missing (scripts/deps.sh installs python3-jsonschema)" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$NVFP4_TESTDATA/hf/qwen3moe-bf16
fail=0
cat >"$tmp/attn.yaml" <<'YAML'
version: 1
scope: {include: ["*.self_attn.*"], exclude: ["*.o_proj.*"]}
YAML
"$NVFP4TOOL" inspect "$src" --recipe "$tmp/attn.yaml" --json >"$tmp/r.json"
"$NVFP4TOOL" inspect "$src" --recipe "$tmp/attn.yaml" >"$tmp/r.txt"
"$NVFP4TOOL" inspect "$src" --recipe "$tmp/attn.yaml" --include '*.mlp.experts.*' --json \
    >"$tmp/over.json"
"$NVFP4TOOL" convert "$src" "$tmp/out" --recipe "$tmp/attn.yaml" --device cpu --quiet --json \
    >"$tmp/conv.json"
grep -qF "Plan: include *.self_attn.*; exclude *.o_proj.*" "$tmp/r.txt" ||
    { echo "text plan line"; cat "$tmp/r.txt"; fail=1; }
"$NVFP4_PYTHON" - "$tmp" "$NVFP4_SCHEMAS/inspect.schema.json" <<'PY' || fail=1
import json, sys, jsonschema
tmp, schema = sys.argv[1], json.load(open(sys.argv[2]))
r = json.load(open(tmp + "/r.json"))
jsonschema.validate(r, schema)
p = r["plan"]
got = (p["include"], p["exclude"], p["quantize"]["tensors"], p["skip"]["tensors"])
want = (["*.self_attn.*"], ["*.o_proj.*"], 6, 4)
assert got == want, f"--recipe plan {got}, expected {want}"
assert p["skip"]["reasons"] == [{"reason": "1-D tensor, not a 2-D linear weight", "tensors": 4}], p["skip"]
o = json.load(open(tmp + "/over.json"))["plan"]
# --include replaces the recipe's include, the recipe's exclude stays: 2 layers x 4 experts x 3
assert (o["include"], o["exclude"], o["quantize"]["tensors"]) == (["*.mlp.experts.*"], ["*.o_proj.*"], 24), o
c = json.load(open(tmp + "/conv.json"))
assert c["tensors_quantized"] == p["quantize"]["tensors"], (c["tensors_quantized"], p["quantize"])
PY
set +e
"$NVFP4TOOL" inspect "$src" --recipe "$tmp/nonexistent.yaml" >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ $rc -ne 0 ] && grep -qF "nonexistent.yaml" "$tmp/err" ||
    { echo "missing recipe: exit $rc"; cat "$tmp/err"; fail=1; }
set +e
"$NVFP4TOOL" inspect "$src" --recipe "$NVFP4_TESTDATA/recipes/bad-unknown-key.yaml" >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 2 ] || { echo "bad recipe: exit $rc, expected 2"; cat "$tmp/err"; fail=1; }
[ $fail -eq 0 ] && echo "inspect --recipe: ok"
exit $fail
