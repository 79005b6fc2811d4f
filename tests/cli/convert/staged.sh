#!/usr/bin/env bash
# Sources staged in the backend's host buffer (read with pread; what a GPU worker does, forced
# on the CPU by NVFP4_CONVERT_STAGE=1) convert to the bytes of sources read in place
# (NVFP4_CONVERT_STAGE=0, the CPU's default), with reads cut short (every pread at most 4097
# bytes, by the shim), with several workers, and for jobs over what the host buffer may keep
# (NVFP4_CONVERT_HOST_KEEP: their own memory, members read in place); the profile counts the
# staging time only when staging. A read error on a source is exit 1 naming the file, the tensor and the offset, and
# leaves no manifest and no temporary file; so does a source file replaced during the run (read
# staged, or in place and then hashed for the manifest), and a read error reading a shard back
# for its hashes (naming the shard).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
kill_shim
# the shim comes before a sanitizer build's runtime in the preload order
asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
"$NVFP4TOOL" synth "$tmp/src" --preset deepseek-v3 --dtype fp8-block --hidden 256 \
    --moe-intermediate 128 --experts 8 --quiet >/dev/null
"$NVFP4TOOL" synth "$tmp/bf16" --preset qwen3-moe --dtype bf16 --hidden 256 --moe-intermediate 128 \
    --experts 4 --quiet >/dev/null
opts=(--quiet --threads 2 --max-shard-size 1MB --json)
for s in src bf16; do
    NVFP4_CONVERT_STAGE=0 "$NVFP4TOOL" convert "$tmp/$s" "$tmp/$s-ref" "${opts[@]}" \
        >"$tmp/$s-ref.json"
    NVFP4_CONVERT_STAGE=1 "$NVFP4TOOL" convert "$tmp/$s" "$tmp/$s-st" "${opts[@]}" \
        --devices cpu,cpu >"$tmp/$s-st.json"
    diff -r "$tmp/$s-ref" "$tmp/$s-st" >"$tmp/diff" 2>&1 ||
        fail "$s: staged output differs: $(head -c 1000 "$tmp/diff")"
    # short reads: the shim's pread returns at most 4097 bytes a call outside PREAD_EIO_UNDER
    ASAN_OPTIONS=$asan PREAD_EIO_UNDER=/nonexistent LD_PRELOAD="$tmp/kill_shim.so" NVFP4_CONVERT_STAGE=1 \
        "$NVFP4TOOL" convert "$tmp/$s" "$tmp/$s-short" "${opts[@]}" >/dev/null
    diff -r "$tmp/$s-ref" "$tmp/$s-short" >"$tmp/diff" 2>&1 ||
        fail "$s: output with short reads differs: $(head -c 1000 "$tmp/diff")"
    # jobs larger than what the host buffer may keep (here every job, and about half of them):
    # memory of their own, members read in place
    for keep in 1 40000; do
        NVFP4_CONVERT_HOST_KEEP=$keep NVFP4_CONVERT_STAGE=1 "$NVFP4TOOL" convert "$tmp/$s" \
            "$tmp/$s-own$keep" "${opts[@]}" --devices cpu,cpu >"$tmp/$s-own$keep.json"
        diff -r "$tmp/$s-ref" "$tmp/$s-own$keep" >"$tmp/diff" 2>&1 ||
            fail "$s: output with jobs over $keep bytes in their own memory differs: $(head -c 1000 "$tmp/diff")"
    done
done
"$NVFP4_PYTHON" - "$tmp/src-ref.json" "$tmp/src-st.json" <<'PY'
import json, sys
ref, st = (json.load(open(p))['profile']['compute'] for p in sys.argv[1:])
assert ref['stage'] == 0, ref
assert 0 < st['stage'] <= st['compute'], st
PY
"$NVFP4_PYTHON" - "$tmp/src-own1.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))['profile']['compute']
assert c['stage'] == 0, c  # no job small enough to stage
PY

# must_fail DST PATTERN VAR=VALUE...: `convert` of the source into DST under the shim with those
# variables exits 1 with a message matching PATTERN (grep), and leaves in DST no manifest and no
# temporary file.
must_fail() {
    local dst=$1 pattern=$2 rc left
    shift 2
    set +e
    env ASAN_OPTIONS="$asan" LD_PRELOAD="$tmp/kill_shim.so" "$@" \
        "$NVFP4TOOL" convert "$tmp/src" "$dst" --quiet 2>"$tmp/err"
    rc=$?
    set -e
    [ $rc -eq 1 ] || fail "$dst: exited $rc, want 1: $(cat "$tmp/err")"
    grep -q "$pattern" "$tmp/err" ||
        fail "$dst: the message does not match '$pattern': $(cat "$tmp/err")"
    if [ -e "$dst" ]; then
        [ ! -e "$dst/nvfp4-manifest.json" ] || fail "$dst: a failed conversion left a manifest"
        left=$(find "$dst" -name '*.tmp' | head -3)
        [ -z "$left" ] || fail "$dst: a failed conversion left temporary files: $left"
    fi
}

# A read error on a source: the file, tensor, offset and error named.
must_fail "$tmp/bad" \
    "$tmp/src/model-.*\.safetensors': reading [0-9]* bytes of '.*' at offset [0-9]*: Input/output error" \
    PREAD_EIO_UNDER="$tmp/src" NVFP4_CONVERT_STAGE=1
# A read error reading a shard back for its SHA-256 and CRC-32s (both follow the writer, on two
# threads): the shard and the error named.
must_fail "$tmp/badout" \
    "cannot read back '$tmp/badout/model-[0-9]*-of-[0-9]*\.safetensors\.tmp': Input/output error" \
    PREAD_EIO_UNDER="$tmp/badout"
# A source file replaced while the conversion runs (a new inode at its path: the reader must not
# mix its bytes with the checked file's): named.
must_fail "$tmp/replaced" "model-00002-of-00005.safetensors' was replaced during the conversion" \
    REPLACE_AT_OPEN=model-00002-of-00005.safetensors NVFP4_CONVERT_STAGE=1
# The same read in place (no staged reads: the replacement comes before the source hashing
# opens the file): the manifest must not name the replacement's SHA-256.
must_fail "$tmp/replaced2" \
    "model-00002-of-00005.safetensors' was replaced during the conversion (hashing it" \
    REPLACE_AT_OPEN=model-00002-of-00005.safetensors NVFP4_CONVERT_STAGE=0
echo ok
