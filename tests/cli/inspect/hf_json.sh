#!/usr/bin/env bash
# inspect --json on the transformers-written checkpoints of tests/data/hf: the report validates
# against schemas/inspect.schema.json, and its numbers match what a Python reader of the
# safetensors headers and config.json computes on its own (default scope and --include '*').
set -euo pipefail
if ! "$NVFP4_PYTHON" -c 'import jsonschema' 2>/dev/null; then
    echo "python3 jsonschema missing (scripts/deps.sh installs python3-jsonschema)" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for dir in "$NVFP4_TESTDATA"/hf/*/; do
    dir=${dir%/}
    [ -f "$dir/config.json" ] || continue
    name=$(basename "$dir")
    "$NVFP4TOOL" inspect "$dir" --json >"$tmp/$name.default.json"
    "$NVFP4TOOL" inspect "$dir" --json --include '*' --exclude '*.mlp.gate.*' \
        >"$tmp/$name.all.json"
    "$NVFP4TOOL" inspect "$dir" --json --summary >"$tmp/$name.summary.json"
    "$NVFP4_PYTHON" "$(dirname "$0")/check_inspect.py" "$dir" "$tmp/$name" \
        "$NVFP4_SCHEMAS/inspect.schema.json"
    n=$((n + 1))
done
[ "$n" -ge 4 ] || { echo "expected the 4 fixtures of tests/data/hf, found $n"; exit 1; }
echo "inspect --json: $n checkpoints match"
