#!/usr/bin/env bash
# -DNVFP4_WERROR: OFF (the default, what a user's build gets) compiles without -Werror; ON (CI,
# scripts/test.sh) adds it. Checked on the compile flags CMake generates for the tool.
set -euo pipefail
command -v cmake >/dev/null || { echo "no cmake"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags() { # $1: build dir; prints the C flags of the nvfp4tool target
    grep '^C_FLAGS' "$1/CMakeFiles/nvfp4tool.dir/flags.make"
}
cmake -S "$NVFP4_SOURCE_DIR" -B "$tmp/default" -DNVFP4_CUDA=OFF -DBUILD_TESTING=OFF \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake -S "$NVFP4_SOURCE_DIR" -B "$tmp/werror" -DNVFP4_CUDA=OFF -DBUILD_TESTING=OFF \
    -DCMAKE_BUILD_TYPE=Release -DNVFP4_WERROR=ON >/dev/null
d=$(flags "$tmp/default") w=$(flags "$tmp/werror")
case " $d " in *" -Werror "*) echo "default build has -Werror: $d"; exit 1 ;; esac
case " $w " in *" -Werror "*) ;; *) echo "NVFP4_WERROR=ON lacks -Werror: $w"; exit 1 ;; esac
for f in -Wall -Wextra; do
    case " $d " in *" $f "*) ;; *) echo "default build lacks $f: $d"; exit 1 ;; esac
done
echo "NVFP4_WERROR: OFF without -Werror, ON with it"
