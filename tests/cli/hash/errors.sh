#!/usr/bin/env bash
# Errors and preserved fields: --check without a manifest or with a malformed one exits 3
# naming it; a CKPT that is not a directory is a usage error (2), one that is missing an I/O
# error (1, issue #11 item 12, more in io_errors.sh); `hash` over an existing
# manifest keeps its recipe, target, source and summary and replaces files and tensors, and
# refuses (exit 3) to overwrite a malformed one.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ck="$tmp/ck"
mkdir "$ck"
echo '{"a": 1}' >"$ck/config.json"

run() { # run WANT_EXIT ARGS... -> $tmp/out, $tmp/err
    local want=$1
    shift
    set +e
    "$NVFP4TOOL" hash "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    set -e
    [ "$rc" = "$want" ] || { echo "hash $*: exit $rc, expected $want" >&2;
        cat "$tmp/out" "$tmp/err" >&2; exit 1; }
}
err_has() {
    grep -qF -- "$1" "$tmp/err" || { echo "stderr lacks '$1':" >&2; cat "$tmp/err" >&2; exit 1; }
}

run 3 --check "$ck"
err_has "no manifest '$ck/nvfp4-manifest.json'"
run 2 "$ck/config.json"
err_has "is not a checkpoint directory"
run 1 --check "$tmp/nothing"
err_has "cannot open checkpoint directory '$tmp/nothing'"
run 2 "$ck" --bogus

echo '{"manifest_version": 1,' >"$ck/nvfp4-manifest.json"
run 3 --check "$ck"
err_has "invalid manifest '$ck/nvfp4-manifest.json': not valid JSON"
run 3 "$ck"
err_has "invalid manifest '$ck/nvfp4-manifest.json'"

# A manifest as convert writes it, with a stale file list: hash keeps everything else.
sha=$(printf '%064d' 0)
cat >"$ck/nvfp4-manifest.json" <<JSON
{"manifest_version": 1, "tool": {"name": "nvfp4tool", "version": "0.0.1"},
 "recipe": {"quant": {"method": "rtn"}}, "target": {"format": "modelopt", "layout": null},
 "source": {"files": [{"name": "model.safetensors", "bytes": 5, "sha256": "$sha"}]},
 "files": [{"name": "gone.json", "bytes": 5, "sha256": "$sha"}], "tensors": [],
 "summary": {"tensors_converted": 3}}
JSON
run 3 --check "$ck" --quiet
grep -qxF "MISSING gone.json" "$tmp/out"
grep -qxF "EXTRA config.json" "$tmp/out"
run 0 "$ck" --quiet
run 0 --check "$ck" --quiet
"$NVFP4_PYTHON" - "$ck/nvfp4-manifest.json" "$sha" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["recipe"] == {"quant": {"method": "rtn"}}, m
assert m["target"] == {"format": "modelopt", "layout": None}, m
assert m["source"]["files"] == [{"name": "model.safetensors", "bytes": 5,
                                  "sha256": sys.argv[2]}], m
assert m["summary"] == {"tensors_converted": 3}, m
assert [f["name"] for f in m["files"]] == ["config.json"], m
assert m["tool"]["version"] != "0.0.1", m
PY

# A malformed .safetensors file cannot be hashed tensor by tensor: a format error naming it.
printf 'not a safetensors file' >"$ck/model.safetensors"
run 3 "$ck"
err_has "model.safetensors"
echo ok
