#!/usr/bin/env bash
# Unbroken checkpoints of every format validate clean (exit 0, no error finding, the report
# valid against schemas/validate.schema.json): synth bf16, fp8-block, nvfp4 (ModelOpt) and
# nvfp4-ct (compressed-tensors); convert --target modelopt (from bf16 and from fp8-block, one and
# several shards), prepared-w4a16, prepared-w4a4 with --ep 2 (rank directories); one
# .safetensors file. Those without nvfp4-manifest.json carry the manifest.absent warning only.
# The read counters agree with the files on disk, and the findings are the same for --threads 1
# and 4 on a checkpoint with findings in several shards.
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

"$T" synth "$tmp/bf16" --preset qwen3-moe --dtype bf16 --layers 2 --experts 4 --quiet
"$T" synth "$tmp/fp8" --preset deepseek-v3 --dtype fp8-block --experts 4 --quiet
"$T" synth "$tmp/nvfp4" --preset qwen3-moe --dtype nvfp4 --layers 2 --experts 4 --quiet
"$T" synth "$tmp/ct" --preset qwen3-moe --dtype nvfp4-ct --layers 2 --experts 4 --quiet
"$T" convert "$tmp/bf16" "$tmp/mo" --quiet
"$T" convert "$tmp/bf16" "$tmp/mo4" --quiet --max-shard-size 1MB
"$T" convert "$tmp/fp8" "$tmp/mofp8" --quiet
"$T" convert "$tmp/bf16" "$tmp/pr" --quiet --target prepared-w4a16
"$T" convert "$tmp/fp8" "$tmp/ep" --quiet --target prepared-w4a4 --ep 2
[ "$(ls "$tmp/mo4"/*.safetensors | wc -l)" -gt 1 ] || fail "mo4 has one shard"

check() { # NAME FORMAT MANIFEST(yes|no|file: a single file, no manifest check) [args]
    local name=$1 format=$2 manifest=$3 rc=0
    shift 3
    "$T" validate "$tmp/$name" --json "$@" >"$tmp/r.json" 2>"$tmp/err" || rc=$?
    [ $rc -eq 0 ] || fail "$name: exit $rc: $(cat "$tmp/err") $(head -c 3000 "$tmp/r.json")"
    grep -q "GB/s" "$tmp/err" || fail "$name: no rate on stderr: $(cat "$tmp/err")"
    "$NVFP4_PYTHON" "$here/check_validate.py" "$S" "$tmp/r.json" pass || fail "$name: report"
    "$NVFP4_PYTHON" - "$tmp/r.json" "$tmp/$name" "$format" "$manifest" <<'PY' || fail "$name: report values"
import json, os, sys
r = json.load(open(sys.argv[1]))
path, fmt, manifest = sys.argv[2], sys.argv[3], sys.argv[4]
assert r["format"] == fmt, (r["format"], fmt)
assert r["manifest"] == (manifest == "yes"), r["manifest"]
ids = [f["id"] for f in r["findings"]]
assert ids == (["manifest.absent"] if manifest == "no" else []), ids
# what was read, counted independently: every file but the manifest, their bytes, tensors
files = []
if os.path.isfile(path):
    files = [path]
else:
    for root, _, names in os.walk(path):
        files += [os.path.join(root, n) for n in names if os.path.join(root, n) !=
                  os.path.join(path, "nvfp4-manifest.json")]
assert r["read"]["files"] == len(files), (r["read"], len(files))
assert r["read"]["bytes"] == sum(os.path.getsize(f) for f in files), r["read"]
import struct
n = 0
for f in files:
    if f.endswith(".safetensors"):
        with open(f, "rb") as h:
            hdr = json.loads(h.read(struct.unpack("<Q", h.read(8))[0]))
        n += len([k for k in hdr if k != "__metadata__"])
assert r["read"]["tensors"] == n, (r["read"], n)
PY
}
check bf16 bf16 no
check fp8 fp8-block no
check nvfp4 nvfp4-modelopt yes
check ct nvfp4-compressed-tensors no
check mo nvfp4-modelopt yes --threads 1
check mo4 nvfp4-modelopt yes --threads 3
check mofp8 nvfp4-modelopt yes
check pr nvfp4-prepared yes
check ep nvfp4-prepared yes
"$NVFP4_PYTHON" -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["ep_ranks"] == 2, r' \
    "$tmp/r.json" || fail "ep: ep_ranks"
cp "$tmp/mo/model-00001-of-00001.safetensors" "$tmp/one.safetensors"
check one.safetensors nvfp4-modelopt file
# the text table: a summary line
expect 0 "0 error(s), 0 warning(s): PASS" -- "$T" validate "$tmp/mo"
expect 0 "1 warning(s): PASS" -- "$T" validate "$tmp/bf16"

# Findings in every shard of mo4: NaN in one BF16 tensor per shard; the JSON findings must not
# depend on the thread count.
for f in "$tmp"/mo4/*.safetensors; do
    name=$("$NVFP4_PYTHON" -c '
import json, struct, sys
with open(sys.argv[1], "rb") as h:
    hdr = json.loads(h.read(struct.unpack("<Q", h.read(8))[0]))
print(sorted(k for k, v in hdr.items() if k != "__metadata__" and v["dtype"] == "BF16")[0])' "$f")
    "$NVFP4_PYTHON" "$here/edit_st.py" "$tmp/mo4" bf16 "$name" 1 nan
done
for t in 1 4; do
    rc=0
    "$T" validate "$tmp/mo4" --json --threads $t >"$tmp/t$t.json" 2>/dev/null || rc=$?
    [ $rc -eq 3 ] || fail "--threads $t: exit $rc"
    "$NVFP4_PYTHON" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["findings"]))' \
        "$tmp/t$t.json" >"$tmp/f$t.json"
done
cmp -s "$tmp/f1.json" "$tmp/f4.json" || fail "findings differ between --threads 1 and 4"
n=$(grep -o '"tensor.nonfinite"' "$tmp/f1.json" | wc -l)
[ "$n" -eq "$(ls "$tmp"/mo4/*.safetensors | wc -l)" ] || fail "$n tensor.nonfinite findings"
echo "validate: every format clean, reports valid, findings independent of --threads"
