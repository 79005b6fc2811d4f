#!/usr/bin/env bash
# Broken checkpoints give exit 3 and the finding of the catalogue (README "Finding ids") naming
# the file and tensor, each defect made here independently of nvfp4tool (edit_st.py, python):
# a flipped byte (manifest.sha256, and manifest.crc32 of the tensor holding it), gate/up
# weight_scale_2 that differ, an input_scale of 0, NaN in a BF16 tensor, an index naming the
# wrong shard, an index naming a missing shard and a path outside, an empty exclude_modules, a
# truncated shard, a non-zero padding byte of a prepared scale tensor, a missing rank directory
# and a wrong expert range; --deep folds verify's findings in.
set -euo pipefail
if ! "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    echo "python3 jsonschema missing (scripts/deps.sh installs python3-jsonschema)" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL
S=$NVFP4_SCHEMAS/validate.schema.json
ED="$NVFP4_PYTHON $here/edit_st.py"

"$T" synth "$tmp/bf16" --preset qwen3-moe --dtype bf16 --layers 2 --experts 4 --quiet
"$T" convert "$tmp/bf16" "$tmp/mo" --quiet --max-shard-size 1MB
"$T" convert "$tmp/bf16" "$tmp/pr" --quiet --target prepared-w4a16
"$T" convert "$tmp/bf16" "$tmp/ep" --quiet --target prepared-w4a16 --ep 2

# bad NAME SRC ID[@FILE[@TENSOR]]...: validate a copy broken by the commands on stdin; exit 3
# and every ID given among the findings.
bad() {
    local name=$1 src=$2 rc=0
    shift 2
    rm -rf "$tmp/$name"
    cp -r "$tmp/$src" "$tmp/$name"
    (cd "$tmp/$name" && bash -e) || fail "$name: breaking it failed"
    "$T" validate "$tmp/$name" --json >"$tmp/r.json" 2>"$tmp/err" || rc=$?
    [ $rc -eq 3 ] || fail "$name: exit $rc, expected 3: $(cat "$tmp/err")"
    "$NVFP4_PYTHON" "$here/check_validate.py" "$S" "$tmp/r.json" fail "$@" || fail "$name"
}
export ED
G=model.layers.1.mlp.experts.2.gate_proj
U=model.layers.1.mlp.experts.2.up_proj
su=$($ED "$tmp/mo" where $U.weight_scale_2)
si=$($ED "$tmp/mo" where $U.input_scale)

# A flipped byte: the tensor that holds it found here from the header.
f1=model-00001-of-00004.safetensors
held=$("$NVFP4_PYTHON" - "$tmp/mo/$f1" <<'PY'
import json, os, struct, sys
p = sys.argv[1]
with open(p, "rb") as h:
    n = struct.unpack("<Q", h.read(8))[0]
    hdr = json.loads(h.read(n))
at = (8 + n + os.path.getsize(p)) // 2 - (8 + n)
print([k for k, v in hdr.items() if k != "__metadata__" and
       v["data_offsets"][0] <= at < v["data_offsets"][1]][0])
PY
)
echo '$ED . flip '$f1 | bad flipped mo manifest.sha256@$f1 "manifest.crc32@$f1@$held"
echo "\$ED . f32 $U.weight_scale_2 0.25" |
    bad ws2 mo "modelopt.gate-up-scale-mismatch@$su@$U.weight_scale_2"
echo "\$ED . f32 $G.input_scale 0" |
    bad input0 mo "scale.zero@$($ED "$tmp/mo" where $G.input_scale)@$G.input_scale" \
        "modelopt.gate-up-input-scale-mismatch@$si@$U.input_scale"
