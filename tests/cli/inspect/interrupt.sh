#!/usr/bin/env bash
# SIGINT or SIGTERM while `inspect` reads a checkpoint: exit 5 with "interrupted" (issue #10:
# every command; inspect writes nothing, so there is nothing to clean up). 200,000 tensors keep
# it busy for a while; the signal is sent once the tool catches it (SigCgt in /proc), so the
# test does not depend on timing, only on inspect taking longer than that.
set -euo pipefail
[ -r /proc/self/status ] || { echo "no /proc"; exit 77; }
tmp=$(mktemp -d)
pid=
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
"$NVFP4_PYTHON" - "$tmp/many.safetensors" <<'PY'
import json, struct, sys
n = 200000
h = {"model.layers.%d.mlp.experts.%d.up_proj.weight" % (i // 1000, i % 1000):
     {"dtype": "BF16", "shape": [1, 16], "data_offsets": [32 * i, 32 * i + 32]} for i in range(n)}
b = json.dumps(h, separators=(",", ":")).encode()
b += b" " * (-len(b) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(b)) + b + bytes(32 * n))
PY
for sig in INT TERM; do
    "$NVFP4TOOL" inspect "$tmp/many.safetensors" >/dev/null 2>"$tmp/err" &
    pid=$!
    interrupt $pid $sig
    pid=
    [ $rc -eq 5 ] || fail "SIG$sig: exit $rc, expected 5: $(head -c 500 "$tmp/err")"
    grep -q "interrupted" "$tmp/err" || fail "SIG$sig: no message: $(head -c 500 "$tmp/err")"
done
echo "inspect: SIGINT/SIGTERM give exit 5"
