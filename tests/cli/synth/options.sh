#!/usr/bin/env bash
# synth's command line: exit codes (2 for usage), --force, determinism of
# every file across runs and thread counts, and a different seed giving different shards.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "options: $*" >&2; exit 1; }
expect() { # expect CODE PATTERN -- command...
    local want=$1 pat=$2 rc=0
    shift 3
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want: $(cat "$tmp/err")"
    grep -q -- "$pat" "$tmp/err" "$tmp/out" || fail "'$*' did not say '$pat': $(cat "$tmp/err")"
}

T=$NVFP4TOOL
expect 0 "fused-experts" -- "$T" synth --help
expect 2 "qwen3-moe, deepseek-v3" -- "$T" synth "$tmp/x" --preset llama --dtype bf16
expect 2 "qwen3-moe, deepseek-v3" -- "$T" synth "$tmp/x" --dtype bf16
expect 2 "bf16, fp8-block" -- "$T" synth "$tmp/x" --preset qwen3-moe --dtype fp4
expect 2 "--dtype is required" -- "$T" synth "$tmp/x" --preset qwen3-moe
expect 2 "hidden 100" -- "$T" synth "$tmp/x" --preset qwen3-moe --dtype bf16 --hidden 100
expect 2 "max-shard-size" -- "$T" synth "$tmp/x" --preset qwen3-moe --dtype bf16 --max-shard-size x
expect 2 "ue8m0 needs" -- "$T" synth "$tmp/x" --preset qwen3-moe --dtype bf16 --scale-fmt ue8m0
[ ! -e "$tmp/x" ] || fail "a failed synth left $tmp/x behind"

# Non-empty DST: usage error; --force writes, keeps foreign files, drops stale shards.
mkdir "$tmp/d"
echo keep >"$tmp/d/notes.txt"
echo old >"$tmp/d/model-00007-of-00007.safetensors"
expect 2 "not empty" -- "$T" synth "$tmp/d" --preset qwen3-moe --dtype bf16
expect 0 "wrote" -- "$T" synth "$tmp/d" --preset qwen3-moe --dtype bf16 --force
[ -f "$tmp/d/notes.txt" ] || fail "--force removed notes.txt"
[ ! -e "$tmp/d/model-00007-of-00007.safetensors" ] || fail "--force kept a stale shard"
[ -f "$tmp/d/config.json" ] || fail "no config.json"
ls "$tmp/d" | grep -q '\.tmp$' && fail "temporary files left"
# nvfp4 into a non-empty DST: usage error, and its temporary bf16 directory is gone.
expect 2 "not empty" -- "$T" synth "$tmp/d" --preset qwen3-moe --dtype nvfp4
[ ! -e "$tmp/d.synth-bf16.tmp" ] || fail "nvfp4 left its temporary directory behind"

# Same options: byte-identical files, whatever --threads; another seed: different shards.
common=(--preset deepseek-v3 --dtype fp8-block --fused-experts --seed 77 --quiet)
"$T" synth "$tmp/r1" "${common[@]}" --threads 1
"$T" synth "$tmp/r2" "${common[@]}" --threads 4
"$T" synth "$tmp/r3" --preset deepseek-v3 --dtype fp8-block --fused-experts --seed 78 --quiet
[ "$(ls "$tmp/r1")" = "$(ls "$tmp/r2")" ] || fail "different file lists"
for f in "$tmp"/r1/*; do
    cmp -s "$f" "$tmp/r2/$(basename "$f")" || fail "$(basename "$f") differs between runs"
done
shard=model-00002-of-00004.safetensors
[ -f "$tmp/r1/$shard" ] && [ -f "$tmp/r3/$shard" ] || fail "expected 4 shards"
cmp -s "$tmp/r1/$shard" "$tmp/r3/$shard" && fail "seeds 77 and 78 wrote the same shard"
grep -q '"model.layers.1.mlp.experts.gate_up_proj_scale_inv"' "$tmp/r1/model.safetensors.index.json" ||
    fail "fused FP8 scale missing from the index"
exit 0
