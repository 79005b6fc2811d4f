#!/usr/bin/env bash
# Every C, header and CUDA source is clang-format clean (the root .clang-format).
set -euo pipefail
command -v clang-format >/dev/null || { echo "clang-format not installed: skipped"; exit 77; }
cd "$NVFP4_SOURCE_DIR"
mapfile -t files < <(find cmd lib kernels tests -name '*.c' -o -name '*.h' -o -name '*.cu' \
    | grep -v '^tests/data/' | sort)
[ ${#files[@]} -gt 0 ] || { echo "no sources found"; exit 1; }
clang-format --dry-run --Werror "${files[@]}"
echo "clang-format: ${#files[@]} files clean"
