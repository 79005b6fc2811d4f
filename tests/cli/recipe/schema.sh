#!/usr/bin/env bash
# Every recipe in tests/data/recipes: good-*.yaml are accepted by the tool, and both the file
# (loaded with Python's yaml) and the tool's effective recipe validate against
# schemas/recipe.schema.json; bad-*.yaml are rejected with exit 2 and the FILE:LINE:COL and
# message written in their first line, and fail the schema too.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$NVFP4_PYTHON" -c 'import yaml, jsonschema' 2>/dev/null; then
    echo "python3 yaml/jsonschema missing" >&2
    exit 77
fi
validate() { # validate FILE.json-or-yaml -> exit 0 valid, 1 invalid
    "$NVFP4_PYTHON" - "$NVFP4_SCHEMAS/recipe.schema.json" "$1" <<'PY'
import json, sys, yaml, jsonschema
schema = json.load(open(sys.argv[1]))
try:
    doc = yaml.safe_load(open(sys.argv[2]))
except yaml.YAMLError:
    sys.exit(1)
if doc is None:
    doc = {}
v = jsonschema.Draft202012Validator(schema)
sys.exit(0 if v.is_valid(doc) else 1)
PY
}
n=0
for f in "$NVFP4_TESTDATA"/recipes/good-*.yaml; do
    "$NVFP4TOOL" quantize --print-recipe --recipe "$f" >"$tmp/eff.json" ||
        { echo "tool rejected $f" >&2; exit 1; }
    validate "$f" || { echo "schema rejects $f" >&2; exit 1; }
    validate "$tmp/eff.json" || { echo "schema rejects the effective recipe of $f" >&2; exit 1; }
    n=$((n + 1))
done
for f in "$NVFP4_TESTDATA"/recipes/bad-*.yaml; do
    want=$(head -1 "$f" | sed -n 's/^# error: \([0-9]*:[0-9]*\) \(.*\)$/\1|\2/p')
    [ -n "$want" ] || { echo "$f: first line must be '# error: LINE:COL MESSAGE'" >&2; exit 1; }
    where=${want%%|*}
    what=${want#*|}
    set +e
    "$NVFP4TOOL" quantize --print-recipe --recipe "$f" >/dev/null 2>"$tmp/err"
    rc=$?
    set -e
    [ "$rc" = 2 ] || { echo "$f: exit $rc, expected 2" >&2; cat "$tmp/err" >&2; exit 1; }
    grep -qF -- "$f:$where: $what" "$tmp/err" ||
        { echo "$f: expected '$f:$where: $what', got:" >&2; cat "$tmp/err" >&2; exit 1; }
    if validate "$f"; then
        echo "schema accepts $f, which the tool rejects" >&2
        exit 1
    fi
    n=$((n + 1))
done
echo "ok: $n recipes"
