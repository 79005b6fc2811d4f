#!/usr/bin/env bash
# SIGINT or SIGTERM in the middle of synth: exit 5, the shard being written is removed (no
# *.tmp), and no config.json or index marks the directory complete.
set -euo pipefail
tmp=$(mktemp -d)
pid=
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for sig in INT TERM; do
    dst="$tmp/$sig"
    "$NVFP4TOOL" synth "$dst" --preset qwen3-moe --dtype bf16 --hidden 2048 --experts 64 \
        --moe-intermediate 1024 --threads 1 --max-shard-size 100MB --quiet &
    pid=$!
    for _ in $(seq 1 4000); do
        ls "$dst"/*.tmp >/dev/null 2>&1 && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.005
    done
    kill -s $sig $pid 2>/dev/null || { echo "synth finished before SIG$sig" >&2; exit 1; }
    rc=0
    wait $pid || rc=$?
    pid=
    [ $rc -eq 5 ] || { echo "SIG$sig: exit $rc, expected 5" >&2; exit 1; }
    if ls "$dst"/*.tmp >/dev/null 2>&1; then echo "SIG$sig left a .tmp file" >&2; exit 1; fi
    for f in config.json model.safetensors.index.json; do
        [ ! -e "$dst/$f" ] || { echo "SIG$sig left $f" >&2; exit 1; }
    done
done
echo ok
