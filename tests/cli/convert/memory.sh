#!/usr/bin/env bash
# Bounded host memory: a ~300 MB checkpoint converted with --max-host-memory 64MiB keeps its
# peak RSS (getrusage, reported by --json) under the limit + the largest tensor + 48 MB for the
# binary, thread stacks and allocator. Skipped under AddressSanitizer (shadow memory and its
# quarantine of freed buffers inflate the RSS).
set -euo pipefail
if grep -q __asan_init "$NVFP4TOOL"; then
    echo "skipped under ASan"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype bf16 --hidden 1024 --experts 48 \
    --moe-intermediate 512 --quiet >/dev/null
out=$("$NVFP4TOOL" convert "$tmp/src" "$tmp/dst" --quiet --threads 2 --method rtn --device cpu \
    --max-host-memory 64MiB --max-shard-size 100MB --json)
"$NVFP4_PYTHON" - "$out" "$tmp/src" <<'PY'
import json, os, struct, sys
s = json.loads(sys.argv[1])
d = sys.argv[2]
largest = 0
for f in os.listdir(d):
    if f.endswith('.safetensors'):
        raw = open(os.path.join(d, f), 'rb').read(1 << 20)
        n = struct.unpack('<Q', raw[:8])[0]
        for k, t in json.loads(raw[8:8 + n]).items():
            if k != '__metadata__':
                largest = max(largest, t['data_offsets'][1] - t['data_offsets'][0])
limit = 64 * 2**20 + largest + 48e6
assert s['bytes_in'] > 4.5 * 64 * 2**20, s['bytes_in']
assert s['peak_rss_bytes'] < limit, (s['peak_rss_bytes'], limit)
print('peak RSS %.1f MB for %.1f MB in (limit %.1f MB)' % (s['peak_rss_bytes'] / 1e6, s['bytes_in'] / 1e6, limit / 1e6))
PY
echo ok
