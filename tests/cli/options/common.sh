#!/usr/bin/env bash
# The common options (SPEC section 2) each command takes: the ones it uses parse (checked with a
# trailing --help, exit 0), the ones it cannot use are a usage error (exit 2) naming the option,
# and each command's --help lists exactly the ones it takes.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL

# command -> the common options it uses (README "Commands").
declare -A takes=(
    [inspect]="json quiet log-level recipe"
    [quantize]="device threads json quiet log-level recipe"
    [convert]="device threads json quiet log-level recipe"
    [verify]="device threads json quiet log-level recipe"
    [moe]="device threads json quiet log-level recipe"
    [validate]="device threads json quiet log-level recipe"
    [hash]="threads json quiet log-level"
    [bench]="device threads json quiet log-level"
    [synth]="threads json quiet log-level"
    [merge]="threads json quiet log-level"
)
declare -A args=([device]="--device cpu" [threads]="--threads 1" [json]="--json"
    [quiet]="--quiet" [log-level]="--log-level warn" [recipe]="--recipe $tmp/r.yaml")

for cmd in "${!takes[@]}"; do
    "$T" "$cmd" --help >"$tmp/help" || fail "$cmd --help exited $?"
    for opt in device threads json quiet log-level recipe; do
        rc=0
        # shellcheck disable=SC2086
        "$T" "$cmd" ${args[$opt]} --help >/dev/null 2>"$tmp/err" || rc=$?
        if [[ " ${takes[$cmd]} " == *" $opt "* ]]; then
            [ "$rc" -eq 0 ] || fail "$cmd rejects --$opt (exit $rc): $(cat "$tmp/err")"
            grep -q -- "^  --$opt\b" "$tmp/help" || fail "$cmd --help does not list --$opt"
        else
            [ "$rc" -eq 2 ] || fail "$cmd accepts --$opt (exit $rc), it cannot use it"
            grep -q -- "$cmd does not take --$opt" "$tmp/err" ||
                fail "$cmd --$opt: no clear message: $(cat "$tmp/err")"
            if grep -q -- "^  --$opt\b" "$tmp/help"; then
                fail "$cmd --help lists --$opt, which it rejects"
            fi
        fi
    done
done

# The cases of issue #10, run for real: each exits 2 before touching anything.
mkdir "$tmp/ckpt"
for c in "inspect $tmp/ckpt --device cuda" "hash $tmp/ckpt --device cuda" \
    "synth $tmp/s --preset qwen3-moe --dtype bf16 --device cuda" \
    "synth $tmp/s --preset qwen3-moe --dtype bf16 --recipe /nonexistent.yaml"; do
    rc=0
    # shellcheck disable=SC2086
    "$T" $c >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 2 ] || fail "'$c' exited $rc, expected 2"
done
# inspect follows a recipe's scope (the plan convert follows): a missing one is an error.
rc=0
"$T" inspect "$tmp/ckpt" --recipe /nonexistent.yaml >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" -ne 0 ] || fail "inspect --recipe /nonexistent.yaml exited 0"
grep -q /nonexistent.yaml "$tmp/err" || fail "inspect --recipe: message does not name the file"
[ ! -e "$tmp/s" ] || fail "a rejected synth wrote $tmp/s"
[ ! -e "$tmp/ckpt/nvfp4-manifest.json" ] || fail "a rejected hash wrote a manifest"
echo "common options: each command takes what it uses and rejects the rest"
