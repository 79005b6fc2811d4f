#!/usr/bin/env bash
# Every malformed file of tests/data/invalid: exit 3, stdout empty, and stderr is the reader's
# message "nvfp4tool inspect: error: invalid safetensors file 'PATH': ..." with the phrase that
# tests/unit/test_safetensors.c pins for that file.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$NVFP4_PYTHON" - "$NVFP4_SOURCE_DIR/tests/unit/test_safetensors.c" >"$tmp/phrases.tsv" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
table = src[src.index("k_invalid[] = {"):]
table = table[:table.index("};")]
for m in re.finditer(r'\{\s*"(\w+)",\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\}', table):
    phrase = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2)))
    print(f"{m.group(1)}\t{phrase}")
PY
n=0
fail=0
for f in "$NVFP4_TESTDATA"/invalid/*.safetensors; do
    rc=0
    "$NVFP4TOOL" inspect "$f" >"$tmp/out" 2>"$tmp/err" || rc=$?
    base=$(basename "$f" .safetensors)
    if [ $rc -ne 3 ]; then
        echo "$base: exit $rc, expected 3"; cat "$tmp/err"; fail=1; continue
    fi
    [ -s "$tmp/out" ] && { echo "$base: wrote to stdout"; fail=1; }
    grep -qF "nvfp4tool inspect: error: invalid safetensors file '$f': " "$tmp/err" \
        || { echo "$base: stderr does not name the file:"; cat "$tmp/err"; fail=1; }
    phrase=$(awk -F'\t' -v k="$base" '$1 == k {print $2}' "$tmp/phrases.tsv")
    if [ -n "$phrase" ] && ! grep -qF -- "$phrase" "$tmp/err"; then
        echo "$base: stderr lacks \"$phrase\":"; cat "$tmp/err"; fail=1
    fi
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no files in $NVFP4_TESTDATA/invalid"; exit 1; }
[ $fail -eq 0 ] && echo "inspect: $n invalid files rejected with exit 3"
exit $fail
