#!/usr/bin/env bash
# lib/ckpt calls go one way (issue #10 item 6; lib/ckpt/ckpt_internal.h): ckpt_open.c and
# ckpt_nvfp4.c (reading an open checkpoint's NVFP4 weights) and ckpt_modelopt_rules.c (the ModelOpt
# config rules) on top, calling none of each other;
# ckpt_format.c, ckpt_moe.c and ckpt_plan.c below it, calling neither each other nor
# ckpt_open.c; then ckpt_naming.c, ckpt_moe_config.c and ckpt_source.c; ckpt_common.c at the
# bottom, calling none of the above.
# Functions are found by their definitions (a non-static name at the start of a line followed
# by "(" and not ending in ";") and calls by "name(" anywhere else.
set -euo pipefail
cd "$NVFP4_SOURCE_DIR/lib/ckpt"
"${NVFP4_PYTHON:-python3}" - <<'PY'
import re, sys
levels = {"ckpt_open.c": 0, "ckpt_nvfp4.c": 0, "ckpt_modelopt_rules.c": 0, "ckpt_format.c": 1, "ckpt_moe.c": 1,
          "ckpt_plan.c": 1, "ckpt_naming.c": 2, "ckpt_moe_config.c": 2, "ckpt_source.c": 2,
          "ckpt_common.c": 3}
src = {f: open(f).read() for f in levels}
define = re.compile(r"^(?!static)[A-Za-z][^;\n]*?\b((?:nvf|ckpt)_[a-z0-9_]+)\([^;]*$", re.M)
defs = {f: set(define.findall(s)) for f, s in src.items()}
fail = 0
for f, s in src.items():
    for g, names in defs.items():
        if g == f or levels[g] > levels[f]:
            continue  # calls downward are the rule
        for n in sorted(names):
            if re.search(r"\b" + n + r"\(", s):
                print(f"{f} calls {n}() of {g}: lib/ckpt calls must go one way")
                fail = 1
missing = [f for f, d in defs.items() if not d]
if missing:
    sys.exit(f"no definitions found in {missing}: the pattern is stale")
if not fail:
    print("lib/ckpt call layering holds")
sys.exit(fail)
PY
