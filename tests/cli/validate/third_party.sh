#!/usr/bin/env bash
# A checkpoint without nvfp4-manifest.json (a third party's export: ModelOpt NVFP4 or
# compressed-tensors) is validated on everything else: exit 0 with the manifest.absent warning;
# --require-manifest makes it an error (exit 3). A directory that is no checkpoint at all, or a
# path that does not exist, is a runtime error (exit 1); a bad option a usage error (exit 2).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
T=$NVFP4TOOL

"$T" synth "$tmp/mo" --preset deepseek-v3 --dtype nvfp4 --experts 4 --quiet
"$T" synth "$tmp/ct" --preset qwen3-moe --dtype nvfp4-ct --layers 2 --experts 4 --quiet
rm "$tmp/mo/nvfp4-manifest.json"
for c in mo ct; do
    expect 0 "0 error(s), 1 warning(s): PASS" -- "$T" validate "$tmp/$c"
    grep -q "^warning  manifest.absent" "$tmp/out" || fail "$c: no manifest.absent warning"
    expect 3 "1 error(s), 0 warning(s): FAIL" -- "$T" validate "$tmp/$c" --require-manifest
    grep -q "^error    manifest.absent" "$tmp/out" || fail "$c: manifest.absent is not an error"
done
mkdir "$tmp/empty"
echo '{}' >"$tmp/empty/notes.json"
expect 1 "is not a checkpoint" -- "$T" validate "$tmp/empty"
expect 1 "cannot read" -- "$T" validate "$tmp/none"
expect 2 "unknown option '--bogus'" -- "$T" validate "$tmp/mo" --bogus
expect 2 "expected 1 argument" -- "$T" validate
expect 2 "--device takes auto or cpu" -- "$T" validate "$tmp/mo" --deep --device cuda
expect 0 "Exit codes: 0 no error finding" -- "$T" validate --help
echo "validate: third-party checkpoints pass with a warning, --require-manifest fails them"
