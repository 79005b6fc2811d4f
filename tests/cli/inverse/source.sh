#!/usr/bin/env bash
# BF16 and FP8-block sources (issue 12): source -> prepared-w4a16 / prepared-w4a4 (--ep 1 and 2,
# --scale-layout 128x4 and 8x4) -> `convert --target modelopt` is file for file the direct
# `convert SRC --target modelopt` with the same recipe: `diff -r` shows only nvfp4-manifest.json
# (which names its source), with a small --max-shard-size so that there are several shards and
# the quantization groups (gate + up: one job, never split) decide where they end. The tensors
# are also compared by an independent Python reader. The FP8 source also converts its attention
# o_proj (a dense prepared linear, restored from X.alpha and the record) with calibrated input
# scales (--input-amax: W4A4's alpha alone would not give weight_scale_2 back; the record does).
# Also: the inverse given another --max-shard-size equals the direct conversion with that size;
# a fused-experts source; FP8 kept (--keep-source-precision); a record_version 1 record (no "modelopt_jobs") still restores the
# tensors exactly (shards in name order); a "modelopt_jobs" that does not match the tensors is
# a warning and the same tensors in name order.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
T=$NVFP4TOOL
C() { "$NVFP4_PYTHON" "$here/check_inverse.py" "$@" >/dev/null; }
# Only nvfp4-manifest.json may differ between the direct output $1 and the inverse's $2.
same_files() {
    local d
    d=$(diff -rq "$1" "$2" | grep -v "nvfp4-manifest.json differ$" || true)
    [ -z "$d" ] || fail "$3: $d"
    C files "$1" "$2" || fail "$3: the files differ from the direct"
    C tensors "$1" "$2" || fail "$3: the tensors differ from the direct"
}

"$T" synth "$tmp/bf16" --preset qwen3-moe --dtype bf16 --hidden 128 --moe-intermediate 128 \
    --experts 4 --layers 3 --quiet
"$T" synth "$tmp/fp8" --preset deepseek-v3 --dtype fp8-block --hidden 256 \
    --moe-intermediate 128 --experts 4 --quiet
"$T" synth "$tmp/fused" --preset qwen3-moe --dtype bf16 --hidden 128 --moe-intermediate 128 \
    --experts 4 --fused-experts --quiet
"$NVFP4_PYTHON" - "$tmp/amax.json" <<'PY'
import json, sys
amax = {}
for l in range(3):
    amax["model.layers.%d.self_attn.o_proj" % l] = 3.5 + l
    for e in range(4):
        for p, v in (("gate_proj", 7.0), ("up_proj", 7.0), ("down_proj", 11.0 + e)):
            amax["model.layers.%d.mlp.experts.%d.%s" % (l, e, p)] = v
json.dump(amax, open(sys.argv[1], "w"))
PY
for s in bf16 fp8; do
    o=(--method rtn --max-shard-size 64KB)
    [ $s = bf16 ] || o+=(--include '*.mlp.experts.*' --include '*o_proj*' --input-amax "$tmp/amax.json")
    "$T" convert "$tmp/$s" "$tmp/$s.direct" "${o[@]}" --quiet
    n=$(find "$tmp/$s.direct" -name '*.safetensors' | wc -l)
    [ "$n" -ge 4 ] || fail "$s: the direct conversion has $n shards, the test wants several"
    # every pair of (format, ep), (format, layout) and (ep, layout)
    for c in "w4a16 1 128x4" "w4a16 2 8x4" "w4a4 1 8x4" "w4a4 2 128x4"; do
        read -r f ep l <<<"$c"
        c="$s prepared-$f --ep $ep --scale-layout $l"
        "$T" convert "$tmp/$s" "$tmp/p" "${o[@]}" --target "prepared-$f" --ep "$ep" \
            --scale-layout "$l" --quiet
        [ $s = bf16 ] || grep -qF '"model.layers.2.self_attn.o_proj"' "$tmp/p/nvfp4-inverse.json" ||
            fail "$c: the record has no dense o_proj"
        "$T" convert "$tmp/p" "$tmp/b" --max-shard-size 64KB --quiet || fail "$c: the inverse failed"
        same_files "$tmp/$s.direct" "$tmp/b" "$c"
        rm -rf "$tmp/b"
        [ "$f$ep" != w4a42 ] || cp -r "$tmp/p" "$tmp/$s.keep"
        rm -rf "$tmp/p"
    done
done

# The inverse's own --max-shard-size: the direct conversion with that size.
"$T" convert "$tmp/bf16" "$tmp/big.direct" --method rtn --max-shard-size 100KB --quiet
"$T" convert "$tmp/bf16.keep" "$tmp/b" --max-shard-size 100KB --quiet
same_files "$tmp/big.direct" "$tmp/b" "inverse --max-shard-size 100KB"
rm -rf "$tmp/b"

# Fused experts: one job per expert at the fused tensor's place.
"$T" convert "$tmp/fused" "$tmp/fused.direct" --method rtn --max-shard-size 64KB --quiet
"$T" convert "$tmp/fused" "$tmp/p" --method rtn --max-shard-size 64KB --target prepared-w4a4 \
    --ep 2 --quiet
"$T" convert "$tmp/p" "$tmp/b" --max-shard-size 64KB --quiet
same_files "$tmp/fused.direct" "$tmp/b" "fused experts"
rm -rf "$tmp/p" "$tmp/b"

# FP8 kept as FP8 (--keep-source-precision on both sides: the inverse's options are the direct's).
o=(--method rtn --max-shard-size 64KB --keep-source-precision)
"$T" convert "$tmp/fp8" "$tmp/keep.direct" "${o[@]}" --quiet
"$T" convert "$tmp/fp8" "$tmp/p" "${o[@]}" --target prepared-w4a16 --quiet
"$T" convert "$tmp/p" "$tmp/b" --max-shard-size 64KB --keep-source-precision --quiet
same_files "$tmp/keep.direct" "$tmp/b" "--keep-source-precision"
rm -rf "$tmp/p" "$tmp/b"

# A record_version 1 record (written before "modelopt_jobs"): the tensors exactly, the shards
# in name order (here not the direct files).
C downgrade "$tmp/bf16.keep"
"$T" convert "$tmp/bf16.keep" "$tmp/b" --max-shard-size 64KB --quiet 2>"$tmp/log"
C tensors "$tmp/bf16.direct" "$tmp/b" || fail "record_version 1: the tensors differ"
d=$(diff -rq "$tmp/bf16.direct" "$tmp/b" || true)
grep -qv "nvfp4-manifest.json differ$" <<<"$d" ||
    fail "record_version 1: the shard files equal the direct ones (name order expected)"
rm -rf "$tmp/b"

# A "modelopt_jobs" that does not match the restored tensors: a warning, then name order.
C misorder "$tmp/fp8.keep"
"$T" convert "$tmp/fp8.keep" "$tmp/b" --max-shard-size 64KB 2>"$tmp/log" ||
    fail "a mismatched modelopt_jobs failed the inverse"
grep -qF "does not match this conversion's outputs" "$tmp/log" ||
    fail "no warning for a mismatched modelopt_jobs: $(cat "$tmp/log")"
C tensors "$tmp/fp8.direct" "$tmp/b" || fail "mismatched modelopt_jobs: the tensors differ"
echo "bf16, fp8-block and fused -> prepared (w4a16/w4a4, ep 1/2, 128x4/8x4) -> modelopt:" \
    "the direct modelopt files"
