#!/usr/bin/env bash
# The known-bad checkpoint directories of tests/data/invalid/ckpt/cases.tsv: make_bad.py builds
# the good bases with the tool (small: ~0.5 MB each) and derives every case; `validate CASE
# --json` must exit with the table's code and report each required finding id (with severity
# error for exit 3, warning for exit 0; no error finding at exit 0), one of them naming the
# tensor, file or module the defect is in. Every case is checked; each failure prints what was
# expected and what validate gave.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
dir=$NVFP4_TESTDATA/invalid/ckpt
"$NVFP4_PYTHON" "$dir/make_bad.py" --tool "$NVFP4TOOL" "$tmp/c" >"$tmp/made.tsv" ||
    fail "make_bad.py failed"
n=0
while IFS=$'\t' read -r case _ code require options _; do
    case $case in '#'* | '') continue ;; esac
    path=$(awk -F'\t' -v k="$case" '$1 == k {print $2}' "$tmp/made.tsv")
    named=$(awk -F'\t' -v k="$case" '$1 == k {print $3}' "$tmp/made.tsv")
    [ -d "$path" ] || fail "$case: make_bad.py made no directory"
    printf '%s\t%s\t%s\t%s\t%s\t-\t%s\n' "$case" "$path" "$code" "$require" "$options" "$named" \
        >>"$tmp/batch"
    n=$((n + 1))
done <"$dir/cases.tsv"
[ "$n" -ge 50 ] || fail "only $n cases in cases.tsv"
"$NVFP4_PYTHON" "$(dirname "$0")/check_findings.py" "$NVFP4TOOL" --batch "$tmp/batch" ||
    fail "some of the $n cases gave another exit code or lacked their finding (above)"
echo "validate: $n checkpoint cases give their exit code and finding"
