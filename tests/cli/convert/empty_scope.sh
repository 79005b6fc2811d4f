#!/usr/bin/env bash
# A scope that quantizes nothing is a usage error (exit 2) naming the globs, and nothing is
# written; --allow-empty converts anyway (every tensor kept or dequantized). The source's
# base_model_ep_plan loses its entries naming FP8 scale parameters ("..._scale_inv") when the
# output keeps no FP8 tensor, and keeps every other entry; with FP8 kept it keeps them all.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$NVFP4_TESTDATA/hf/qwen3moe-fp8

set +e
"$NVFP4TOOL" convert "$src" "$tmp/a" --include '*.mlp.expert.*' 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 2 ] || { echo "exit $rc, expected 2" >&2; cat "$tmp/err" >&2; exit 1; }
grep -q "nothing to quantize" "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
grep -q "'\*.mlp.expert.\*'" "$tmp/err" || { echo "glob not named" >&2; cat "$tmp/err" >&2; exit 1; }
grep -q -- "--allow-empty" "$tmp/err" || { echo "no hint" >&2; exit 1; }
[ ! -e "$tmp/a" ] || { echo "DST created" >&2; ls -la "$tmp/a" >&2; exit 1; }

# Weights in scope that cannot be quantized: the reason is given.
set +e
"$NVFP4TOOL" convert "$src" "$tmp/b" --include '*.embed_tokens.*' 2>"$tmp/err"
rc=$?
set -e
[ $rc -eq 2 ] || { echo "exit $rc, expected 2 (embedding scope)" >&2; cat "$tmp/err" >&2; exit 1; }

"$NVFP4TOOL" convert "$src" "$tmp/c" --quiet --include '*.mlp.expert.*' --allow-empty >/dev/null
"$NVFP4TOOL" hash --check "$tmp/c" --quiet
"$NVFP4_PYTHON" - "$src" "$tmp/c" <<'PY'
import json, os, sys
src, dst = sys.argv[1:]
s = json.load(open(os.path.join(src, 'config.json')))
d = json.load(open(os.path.join(dst, 'config.json')))
assert d['quantization_config']['quant_method'] == 'modelopt'
# hand-listed: the FP8 source names two scale entries; the BF16 output has no such tensor
want = {k: v for k, v in s['base_model_ep_plan'].items()
        if k not in ('layers.*.mlp.experts.down_proj_scale_inv',
                     'layers.*.mlp.experts.gate_up_proj_scale_inv')}
assert len(want) == len(s['base_model_ep_plan']) - 2, s['base_model_ep_plan']
assert d['base_model_ep_plan'] == want, d['base_model_ep_plan']
idx = json.load(open(os.path.join(dst, 'model.safetensors.index.json')))['weight_map']
assert not any(n.endswith('_scale_inv') for n in idx), 'an FP8 scale was written'
PY

# With --keep-source-precision the FP8 experts stay FP8 (MIXED_PRECISION): the plan is unchanged.
"$NVFP4TOOL" convert "$src" "$tmp/d" --quiet --include '*.mlp.expert.*' --allow-empty \
    --keep-source-precision >/dev/null
"$NVFP4_PYTHON" - "$src" "$tmp/d" <<'PY'
import json, os, sys
src, dst = sys.argv[1:]
s = json.load(open(os.path.join(src, 'config.json')))
d = json.load(open(os.path.join(dst, 'config.json')))
assert d['base_model_ep_plan'] == s['base_model_ep_plan'], d['base_model_ep_plan']
PY
echo "empty scope: exit 2 with the globs; --allow-empty converts; plans pruned"
