#!/usr/bin/env bash
# SIGINT (and SIGTERM) while quantize writes: exit 5 with a message, no OUT.tmp left, no OUT
# created, an OUT that existed (--force) keeps its bytes, and IN is untouched.
set -euo pipefail
tmp=$(mktemp -d)
pid=
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --hidden 1024 --experts 32 \
    --moe-intermediate 256 --max-shard-size 1GB --quiet >/dev/null
in=$tmp/src/model-00001-of-00001.safetensors
sum0=$(sha256sum <"$in")
printf 'old bytes\n' >"$tmp/old.safetensors"
for sig in INT TERM; do
    for out in "$tmp/new.safetensors" "$tmp/old.safetensors"; do
        "$NVFP4TOOL" quantize "$in" "$out" --quiet --threads 1 --device cpu --force \
            >/dev/null 2>"$tmp/err" &
        pid=$!
        # OUT.tmp appears when the writer opens, after the signal handlers are in place
        for _ in $(seq 1 4000); do
            [ -e "$out.tmp" ] && break
            sleep 0.005
        done
        [ -e "$out.tmp" ] || { echo "SIG$sig: $out.tmp never appeared" >&2; cat "$tmp/err" >&2; exit 1; }
        kill -s $sig $pid
        rc=0
        wait $pid || rc=$?
        pid=
        [ $rc -eq 5 ] || { echo "SIG$sig: exit $rc, expected 5" >&2; cat "$tmp/err" >&2; exit 1; }
        grep -q "interrupted" "$tmp/err" || { echo "SIG$sig: no message" >&2; cat "$tmp/err" >&2; exit 1; }
        [ ! -e "$out.tmp" ] || { echo "SIG$sig: $out.tmp left" >&2; exit 1; }
    done
    [ ! -e "$tmp/new.safetensors" ] || { echo "SIG$sig: OUT created" >&2; exit 1; }
    [ "$(cat "$tmp/old.safetensors")" = "old bytes" ] || { echo "SIG$sig: OUT changed" >&2; exit 1; }
    [ "$(sha256sum <"$in")" = "$sum0" ] || { echo "SIG$sig: IN changed" >&2; exit 1; }
done
echo ok
