#!/usr/bin/env bash
# examples/slurm on a real one-node Slurm (tests/slurm/setup.sh): a 4-part job array converts
# a synthetic FP8 checkpoint with `convert --shard i/4 --resume`, part 2 is killed on its first
# run (the array fails, the dependent merge is cancelled), `submit.sh --tasks 2` runs it again
# and the merge; the result passes `hash --check` and equals a one-job convert byte for byte.
# Exit 77 (SKIP) with the reason when Slurm cannot be installed or started here.
set -euo pipefail
tmp=$(mktemp -d)
here=$(cd "$(dirname "$0")" && pwd)
src_dir=${NVFP4_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
tool=${NVFP4TOOL:?NVFP4TOOL must point at the nvfp4tool binary}
slurm=$tmp/slurm
cleanup() {
    bash "$here/setup.sh" stop "$slurm" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "slurm_array: $*" >&2
    for f in "$tmp"/logs/*.out "$slurm"/log/slurmctld.log "$slurm"/log/slurmd.log; do
        [ -f "$f" ] || continue
        echo "--- last lines of $f:" >&2
        tail -n 20 "$f" >&2
    done
    exit 1
}

"$tool" convert --help >"$tmp/help.out" 2>&1 || fail "convert --help failed"
grep -q -- '--shard' "$tmp/help.out" || fail "convert has no --shard option"

rc=0
NVFP4_SLURM_OWNER=$$ bash "$here/setup.sh" start "$slurm" || rc=$?
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 0 ] || fail "tests/slurm/setup.sh start exited $rc"
# shellcheck disable=SC1091
. "$slurm/env"

# Several output shards per part: 300 KB shards of a ~6 MB checkpoint.
opts="--max-shard-size 300KB"
"$tool" synth "$tmp/src" --preset deepseek-v3 --dtype fp8-block --max-shard-size 200KB --quiet
# shellcheck disable=SC2086
"$tool" convert "$tmp/src" "$tmp/ref" --device cpu --quiet $opts

# The tool as the jobs see it: part 2's first run is stopped as soon as its progress journal
# records a finished shard, then sent SIGTERM (convert stops cleanly, exit 5, keeping that
# shard); should it finish before that, the run fails all the same (exit 1), as on a node lost
# after the work.
cat >"$tmp/tool.sh" <<EOF
#!/usr/bin/env bash
if [ "\${SLURM_ARRAY_TASK_ID:-}" != 2 ] || [ -e "$tmp/killed-once" ]; then
    exec "$tool" "\$@"
fi
echo "not killed: it ended first" >"$tmp/killed-once"
"$tool" "\$@" &
pid=\$!
# Builtins only in this loop (no fork), so that the stop lands right after the first shard.
journal="$tmp/dst/.nvfp4-parts/2-of-4.progress.json"
while kill -0 \$pid 2>/dev/null; do
    c=
    [ -s "\$journal" ] && { IFS= read -r -d '' c <"\$journal" || true; }
    if [[ "\$c" == *sha256* ]]; then
        kill -STOP \$pid && kill -TERM \$pid && kill -CONT \$pid &&
            echo "killed after a shard" >"$tmp/killed-once"
        break
    fi
done
rc=0
wait \$pid || rc=\$?
echo "tool.sh: part 2's first run ended with exit \$rc (\$(cat "$tmp/killed-once"))" >&2
[ "\$rc" -ne 0 ] || rc=1
exit \$rc
EOF
chmod +x "$tmp/tool.sh"

submit() {
    SRC=$tmp/src DST=$tmp/dst N=4 NVFP4TOOL=$tmp/tool.sh GRES='' DEVICE=cpu CPUS=1 MEM=500M TIME=5 \
        CONVERT_OPTS=$opts LOGDIR=$tmp/logs PARTITION='' EXTRA_SBATCH='' MERGE_OPTS='' CHECK=hash \
        bash "$src_dir/examples/slurm/submit.sh" "$@" >"$tmp/submit.out" ||
        fail "submit.sh $* exited $?"
    convert=$(sed -n 's/^convert=//p' "$tmp/submit.out")
    merge=$(sed -n 's/^merge=//p' "$tmp/submit.out")
    [ -n "$convert" ] || fail "submit.sh printed no array job id: $(cat "$tmp/submit.out")"
    [ -n "$merge" ] ||
        fail "submit.sh printed no merge job id: $(cat "$tmp/submit.out")"
}

# Wait (at most 120 s) until every job named (and each task of an array job) is finished.
wait_jobs() {
    local id
    for _ in $(seq 1 600); do
        sleep 0.2
        for id in "$@"; do
            scontrol -o show job "$id" >"$tmp/jobs.out" 2>&1 ||
                fail "scontrol show job $id: $(cat "$tmp/jobs.out")"
            grep -qE 'JobState=(PENDING|RUNNING|CONFIGURING|COMPLETING|SUSPENDED|REQUEUED|RESIZING)' \
                "$tmp/jobs.out" && continue 2
        done
        return 0
    done
    fail "jobs $* not finished after 120 s: $(grep -o 'JobState=[A-Z]*' "$tmp/jobs.out" | tr '\n' ' ')"
}

job_state() {
    scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | head -n 1 | cut -d= -f2
}

# Round 1: four parts and the merge; part 2 is killed.
submit
wait_jobs "$convert" "$merge"
for t in 0 1 3; do
    s=$(scontrol -o show job "${convert}_$t" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    [ "$s" = COMPLETED ] || fail "round 1: array task $t is '$s', expected COMPLETED"
done
s=$(scontrol -o show job "${convert}_2" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
[ "$s" = FAILED ] || fail "round 1: array task 2 is '$s', expected FAILED"
s=$(job_state "$merge")
[ "$s" = CANCELLED ] || fail "round 1: the merge job is '$s', expected CANCELLED (its dependency failed)"
grep -q "part 2's first run ended" "$tmp"/logs/convert-"${convert}"_2.out ||
    fail "round 1: task 2's log does not show the failing run"
for t in 0 1 3; do
    [ -f "$tmp/dst/.nvfp4-parts/$t-of-4.json" ] || fail "round 1: no part record $t-of-4.json"
done
killed=$(cat "$tmp/killed-once")
if [ "$killed" = "killed after a shard" ]; then
    [ ! -e "$tmp/dst/.nvfp4-parts/2-of-4.json" ] || fail "round 1: killed part 2 left a part record"
fi
[ ! -e "$tmp/dst/nvfp4-manifest.json" ] || fail "round 1: a manifest exists without the merge"

# Round 2: part 2 again (--resume) and a new merge.
submit --tasks 2
wait_jobs "$convert" "$merge"
s=$(scontrol -o show job "${convert}_2" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
[ "$s" = COMPLETED ] || fail "round 2: array task 2 is '$s', expected COMPLETED"
if [ "$killed" = "killed after a shard" ]; then
    grep -qE '\(([1-9][0-9]*) reused\)' "$tmp"/logs/convert-"$convert"_2.out ||
        fail "round 2: part 2 resumed reusing no shard of its first run"
fi
s=$(job_state "$merge")
[ "$s" = COMPLETED ] || fail "round 2: the merge job is '$s', expected COMPLETED"
grep -q 'hash check: .* 0 findings' "$tmp"/logs/merge-"$merge".out ||
    fail "round 2: the merge job's hash --check did not pass"

# The result, checked here again, and compared with the one-job conversion.
"$tool" hash --check "$tmp/dst" >"$tmp/check.out" 2>&1 || fail "hash --check: $(cat "$tmp/check.out")"
diff -r "$tmp/ref" "$tmp/dst" >"$tmp/diff.out" 2>&1 ||
    fail "the merged output differs from a one-job convert: $(head -n 20 "$tmp/diff.out")"
n=$(find "$tmp/ref" -name '*.safetensors' | wc -l)
[ "$n" -ge 8 ] || fail "only $n output shards: the parts do not each get several"
echo "slurm_array: part 2's first run: $(grep -h "first run ended" "$tmp"/logs/convert-*_2.out)"
echo "slurm_array: part 2 resumed: $(grep -h -- '->' "$tmp"/logs/convert-"$convert"_2.out | tail -n 1)"
echo "slurm_array: 4 parts ($n shards), merged output = one-job output"
