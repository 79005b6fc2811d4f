#!/usr/bin/env bash
# A part killed mid-way (SIGKILL, after it finished a shard: no cleanup at all) leaves no part
# record; run again with --resume it reuses the shards its journal recorded (hashed again), and
# the merge is byte-identical to a one-job conversion. A part run twice (the second time with
# --resume, everything reused) writes the same record.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL
"$T" synth "$tmp/src" --preset deepseek-v3 --dtype fp8-block --hidden 256 --moe-intermediate 128 \
    --experts 16 --quiet >/dev/null
opts=(--quiet --max-shard-size 50KB --threads 1)
"$T" convert "$tmp/src" "$tmp/one" "${opts[@]}" >/dev/null
parts=$tmp/p/.nvfp4-parts
"$T" convert "$tmp/src" "$tmp/p" "${opts[@]}" --shard 0/2 >/dev/null
cp "$parts/0-of-2.json" "$tmp/record0"
"$T" convert "$tmp/src" "$tmp/p" "${opts[@]}" --shard 0/2 --resume --json >"$tmp/again.json"
"$NVFP4_PYTHON" - "$tmp/again.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["shards"] > 0 and s["shards_reused"] == s["shards"], s
PY
cmp "$tmp/record0" "$parts/0-of-2.json" || fail "--resume of a finished part wrote another record"
# Stop the part (SIGSTOP) once its journal names a shard; if it had finished already (a loaded
# machine), start it over; otherwise kill it there, mid-way.
killed=0
for attempt in 1 2 3 4 5; do
    rm -f "$parts"/1-of-2.*
    "$T" convert "$tmp/src" "$tmp/p" "${opts[@]}" --shard 1/2 --max-host-memory 1KiB --force &
    pid=$!
    for _ in $(seq 1 20000); do
        [ -s "$parts/1-of-2.progress.json" ] && break
        kill -0 "$pid" 2>/dev/null || break
    done
    kill -STOP "$pid" 2>/dev/null || true
    if [ ! -e "$parts/1-of-2.json" ]; then
        kill -KILL "$pid" || fail "cannot kill part 1/2"
        wait "$pid" 2>/dev/null && fail "the killed part exited 0"
        killed=1
        break
    fi
    kill -CONT "$pid" 2>/dev/null || true
    wait "$pid" || true
done
[ "$killed" = 1 ] || fail "part 1/2 finished before it could be killed, 5 times"
[ ! -e "$parts/1-of-2.json" ] || fail "a part killed mid-way left a part record"
[ -s "$parts/1-of-2.progress.json" ] || fail "the killed part left no journal"
expect 3 "part 1-of-2 is missing" -- "$T" merge "$tmp/p"
"$T" convert "$tmp/src" "$tmp/p" "${opts[@]}" --shard 1/2 --resume --json >"$tmp/resumed.json" ||
    fail "--resume of the killed part exited $?"
"$NVFP4_PYTHON" - "$tmp/resumed.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["shards_reused"] >= 1, ("the resumed part reused nothing", s)
PY
"$T" merge "$tmp/p" --quiet || fail "merge after the resumed part exited $?"
diff -r "$tmp/one" "$tmp/p" || fail "merged DST after a killed and resumed part differs"
"$T" hash "$tmp/p" --check --quiet >/dev/null || fail "hash --check after the merge"
echo "a part killed with SIGKILL, resumed, merges to the one-job bytes"
