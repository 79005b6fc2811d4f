#!/usr/bin/env bash
# The stage profile: `convert --json` carries a "profile" object whose every number is finite
# and >= 0, whose stages report busy = the sum of their busy parts and wait = the sum of their
# waiting parts (re-added here), no stage busier than the run allows its threads, a writer that
# wrote, hashers that hashed, and source hashing that finished within the run.
# NVFP4_CONVERT_PROFILE=1 prints the same as a table on stderr, one line per stage; the output
# bytes are those of a run without it.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4TOOL" synth "$tmp/src" --preset deepseek-v3 --dtype fp8-block --hidden 128 \
    --moe-intermediate 64 --experts 8 --quiet >/dev/null
"$NVFP4TOOL" convert "$tmp/src" "$tmp/a" --quiet --devices cpu,cpu --max-shard-size 200KB \
    --json >"$tmp/a.json"
NVFP4_CONVERT_PROFILE=1 "$NVFP4TOOL" convert "$tmp/src" "$tmp/b" --quiet --threads 1 \
    --max-shard-size 200KB --json >"$tmp/b.json" 2>"$tmp/b.err"
cmp "$tmp/a/nvfp4-manifest.json" "$tmp/b/nvfp4-manifest.json" ||
    { echo "the profiled run wrote a different manifest" >&2; exit 1; }
"$NVFP4_PYTHON" - "$tmp/a.json" "$tmp/b.json" "$tmp/b.err" <<'PY'
import json, math, sys
parts = {  # stage: (busy parts, waiting parts), as the README documents them
    'compute': (['backend_open', 'compute', 'release'], ['wait_memory', 'wait_handover']),
    'writer': (['write', 'copy', 'open', 'publish'], ['wait_job', 'wait_hasher']),
    'hasher': (['sha_read', 'sha256', 'finalize', 'journal'],
               ['wait_shard', 'wait_published', 'crc_wall']),
    'crc': ([], []), 'source_hash': ([], []), 'finish': ([], []),
}
for path, workers in ((sys.argv[1], 2), (sys.argv[2], 1)):
    s = json.load(open(path))
    p = s['profile']
    def walk(o, where):
        for k, v in o.items():
            if isinstance(v, dict):
                walk(v, where + '.' + k)
            else:
                assert isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, (where, k, v)
    walk(p, 'profile')
    run = p['seconds']
    assert 0 < run <= s['seconds'] + 0.05, (run, s['seconds'])
    assert 0 < p['pipeline_seconds'] <= run, p
    assert set(p) == {'seconds', 'pipeline_seconds'} | set(parts), sorted(p)
    for name, (busy, wait) in parts.items():
        st = p[name]
        assert st['threads'] >= 1, (name, st)
        if busy:
            assert abs(st['busy'] - sum(st[k] for k in busy)) < 1e-6, (name, st)
            assert abs(st['wait'] - sum(st[k] for k in wait)) < 1e-6, (name, st)
        # a thread is at most busy for the whole run (small slack for clock granularity)
        assert st['busy'] <= run * st['threads'] + 0.01, (name, st, run)
        assert st['busy'] + st['wait'] <= run * st['threads'] + 0.01, (name, st, run)
    for name in ('compute', 'writer', 'hasher'):  # CPU time of threads alive within the run
        assert p[name]['cpu'] <= run * p[name]['threads'] + 0.01, (name, p[name])
    assert p['writer']['cpu'] > 0, p['writer']
    assert p['compute']['threads'] == workers, p['compute']
    assert p['compute']['busy_max'] <= p['compute']['busy'] + 1e-9, p['compute']
    assert p['compute']['compute'] > 0, p['compute']
    assert p['compute']['stage'] <= p['compute']['compute'] + 1e-9, p['compute']  # a detail
    # one writer per shard written side by side: 4, or fewer shards
    assert p['writer']['threads'] == min(4, s['shards']) >= 1, (p['writer'], s['shards'])
    assert p['writer']['busy'] > 0, p['writer']
    assert 0 < p['writer']['busy_max'] <= p['writer']['busy'] + 1e-9, p['writer']
    assert p['writer']['write'] > 0 and p['writer']['open'] > 0, p['writer']
    assert p['hasher']['threads'] == 4 and p['hasher']['sha256'] > 0, p['hasher']
    assert p['crc']['busy'] > 0 and p['source_hash']['busy'] > 0, p
    assert 0 < p['source_hash']['end_seconds'] <= run, p['source_hash']
    assert 0 < p['writer']['end_seconds'] <= run, p['writer']
    assert p['finish']['busy'] > 0, p['finish']
err = open(sys.argv[3]).read().splitlines()
rows = {l.split()[0]: l.split() for l in err if l.startswith('  ') and not l.split()[0] == 'stage'}
assert set(rows) == set(parts), err
b = json.load(open(sys.argv[2]))['profile']
for name, row in rows.items():  # threads, busy, wait as in the JSON (rounded to 0.01 s)
    assert int(row[1]) == b[name]['threads'], (row, b[name])
    assert abs(float(row[2]) - b[name]['busy']) <= 0.006, (row, b[name])
    assert abs(float(row[3]) - b[name]['wait']) <= 0.006, (row, b[name])
assert any(l.startswith('convert profile: run ') for l in err), err
PY
echo ok
