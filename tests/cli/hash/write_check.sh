#!/usr/bin/env bash
# `hash` on a synthetic checkpoint (with a subdirectory and a file larger than one 8 MiB read):
# the manifest validates against schemas/manifest.schema.json, its SHA-256 values agree with
# sha256sum and its CRC-32 values with Python's zlib over the tensor bytes; --threads 1 and 3
# and a re-run write byte-identical manifests; `hash --check --tensors` is clean (exit 0).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
if ! "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    echo "python3 jsonschema missing" >&2
    exit 77
fi
ck="$tmp/ck"
"$NVFP4TOOL" synth "$ck" --preset qwen3-moe --dtype bf16 --quiet >/dev/null
mkdir -p "$ck/rank-00000-of-00001"
head -c 20000000 /dev/urandom >"$ck/rank-00000-of-00001/big.bin"
echo partial >"$ck/leftover.tmp"

"$NVFP4TOOL" hash "$ck" --threads 1 --quiet >"$tmp/out1"
grep -q "^hash: wrote $ck/nvfp4-manifest.json: 11 files, " "$tmp/out1" ||
    { echo "unexpected output:" >&2; cat "$tmp/out1" >&2; exit 1; }
cp "$ck/nvfp4-manifest.json" "$tmp/m1.json"
"$NVFP4TOOL" hash "$ck" --threads 3 --quiet >/dev/null
cmp "$tmp/m1.json" "$ck/nvfp4-manifest.json" || { echo "--threads 1 and 3 differ" >&2; exit 1; }
"$NVFP4TOOL" hash "$ck" --quiet --json >"$tmp/out.json"
cmp "$tmp/m1.json" "$ck/nvfp4-manifest.json" || { echo "a re-run differs" >&2; exit 1; }

# Expected values from independent tools.
(cd "$ck" && find . -type f ! -name nvfp4-manifest.json ! -name '*.tmp' | sed 's|^\./||' |
    LC_ALL=C sort | xargs sha256sum) | awk '{print $2 "\t" $1}' >"$tmp/sha.want"
"$NVFP4_PYTHON" "$here/st_crc.py" "$ck" | LC_ALL=C sort >"$tmp/crc.want"
"$NVFP4_PYTHON" - "$NVFP4_SCHEMAS/manifest.schema.json" "$ck" "$tmp" <<'PY'
import json, os, sys, jsonschema
schema = json.load(open(sys.argv[1]))
ck, tmp = sys.argv[2], sys.argv[3]
m = json.load(open(os.path.join(ck, "nvfp4-manifest.json")))
jsonschema.Draft202012Validator.check_schema(schema)
jsonschema.Draft202012Validator(schema).validate(m)
assert m["recipe"] is None and m["target"] is None and m["source"] is None, m
names = [f["name"] for f in m["files"]]
assert names == sorted(names), names
assert "rank-00000-of-00001/big.bin" in names and "leftover.tmp" not in names, names
for f in m["files"]:
    size = os.path.getsize(os.path.join(ck, f["name"]))
    assert f["bytes"] == size, (f, size)
got = "".join(f"{f['name']}\t{f['sha256']}\n" for f in m["files"])
want = open(os.path.join(tmp, "sha.want")).read()
assert got == want, (got, want)
keys = [(t["name"], t["file"]) for t in m["tensors"]]
assert keys == sorted(keys) and len(keys) == 69, len(keys)
got = sorted(f"{t['file']}\t{t['name']}\t{t['dtype']}\t{','.join(map(str, t['shape']))}"
             f"\t{t['crc32']}" for t in m["tensors"])
want = open(os.path.join(tmp, "crc.want")).read().splitlines()
assert got == want, "CRC-32 values differ from zlib's"
out = json.load(open(os.path.join(tmp, "out.json")))
assert out["files"] == 11 and out["tensors"] == 69, out
assert out["bytes"] == sum(f["bytes"] for f in m["files"]), out
PY

set +e
"$NVFP4TOOL" hash --check --tensors "$ck" --quiet >"$tmp/check"
rc=$?
set -e
# The leftover .tmp file is not in the manifest: the only finding.
[ "$rc" = 3 ] || { echo "check with a .tmp file: exit $rc, expected 3" >&2; exit 1; }
printf 'EXTRA leftover.tmp\nhash check: 11 files ok, 1 findings\n' | diff - "$tmp/check"
rm "$ck/leftover.tmp"
"$NVFP4TOOL" hash --check --tensors "$ck" --threads 2 --quiet >"$tmp/check"
echo "hash check: 11 files ok, 0 findings" | diff - "$tmp/check"
echo ok
