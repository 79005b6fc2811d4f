#!/usr/bin/env bash
# Issue #11 items 1 and 9 in inspect (checkpoints from bad_experts.py): the same rule as
# convert. Empty expert tensors are skipped as "empty tensor, copied as it is" (3 in the default
# scope: layer 0 gate_up_proj, layer 1 gate_up_proj and down_proj) and hold no expert; the 3-D
# experts.0.gate_proj.weight is reported as an unknown 3-D tensor (warning and skip reason),
# not counted as expert 0's gate. Exit 0 for both.
set -euo pipefail
if ! "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    echo "python3 jsonschema missing (scripts/deps.sh installs python3-jsonschema)" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" "$(dirname "$0")/bad_experts.py" "$tmp"
fail=0
for name in empty unk3d; do
    rc=0
    timeout 60 "$NVFP4TOOL" inspect "$tmp/$name" --json >"$tmp/$name.json" 2>"$tmp/$name.err" || rc=$?
    [ $rc -eq 0 ] || { echo "inspect $name: exit $rc"; cat "$tmp/$name.err"; fail=1; }
    "$NVFP4TOOL" inspect "$tmp/$name" --summary >"$tmp/$name.txt" 2>/dev/null || fail=1
done
grep -qxF "    3 tensors: empty tensor, copied as it is" "$tmp/empty.txt" ||
    { echo "empty: text"; cat "$tmp/empty.txt"; fail=1; }
grep -qF "  unknown 3-D tensor 'model.layers.0.mlp.experts.0.gate_proj.weight' [2, 96, 320]" \
    "$tmp/unk3d.txt" || { echo "unk3d: no warning in the text"; cat "$tmp/unk3d.txt"; fail=1; }
[ $fail -eq 0 ] || exit 1
"$NVFP4_PYTHON" - "$tmp" "$NVFP4_SCHEMAS/inspect.schema.json" <<'PY' || fail=1
import json, sys, jsonschema
tmp, schema = sys.argv[1], json.load(open(sys.argv[2]))
r = json.load(open(tmp + "/empty.json"))
jsonschema.validate(r, schema)
p = r["plan"]
assert p["skip"]["reasons"] == [{"reason": "empty tensor, copied as it is", "tensors": 3}], p["skip"]
assert sorted(x["name"] for x in p["skip"]["list"]) == [
    "model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj",
    "model.layers.1.mlp.experts.gate_up_proj"], p["skip"]["list"]
assert p["quantize"]["tensors"] == 1, p["quantize"]
assert r["moe"]["summary"]["experts_present"] == 0, r["moe"]["summary"]
r = json.load(open(tmp + "/unk3d.json"))
jsonschema.validate(r, schema)
p = r["plan"]
assert p["skip"]["list"] == [{"name": "model.layers.0.mlp.experts.0.gate_proj.weight",
                              "reason": "unknown 3-D tensor (fused experts: gate_up_proj, down_proj)"}], p["skip"]
assert p["quantize"]["tensors"] == 5, p["quantize"]
assert any(w.startswith("unknown 3-D tensor 'model.layers.0.mlp.experts.0.gate_proj.weight'")
           for w in r["warnings"]), r["warnings"]
layer = r["moe"]["layers"][0]
assert (layer["n_present"], layer["missing"]) == (1, [0]), layer
PY
[ $fail -eq 0 ] && echo "inspect of empty and unknown 3-D expert tensors: ok"
exit $fail
