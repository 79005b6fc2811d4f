#!/usr/bin/env bash
# SIGINT (and SIGTERM) in the middle: exit 5, and nothing that looks complete is left: no
# manifest, config.json, index or *.tmp file; nothing is written outside DST (the directory
# holding SRC and DST is the same before and after, DST aside).
set -euo pipefail
tmp=$(mktemp -d)
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
. "$(dirname "$0")/../lib.sh"
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --hidden 1024 --experts 32 \
    --moe-intermediate 256 --quiet >/dev/null
around=$(snapshot "$tmp" dst err)
for sig in INT TERM; do
    rm -rf "$tmp/dst"
    "$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" --quiet --threads 1 --max-shard-size 8MB \
        >/dev/null 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 1 2000); do
        [ -n "$(find "$tmp/dst" -name '*.tmp' 2>/dev/null)" ] && break
        sleep 0.005
    done
    kill -s $sig $pid
    rc=0
    wait $pid || rc=$?
    [ $rc -eq 5 ] || { echo "SIG$sig: exit $rc, expected 5" >&2; cat "$tmp/err" >&2; exit 1; }
    # DST itself is gone when the run stopped before finishing a shard (it created DST).
    left=0
    if [ -d "$tmp/dst" ]; then
        left=$(find "$tmp/dst" \( -name '*.tmp' -o -name nvfp4-manifest.json -o -name config.json \
            -o -name model.safetensors.index.json -o -name hf_quant_config.json \) | wc -l)
    fi
    [ "$left" -eq 0 ] || { echo "SIG$sig left files behind" >&2; ls -la "$tmp/dst" >&2; exit 1; }
    grep -q interrupted "$tmp/err" || { echo "no message" >&2; exit 1; }
    # The message says which finished shards DST keeps and that --resume continues.
    kept=$(find "$tmp/dst" -name 'model-*-of-*.safetensors' 2>/dev/null | sort || true)
    if [ -z "$kept" ]; then
        grep -q "nothing was kept" "$tmp/err" || { echo "SIG$sig: $(cat "$tmp/err")" >&2; exit 1; }
    else
        n=$(echo "$kept" | wc -l)
        grep -q "keeps $n of [0-9]* shards (model-00001-of-.*--resume to continue" "$tmp/err" ||
            { echo "SIG$sig, $n kept: $(cat "$tmp/err")" >&2; exit 1; }
    fi
done
# Interrupted after some shards: --resume finishes, reusing them.
"$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" --quiet --threads 1 --max-shard-size 8MB \
    >/dev/null 2>"$tmp/err" &
pid=$!
for _ in $(seq 1 4000); do
    [ "$(find "$tmp/dst" -name 'model-*-of-*.safetensors' 2>/dev/null | wc -l)" -ge 1 ] && break
    sleep 0.005
done
kill -s INT $pid
rc=0
wait $pid || rc=$?
pid=
if [ $rc -eq 5 ]; then
    grep -q "run the same command with --resume to continue" "$tmp/err" ||
        { echo "no --resume hint: $(cat "$tmp/err")" >&2; exit 1; }
    "$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" --quiet --threads 1 --max-shard-size 8MB \
        --resume >/dev/null
    "$NVFP4TOOL" hash --check "$tmp/dst" --quiet >/dev/null
fi
[ "$around" = "$(snapshot "$tmp" dst err)" ] || fail "written outside DST"
echo ok
