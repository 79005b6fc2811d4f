#!/usr/bin/env bash
# SIGINT or SIGTERM while `hash` or `hash --check` reads a checkpoint: exit 5 within a moment,
# no *.tmp left, and the manifest already there unchanged (issue #10). A 4 GiB sparse file keeps
# the hashing busy for seconds at no disk cost; the signal is sent once the tool catches it
# (SigCgt in /proc) and has read 64 MiB, so the test does not depend on timing.
set -euo pipefail
[ -r /proc/self/status ] || { echo "no /proc"; exit 77; }
tmp=$(mktemp -d)
pid=
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
ck="$tmp/ck"
"$NVFP4TOOL" synth "$ck" --preset qwen3-moe --dtype bf16 --layers 1 --experts 2 --quiet
: >"$ck/big.bin"
"$NVFP4TOOL" hash "$ck" --quiet
cp "$ck/nvfp4-manifest.json" "$tmp/manifest.json"
truncate -s 4G "$ck/big.bin"

for mode in write check; do
    for sig in INT TERM; do
        args=("$ck" --threads 1 --quiet)
        [ $mode = check ] && args+=(--check)
        "$NVFP4TOOL" hash "${args[@]}" >/dev/null 2>"$tmp/err" &
        pid=$!
        interrupt $pid $sig $((64 << 20)) # mid-way through the 4 GiB file
        pid=
        [ $rc -eq 5 ] || fail "$mode, SIG$sig: exit $rc, expected 5: $(cat "$tmp/err")"
        # within 3 s of the signal (whole seconds), however long the start took on a loaded machine
        [ $(($(date +%s) - sig_at)) -le 3 ] || fail "$mode, SIG$sig: took more than 3 s to stop"
        grep -q "interrupted" "$tmp/err" || fail "$mode, SIG$sig: no message: $(cat "$tmp/err")"
        if find "$ck" -name '*.tmp' | grep -q .; then fail "$mode, SIG$sig left a .tmp"; fi
        cmp -s "$ck/nvfp4-manifest.json" "$tmp/manifest.json" ||
            fail "$mode, SIG$sig changed the manifest"
    done
done
echo "hash: SIGINT/SIGTERM give exit 5, nothing written"
