#!/usr/bin/env bash
# An NVFP4 source whose expert 1 of layer 0 has an up_proj weight_scale_2 three times the gate's
# (edited in Python): the prepared conversion re-quantizes the gate onto the up's scale, logs
# it, reports it in the manifest ("requantized_experts", summary "experts_requantized"); the
# independent check in nvfp4_edit.py finds w13_alpha the up's scale, the up rows the stored
# bytes and every gate value within one quantization step of the stored value. Every other
# expert is laid out as stored (check_prepared.py on layer 1). --strict: exit 3 naming the layer
# and the expert, DST not created.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL
E="$NVFP4_PYTHON $here/nvfp4_edit.py"

"$T" synth "$tmp/m" --preset qwen3-moe --dtype nvfp4 --layers 2 --experts 4 --quiet \
    --max-shard-size 1GB
$E rescale "$tmp/m" model.layers.0.mlp.experts.1.up_proj.weight_scale_2 3
expect 3 "model.layers.0: expert 1 has gate and up with different weight_scale_2" -- \
    "$T" convert "$tmp/m" "$tmp/strict" --target prepared-w4a16 --strict
[ ! -e "$tmp/strict" ] || fail "--strict created DST"

expect 0 "model.layers.0: expert 1: gate weight_scale_2" -- \
    "$T" convert "$tmp/m" "$tmp/p" --target prepared-w4a16
$E requant "$tmp/p" "$tmp/m" 0 1 320 192 >/dev/null || fail "the re-quantized expert"
# Layer 1 is untouched: the checker compares it (and the rest) with M; layer 0's expert 1 must
# be the only difference it sees.
if "$NVFP4_PYTHON" "$here/../prepared/check_prepared.py" compare "$tmp/p" "$tmp/m" \
    --precision w4a16 --layout 128x4 >"$tmp/chk" 2>&1; then
    fail "the checker saw no difference at the re-quantized expert"
fi
grep -q "model.layers.0.mlp.experts" "$tmp/chk" || fail "checker: $(cat "$tmp/chk")"
"$T" hash --check "$tmp/p" --quiet || fail "hash --check"
# With --ep 2 the expert is planned in rank 0's pass, expert 3's (none) in rank 1's: reported once.
"$T" convert "$tmp/m" "$tmp/ep" --quiet --target prepared-w4a4 --ep 2
"$NVFP4_PYTHON" - "$tmp/ep/nvfp4-manifest.json" <<'PY' || fail "--ep 2: report"
import json, sys
m = json.load(open(sys.argv[1]))
r = m["target"]["requantized_experts"]
assert m["summary"]["experts_requantized"] == 1 and len(r) == 1, m["summary"]
assert (r[0]["layer"], r[0]["expert"], r[0]["member"]) == ("model.layers.0", 1, "gate"), r
PY
# The same expert in rank 1 (experts 2, 3): counted in its rank's pass too.
cp -r "$tmp/m" "$tmp/m3"
$E rescale "$tmp/m3" model.layers.1.mlp.experts.3.gate_proj.weight_scale_2 2
"$T" convert "$tmp/m3" "$tmp/ep3" --quiet --target prepared-w4a16 --ep 2
"$NVFP4_PYTHON" - "$tmp/ep3/nvfp4-manifest.json" <<'PY' || fail "--ep 2, rank 1: report"
import json, sys
m = json.load(open(sys.argv[1]))
r = sorted((x["layer"], x["expert"], x["member"]) for x in m["target"]["requantized_experts"])
assert m["summary"]["experts_requantized"] == 2, m["summary"]
assert r == [("model.layers.0", 1, "gate"), ("model.layers.1", 3, "up")], r
PY
expect 2 "its own input scales are used" -- \
    "$T" convert "$tmp/m" "$tmp/amax" --target prepared-w4a4 --input-amax /dev/null
[ ! -e "$tmp/amax" ] || fail "--input-amax created DST"
if "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    "$NVFP4_PYTHON" - "$NVFP4_SCHEMAS/manifest.schema.json" "$tmp/p" <<'PY'
import json, os, sys, jsonschema
schema = json.load(open(sys.argv[1]))
m = json.load(open(os.path.join(sys.argv[2], "nvfp4-manifest.json")))
jsonschema.Draft202012Validator(schema).validate(m)
PY
fi
echo "NVFP4 source: differing gate/up scales re-quantized and reported; --strict exit 3"
