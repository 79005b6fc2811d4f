#!/usr/bin/env bash
# `hash --check --tensors` compares each listed tensor's dtype and shape with the file's, not
# only its CRC-32 (issue #11 item 8): a manifest listing F32 [7, 7] for a BF16 tensor is exit 3
# with a TENSOR finding naming the tensor, what was found and what was expected. The found
# dtype and shape come from the file's header, read here with Python's json.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
ck="$tmp/ck"
"$NVFP4TOOL" synth "$ck" --preset qwen3-moe --dtype bf16 --quiet >/dev/null
"$NVFP4TOOL" hash "$ck" --quiet >/dev/null
cp "$ck/nvfp4-manifest.json" "$tmp/good.json"

# Pick the first tensor of the manifest; rewrite its dtype, then its shape, keeping the CRC.
read -r file name found < <("$NVFP4_PYTHON" - "$ck" <<'PY'
import json, struct, sys
ck = sys.argv[1]
m = json.load(open(ck + "/nvfp4-manifest.json"))
t = m["tensors"][0]
with open(ck + "/" + t["file"], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))[t["name"]]
print(t["file"], t["name"], h["dtype"] + "|" + json.dumps(h["shape"]))
PY
)
edit() { # edit FIELD JSON-VALUE: the first tensor's field in the manifest
    "$NVFP4_PYTHON" - "$tmp/good.json" "$ck/nvfp4-manifest.json" "$1" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["tensors"][0][sys.argv[3]] = json.loads(sys.argv[4])
json.dump(m, open(sys.argv[2], "w"))
PY
}
dtype=${found%%|*}
shape=${found#*|}
check() { # check WANT_LINE: exit 3 and the line among the findings; without --tensors exit 0
    local rc=0
    "$NVFP4TOOL" hash --check --tensors "$ck" --quiet >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq 3 ] || fail "exit $rc, expected 3: $(cat "$tmp/out" "$tmp/err")"
    grep -qxF -- "$1" "$tmp/out" || fail "missing '$1' in: $(cat "$tmp/out")"
    grep -q "^CRC32" "$tmp/out" && fail "a CRC32 finding for an intact tensor: $(cat "$tmp/out")"
    rc=0
    "$NVFP4TOOL" hash --check "$ck" --quiet >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || fail "without --tensors the files still match: exit $rc"
}
edit dtype '"F32"'
check "TENSOR $file:$name: got $dtype $shape expected F32 $shape"
edit shape '[7, 7]'
check "TENSOR $file:$name: got $dtype $shape expected $dtype [7, 7]"
edit shape '[]'
check "TENSOR $file:$name: got $dtype $shape expected $dtype []"
cp "$tmp/good.json" "$ck/nvfp4-manifest.json"
"$NVFP4TOOL" hash --check --tensors "$ck" --quiet >/dev/null || fail "the intact manifest fails"
echo "hash --check --tensors: dtype and shape checked"
