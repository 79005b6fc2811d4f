#!/usr/bin/env bash
# Usage and runtime errors: exit codes and messages.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$NVFP4_TESTDATA/hf/qwen3moe-bf16
expect() { # expect CODE PATTERN -- command...
    local code=$1 pat=$2 rc=0
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ $rc -eq "$code" ] || { echo "exit $rc, expected $code: $*" >&2; cat "$tmp/err" >&2; exit 1; }
    [ -z "$pat" ] || grep -q -- "$pat" "$tmp/err" || { echo "no '$pat' in: $(cat "$tmp/err")" >&2; exit 1; }
}
mkdir -p "$tmp/full" && echo x >"$tmp/full/keep.txt"
expect 2 "not empty" -- "$NVFP4TOOL" convert "$src" "$tmp/full"
[ -f "$tmp/full/keep.txt" ] || { echo "DST touched" >&2; exit 1; }
expect 2 "apply to the prepared targets only" -- "$NVFP4TOOL" convert "$src" "$tmp/p" --ep 2
[ ! -e "$tmp/p" ] || { echo "a usage error created DST" >&2; exit 1; }
expect 2 "target" -- "$NVFP4TOOL" convert "$src" "$tmp/p" --target nonsense
expect 2 "SRC DST\|expected\|argument" -- "$NVFP4TOOL" convert "$src"
echo '{"model.layers.0.mlp.experts.0.gate_proj": 0}' >"$tmp/zero.json"
expect 2 "positive" -- "$NVFP4TOOL" convert "$src" "$tmp/z" --input-amax "$tmp/zero.json"
expect 1 "nope" -- "$NVFP4TOOL" convert "$tmp/nope" "$tmp/y"
expect 2 "devices" -- "$NVFP4TOOL" convert "$src" "$tmp/d" --devices 0,,1
expect 2 "auto" -- "$NVFP4TOOL" convert "$src" "$tmp/d" --devices cpu,auto
if ! nvidia-smi -L >/dev/null 2>&1; then
    expect 4 "cuda:0" -- "$NVFP4TOOL" convert "$src" "$tmp/d" --devices 0,1
fi
expect 2 "max-host-memory" -- "$NVFP4TOOL" convert "$src" "$tmp/m" --max-host-memory lots
# --force/--resume into a DST holding a file the conversion does not write: refused (exit 2,
# the file named and kept), since the file would fail `hash --check` as EXTRA.
for flag in --force --resume; do
    expect 2 "holds 'keep.txt', which this conversion does not write" -- \
        "$NVFP4TOOL" convert "$src" "$tmp/full" $flag --quiet
    [ -f "$tmp/full/keep.txt" ] && [ ! -e "$tmp/full/nvfp4-manifest.json" ] ||
        { echo "$flag: DST touched" >&2; exit 1; }
done
mkdir "$tmp/full/sub"
rm "$tmp/full/keep.txt"
expect 2 "holds 'sub'" -- "$NVFP4TOOL" convert "$src" "$tmp/full" --force --quiet
rmdir "$tmp/full/sub"
expect 0 "" -- "$NVFP4TOOL" convert "$src" "$tmp/full" --force --quiet
"$NVFP4TOOL" hash --check "$tmp/full" --quiet
# A second --force over a finished output: every file is one the conversion writes.
expect 0 "" -- "$NVFP4TOOL" convert "$src" "$tmp/full" --force --quiet
"$NVFP4TOOL" hash --check "$tmp/full" --quiet
# A NaN in an expert weight: exit 3 naming the shard, the tensor and the [row, col] (written
# into a copy at a position computed here from the header), no manifest; --allow-nonfinite
# passes it through.
cp -r "$src" "$tmp/nan"
shard=$("$NVFP4_PYTHON" - "$tmp/nan" <<'PY'
import json, struct, sys
d = sys.argv[1]
idx = json.load(open(d + '/model.safetensors.index.json'))['weight_map']
name = 'model.layers.1.mlp.experts.2.up_proj.weight'
path = d + '/' + idx[name]
b = bytearray(open(path, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
t = json.loads(b[8:8 + n])[name]
off = 8 + n + t['data_offsets'][0] + 2 * (37 * t['shape'][1] + 101)
b[off:off + 2] = b'\xc0\x7f'  # BF16 quiet NaN, little-endian
open(path, 'wb').write(b)
print(idx[name])
PY
)
expect 3 "'$tmp/nan/$shard': tensor 'model.layers.1.mlp.experts.2.up_proj.weight': non-finite value nan at index \[37, 101\]" \
    -- "$NVFP4TOOL" convert "$tmp/nan" "$tmp/nanout"
[ ! -e "$tmp/nanout" ] || { echo "a conversion that failed before any shard left '$tmp/nanout'" >&2; exit 1; }
expect 0 "" -- "$NVFP4TOOL" convert "$tmp/nan" "$tmp/nanpass" --allow-nonfinite --quiet
echo ok
