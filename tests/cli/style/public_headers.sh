#!/usr/bin/env bash
# The public headers (lib/include/nvfp4) are the library's API (issue #10 item 6): they never
# mention cJSON (a caller gets JSON as text it frees, never a cJSON tree), and a public struct
# holds no private fields (those live in a private struct around it, defined in lib/).
set -euo pipefail
cd "$NVFP4_SOURCE_DIR/lib/include/nvfp4"
fail=0
if grep -niE 'cjson' ./*.h; then
    echo "public headers must not mention cJSON"; fail=1
fi
if grep -nE '/\*[[:space:]]*private' ./*.h; then
    echo "public structs must not hold private fields"; fail=1
fi
[ $fail -eq 0 ] && echo "public headers hold"
exit $fail
