#!/usr/bin/env bash
# `hash --check` finds every kind of damage: one byte flipped inside a shard's data (SHA256,
# and with --tensors CRC32 naming the tensor that holds the byte, found by an independent
# Python reader), a deleted file (MISSING), an added file (EXTRA), a truncated file (SIZE);
# exit 3 each time, and --json reports the same findings.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
ck="$tmp/ck"
"$NVFP4TOOL" synth "$ck" --preset qwen3-moe --dtype bf16 --quiet >/dev/null
"$NVFP4TOOL" hash "$ck" --quiet >/dev/null

check() { # check WANT_EXIT ARGS... -> stdout in $tmp/out
    local want=$1
    shift
    set +e
    "$NVFP4TOOL" hash --check "$ck" --quiet "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    set -e
    [ "$rc" = "$want" ] || { echo "hash --check $*: exit $rc, expected $want" >&2;
        cat "$tmp/out" "$tmp/err" >&2; exit 1; }
}
expect_line() { # the exact line is in the output
    grep -qxF -- "$1" "$tmp/out" || { echo "missing line '$1' in:" >&2; cat "$tmp/out" >&2;
        exit 1; }
}

shard=model-00002-of-00003.safetensors
size=$(stat -c %s "$ck/$shard")
off=$((size - 1000))
tensor=$("$NVFP4_PYTHON" "$here/st_crc.py" "$ck" "$shard" "$off")
[ -n "$tensor" ] || { echo "no tensor holds byte $off" >&2; exit 1; }
cp "$ck/$shard" "$tmp/orig"
want_sha=$(sha256sum "$ck/$shard" | cut -d' ' -f1)
# Flip one byte (xor 0x01) in place.
"$NVFP4_PYTHON" -c 'import sys
p, o = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 1]))' "$ck/$shard" "$off"
got_sha=$(sha256sum "$ck/$shard" | cut -d' ' -f1)
check 3
expect_line "SHA256 $shard: got $got_sha expected $want_sha"
expect_line "hash check: 9 files ok, 1 findings"
check 3 --tensors
crcs=$("$NVFP4_PYTHON" - "$ck/$shard" "$tmp/orig" "$tensor" <<'PY'
import json, struct, sys, zlib
def crc(path, name):
    raw = open(path, "rb").read()
    n, = struct.unpack("<Q", raw[:8]); t = json.loads(raw[8:8 + n])[name]
    b, e = t["data_offsets"]
    return f"{zlib.crc32(raw[8 + n + b:8 + n + e]):08x}"
print(crc(sys.argv[1], sys.argv[3]), crc(sys.argv[2], sys.argv[3]))
PY
)
expect_line "CRC32 $shard:$tensor: got ${crcs% *} expected ${crcs#* }"
expect_line "hash check: 9 files ok, 2 findings"
cp "$tmp/orig" "$ck/$shard"
check 0 --tensors
expect_line "hash check: 10 files ok, 0 findings"

rm "$ck/tokenizer.json"
echo surprise >"$ck/notes.txt"
mkdir "$ck/sub"
echo deeper >"$ck/sub/more.txt"
truncate -s -1 "$ck/config.json"
cfg=$(stat -c %s "$ck/config.json")
check 3
expect_line "MISSING tokenizer.json"
expect_line "EXTRA notes.txt"
expect_line "EXTRA sub/more.txt"
expect_line "SIZE config.json: $cfg != $((cfg + 1))"
expect_line "hash check: 8 files ok, 4 findings"
[ "$(wc -l <"$tmp/out")" = 5 ] || { echo "unexpected lines:" >&2; cat "$tmp/out" >&2; exit 1; }

check 3 --json
"$NVFP4_PYTHON" - "$tmp/out" "$cfg" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cfg = int(sys.argv[2])
assert r["ok"] is False and r["files_listed"] == 10 and r["files_ok"] == 8, r
got = [(f["kind"], f["name"], f["got"], f["expected"]) for f in r["findings"]]
assert got[0] == ("SIZE", "config.json", str(cfg), str(cfg + 1)), got
assert got[1] == ("EXTRA", "notes.txt", "notes.txt", None), got
assert got[2] == ("EXTRA", "sub/more.txt", "sub/more.txt", None), got
assert got[3][:2] == ("MISSING", "tokenizer.json") and got[3][2] is None, got
assert len(got) == 4, got
PY
echo ok
