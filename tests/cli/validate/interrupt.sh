#!/usr/bin/env bash
# SIGINT or SIGTERM while validate reads a checkpoint: exit 5 within a moment, with a message. A
# 4 GiB sparse file keeps the reading busy for seconds at no disk cost; the signal is sent once
# the tool catches it (SigCgt in /proc) and has read 64 MiB.
set -euo pipefail
[ -r /proc/self/status ] || { echo "no /proc"; exit 77; }
tmp=$(mktemp -d)
pid=
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
ck="$tmp/ck"
"$NVFP4TOOL" synth "$ck" --preset qwen3-moe --dtype bf16 --layers 1 --experts 2 --quiet
truncate -s 4G "$ck/big.bin"
for sig in INT TERM; do
    "$NVFP4TOOL" validate "$ck" --threads 1 --quiet >/dev/null 2>"$tmp/err" &
    pid=$!
    interrupt $pid $sig $((64 << 20))
    pid=
    [ $rc -eq 5 ] || fail "SIG$sig: exit $rc, expected 5: $(cat "$tmp/err")"
    [ $(($(date +%s) - sig_at)) -le 3 ] || fail "SIG$sig: took more than 3 s to stop"
    grep -q "interrupted" "$tmp/err" || fail "SIG$sig: no message: $(cat "$tmp/err")"
done
echo "validate: SIGINT/SIGTERM give exit 5"
