#!/usr/bin/env bash
# bench quant on the CPU: SIGINT (and SIGTERM) while it runs stops it between runs with exit 5
# and a message; --config (a GPU launch configuration) on the CPU is a usage error, exit 2.
set -euo pipefail
tmp=$(mktemp -d)
pid=
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
for sig in INT TERM; do
    "$NVFP4TOOL" bench quant --device cpu --threads 1 --size-mb 1 --runs 1000000 \
        >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    # the info line comes after the signal handlers are in place
    for _ in $(seq 1 2000); do
        grep -q "runs per case" "$tmp/err" 2>/dev/null && break
        sleep 0.005
    done
    grep -q "runs per case" "$tmp/err" || { echo "bench did not start" >&2; cat "$tmp/err" >&2; exit 1; }
    kill -s $sig $pid
    rc=0
    wait $pid || rc=$?
    pid=
    [ $rc -eq 5 ] || { echo "SIG$sig: exit $rc, expected 5" >&2; cat "$tmp/err" >&2; exit 1; }
    grep -q "interrupted" "$tmp/err" || { echo "SIG$sig: no message" >&2; cat "$tmp/err" >&2; exit 1; }
done
rc=0
"$NVFP4TOOL" bench quant --device cpu --config 0 --size-mb 1 --runs 1 >"$tmp/out" 2>"$tmp/err" || rc=$?
[ $rc -eq 2 ] || { echo "--config on the cpu: exit $rc, expected 2" >&2; cat "$tmp/err" >&2; exit 1; }
grep -q -- "--config" "$tmp/err" || { echo "--config: no message" >&2; cat "$tmp/err" >&2; exit 1; }
[ ! -s "$tmp/out" ] || { echo "--config: output on stdout" >&2; exit 1; }
echo ok
