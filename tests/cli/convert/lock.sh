#!/usr/bin/env bash
# Two conversions into one DST: the first holds an flock on DST/.nvfp4-convert.lock for its whole
# run; the second stops at once with exit 1 naming the holder's pid, and touches nothing. The
# lock file is gone after the run, so the output verifies (no EXTRA).
set -euo pipefail
tmp=$(mktemp -d)
trap 'kill -9 $pid $holder 2>/dev/null || true; rm -rf "$tmp"' EXIT
pid=
holder=
src=$NVFP4_TESTDATA/hf/qwen3moe-bf16

# A holder of our own (python), so the pid in the message is known and the timing is not.
mkdir "$tmp/held"
"$NVFP4_PYTHON" - "$tmp/held/.nvfp4-convert.lock" "$tmp/ready" <<'PY' &
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b"%d\n" % os.getpid())
open(sys.argv[2], "w").close()
time.sleep(120)
PY
holder=$!
for _ in $(seq 1 1000); do [ -e "$tmp/ready" ] && break; sleep 0.01; done
rc=0
"$NVFP4TOOL" convert "$src" "$tmp/held" --quiet 2>"$tmp/err" || rc=$?
[ $rc -eq 1 ] || { echo "locked DST: exit $rc, expected 1" >&2; cat "$tmp/err" >&2; exit 1; }
grep -q "in use by another conversion (pid $holder holds" "$tmp/err" ||
    { echo "holder's pid not named: $(cat "$tmp/err")" >&2; exit 1; }
[ "$(ls -A "$tmp/held")" = .nvfp4-convert.lock ] || { echo "locked DST touched" >&2; exit 1; }
kill -9 $holder
wait $holder 2>/dev/null || true
holder=
# A lock file left by a dead run is not a lock: --resume takes it over and removes it.
"$NVFP4TOOL" convert "$src" "$tmp/held" --resume --quiet >/dev/null
[ ! -e "$tmp/held/.nvfp4-convert.lock" ] || { echo "lock file left" >&2; exit 1; }
"$NVFP4TOOL" hash --check "$tmp/held" --quiet

# Two real conversions: the second one fails at once, the first one completes.
"$NVFP4TOOL" synth "$tmp/big" --preset qwen3-moe --dtype bf16 --hidden 1024 --experts 32 \
    --moe-intermediate 256 --quiet >/dev/null
"$NVFP4TOOL" convert "$tmp/big" "$tmp/dst" --quiet --threads 1 --max-shard-size 8MB \
    >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 2000); do
    [ -e "$tmp/dst/.nvfp4-convert.lock" ] && [ -s "$tmp/dst/.nvfp4-convert.lock" ] && break
    sleep 0.005
done
rc=0
"$NVFP4TOOL" convert "$tmp/big" "$tmp/dst" --force --quiet 2>"$tmp/err" || rc=$?
if kill -0 $pid 2>/dev/null || [ -e "$tmp/dst/.nvfp4-convert.lock" ]; then
    [ $rc -eq 1 ] || { echo "second run: exit $rc, expected 1" >&2; cat "$tmp/err" >&2; exit 1; }
    grep -q "pid $pid holds" "$tmp/err" || { echo "no pid in: $(cat "$tmp/err")" >&2; exit 1; }
fi
wait $pid || { echo "the first conversion failed" >&2; exit 1; }
pid=
[ ! -e "$tmp/dst/.nvfp4-convert.lock" ] || { echo "lock file left" >&2; exit 1; }
"$NVFP4TOOL" hash --check "$tmp/dst" --quiet
echo ok
