#!/usr/bin/env bash
# inspect --summary on an NVFP4 checkpoint (the Qwen3-MoE fixture converted: 2 layers x 4
# experts x 3 projections = 24 U8 expert weights, all in the default scope and already NVFP4):
# one count per skip reason, not one line per tensor; the JSON has plan.skip.reasons and no
# plan.skip.list, and validates against the schema. Without --summary each tensor is listed.
set -euo pipefail
if ! "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    echo "python3 jsonschema missing (scripts/deps.sh installs python3-jsonschema)" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$NVFP4TOOL" convert "$NVFP4_TESTDATA/hf/qwen3moe-bf16" "$tmp/nv" --device cpu --quiet >/dev/null
"$NVFP4TOOL" inspect "$tmp/nv" --summary >"$tmp/s.txt"
"$NVFP4TOOL" inspect "$tmp/nv" >"$tmp/full.txt"
"$NVFP4TOOL" inspect "$tmp/nv" --summary --json >"$tmp/s.json"
reason="already NVFP4 (U8 packed values with a global scale)"
grep -qxF "  skip: 24 tensors in scope that cannot be quantized" "$tmp/s.txt" || { echo "skip count"; fail=1; }
grep -qxF "    24 tensors: $reason" "$tmp/s.txt" || { echo "no reason count"; cat "$tmp/s.txt"; fail=1; }
n=$(grep -cF ": $reason" "$tmp/s.txt" || true)
[ "$n" -eq 1 ] || { echo "--summary: $n reason lines, expected 1"; fail=1; }
n=$(grep -E '^    model\.layers\.[01]\.mlp\.experts\.[0-3]\.(gate|up|down)_proj\.weight: ' "$tmp/full.txt" |
    grep -cF ": $reason" || true)
[ "$n" -eq 24 ] || { echo "full output: $n skip lines, expected 24"; fail=1; }
"$NVFP4_PYTHON" - "$tmp/s.json" "$NVFP4_SCHEMAS/inspect.schema.json" "$reason" <<'PY' || fail=1
import json, sys, jsonschema
r, schema, reason = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
jsonschema.validate(r, schema)
s = r["plan"]["skip"]
assert s == {"tensors": 24, "reasons": [{"reason": reason, "tensors": 24}]}, s
PY
[ $fail -eq 0 ] && echo "inspect --summary on NVFP4: ok"
exit $fail
