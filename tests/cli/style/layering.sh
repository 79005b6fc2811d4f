#!/usr/bin/env bash
# The dependency rules of the README: cmd/ includes only the public headers (lib/include/nvfp4)
# and its own; kernels/ never includes cmd/; lib/ never writes to stdout and never exits;
# lib/core depends on nothing else in the project. The build enforces the module graph itself
# (per-module include paths, cmake/check_layering.cmake on the objects); this catches what an
# include path cannot: a relative path that climbs out of a module, and the output rules.
set -euo pipefail
cd "$NVFP4_SOURCE_DIR"
fail=0
if grep -nE '#include "(\.\./)*(lib|kernels)/' cmd/*.c cmd/*.h; then
    echo "cmd/ must include only nvfp4/*.h"; fail=1
fi
if grep -rnE '#include ".*cmd/' kernels lib; then
    echo "kernels/ and lib/ must not include cmd/"; fail=1
fi
if grep -rnE '\b(printf|puts|putchar|exit|_exit|abort)\s*\(|\bstdout\b' lib --include='*.c' \
    | grep -vE '(snprintf|vsnprintf|fprintf\(stderr)'; then
    echo "lib/ must not print to stdout or exit"; fail=1
fi
if grep -rnE '#include "\.\./' lib kernels; then
    echo "lib/ and kernels/ must not include by a path that climbs out of their directory"; fail=1
fi
if grep -nE '#include "' kernels/*.cu kernels/*.h kernels/export/kernels/*.h \
    | grep -vE '#include "(nvfp4/|kernels/)?[a-z_]+\.h"'; then
    echo "kernels/ may include only nvfp4/*.h and its own headers"; fail=1
fi
if grep -nE '#include "nvfp4/' lib/core/*.c | grep -vE 'nvfp4/(status|log|dtype|version|format|pool|finding)\.h'; then
    echo "lib/core may include only the core headers"; fail=1
fi
[ $fail -eq 0 ] && echo "layering rules hold"
exit $fail
