#!/usr/bin/env bash
# Every malformed file of tests/data/invalid/*.safetensors given to validate as CKPT (a single
# .safetensors file, SPEC section 2): exit 3 with an error finding safetensors.malformed whose
# message carries the parser's reason (the phrase tests/unit/test_safetensors.c pins per file).
# The committed files must be exactly what make_invalid.py writes; its well-formed seeds give
# exit 0 without findings.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
"$NVFP4_PYTHON" - "$NVFP4_SOURCE_DIR/tests/unit/test_safetensors.c" >"$tmp/phrases.tsv" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
table = src[src.index("k_invalid[] = {"):]
table = table[:table.index("};")]
for m in re.finditer(r'\{\s*"(\w+)",\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\}', table):
    phrase = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2)))
    print(f"{m.group(1)}\t{phrase.encode().decode('unicode_escape')}")
PY
# The committed files are exactly what make_invalid.py writes (run on a copy in $tmp/gen).
mkdir "$tmp/gen"
cp "$NVFP4_TESTDATA/invalid/make_invalid.py" "$tmp/gen/"
"$NVFP4_PYTHON" "$tmp/gen/make_invalid.py"
for f in "$tmp"/gen/*.safetensors "$NVFP4_TESTDATA"/invalid/*.safetensors; do
    b=$(basename "$f")
    cmp -s "$tmp/gen/$b" "$NVFP4_TESTDATA/invalid/$b" ||
        fail "tests/data/invalid/$b differs from what make_invalid.py writes (or is missing)"
done
n=0
for f in "$NVFP4_TESTDATA"/invalid/*.safetensors; do
    base=$(basename "$f" .safetensors)
    phrase=$(awk -F'\t' -v k="$base" '$1 == k {print $2}' "$tmp/phrases.tsv")
    [ -n "$phrase" ] || fail "$base: no phrase in tests/unit/test_safetensors.c"
    printf '%s\t%s\t3\tsafetensors.malformed\t-\t%s\t-\n' "$base" "$f" "$phrase" >>"$tmp/batch"
    n=$((n + 1))
done
[ "$n" -ge 50 ] || fail "only $n files in $NVFP4_TESTDATA/invalid"
# Controls: the well-formed seeds make_invalid.py writes for the fuzz corpus pass clean.
"$NVFP4_PYTHON" "$tmp/gen/make_invalid.py" --corpus "$tmp/seeds"
for v in valid_small valid_empty valid_spaces; do
    cp "$tmp/seeds/$v" "$tmp/$v.safetensors"
    printf '%s\t%s\t0\t-\t-\t-\t-\n' "$v" "$tmp/$v.safetensors" >>"$tmp/batch"
done
"$NVFP4_PYTHON" "$(dirname "$0")/check_findings.py" "$NVFP4TOOL" --batch "$tmp/batch" ||
    fail "some of the $n malformed files not reported as safetensors.malformed (above)"
echo "validate: $n malformed safetensors files give exit 3 and safetensors.malformed"