echo "\$ED . f32 $U.weight_scale_2 -1" | bad negative mo "scale.negative@$su@$U.weight_scale_2"
n=model.layers.0.post_attention_layernorm.weight
echo "\$ED . bf16 $n 5 inf" | bad nan mo "tensor.nonfinite@$($ED "$tmp/mo" where $n)@$n"
# The index naming the wrong shard for one tensor.
"$NVFP4_PYTHON" - "$tmp/mo/model.safetensors.index.json" >"$tmp/wrong" <<'PY'
import json, sys
wm = json.load(open(sys.argv[1]))["weight_map"]
k = sorted(wm)[0]
other = [f for f in sorted(set(wm.values())) if f != wm[k]][0]
print(k, other)
PY
read -r wt ws <"$tmp/wrong"
cat <<EOF2 | bad wrong_shard mo "index.missing-tensor@$ws@$wt"
"$NVFP4_PYTHON" - <<'PY'
import json
d = json.load(open("model.safetensors.index.json"))
d["weight_map"]["$wt"] = "$ws"
json.dump(d, open("model.safetensors.index.json", "w"))
PY
EOF2
cat <<'EOF2' | bad shards mo index.missing-shard@model-00009-of-00009.safetensors index.path-outside
"$NVFP4_PYTHON" - <<'PY'
import json
d = json.load(open("model.safetensors.index.json"))
wm = d["weight_map"]
a, b = sorted(wm)[:2]
wm[a] = "model-00009-of-00009.safetensors"
wm[b] = "../outside.safetensors"
json.dump(d, open("model.safetensors.index.json", "w"))
PY
EOF2
cat <<'EOF2' | bad total mo index.total-size@model.safetensors.index.json
"$NVFP4_PYTHON" - <<'PY'
import json
d = json.load(open("model.safetensors.index.json"))
d["metadata"]["total_size"] += 2
json.dump(d, open("model.safetensors.index.json", "w"))
PY
EOF2
cat <<'EOF2' | bad exclude mo modelopt.exclude-modules-empty@hf_quant_config.json modelopt.config-mismatch
"$NVFP4_PYTHON" - <<'PY'
import json
d = json.load(open("hf_quant_config.json"))
d["quantization"]["exclude_modules"] = []
json.dump(d, open("hf_quant_config.json", "w"))
PY
EOF2
echo "truncate -s -100 $f1" | bad truncated mo safetensors.malformed@$f1 manifest.size@$f1
echo "rm -f nvfp4-manifest.json; truncate -s -100 $f1" | bad truncated_third mo safetensors.malformed@$f1
grep -q "invalid safetensors file" "$tmp/r.json" || fail "truncated: not the reader's reason"

# Prepared: a padding byte of w2_weight_scale (H = 320 rows padded to 384 in the 128x4 layout:
# row 330, column 0 of expert 1, at the SPEC section 5 offset computed here) set non-zero.
H=$("$NVFP4_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["hidden_size"])' "$tmp/bf16/config.json")
off=$("$NVFP4_PYTHON" - "$tmp/pr" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
f = os.path.join(d, "model-00001-of-00001.safetensors")
with open(f, "rb") as h:
    hdr = json.loads(h.read(struct.unpack("<Q", h.read(8))[0]))
E, R, K = hdr["model.layers.1.mlp.experts.w2_weight_scale"]["shape"]
m, k = 330, 0
kt = (K + 3) // 4
off = (m // 128) * kt * 512 + (k // 4) * 512 + (m % 32) * 16 + ((m % 128) // 32) * 4 + (k % 4)
print(R * K + off)  # expert 1
PY
)
[ "$H" -lt 330 ] || fail "hidden size $H leaves no padding row 330"
echo "\$ED . byte model.layers.1.mlp.experts.w2_weight_scale $off 56" |
    bad padding pr "prepared.layout@model-00001-of-00001.safetensors@model.layers.1.mlp.experts.w2_weight_scale"
grep -q "expert 1, row 330, column 0: 0x38" "$tmp/r.json" || fail "padding: not named"
echo "rm -rf rank-00001-of-00002" | bad rank ep prepared.rank-missing@rank-00001-of-00002 manifest.missing-file
cat <<'EOF2' | bad split ep prepared.expert-split@rank-00001-of-00002
"$NVFP4_PYTHON" - <<'PY'
import json
p = "rank-00001-of-00002/config.json"
d = json.load(open(p))
d["quantization_config"]["expert_range"][0] += 1
json.dump(d, open(p, "w"))
PY
EOF2

# --deep: verify's structure check on a checkpoint whose gate/up scales differ, as verify.<id>.
rc=0
"$T" validate "$tmp/ws2" --deep --json >"$tmp/r.json" 2>"$tmp/err" || rc=$?
[ $rc -eq 3 ] || fail "--deep: exit $rc: $(cat "$tmp/err")"
"$NVFP4_PYTHON" "$here/check_validate.py" "$S" "$tmp/r.json" fail verify.weight_scale_2 || fail "--deep"
"$NVFP4_PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["deep"] and r["summary"]["layers_verified"] == 2, r["summary"]' \
    "$tmp/r.json" || fail "--deep: layers"
echo "validate: every broken checkpoint gives exit 3 and its finding"
