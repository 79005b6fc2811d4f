#!/usr/bin/env bash
# ENOSPC while writing: an LD_PRELOAD shim (built here) makes write() fail with ENOSPC once
# LIMIT bytes went to files under DST. convert must exit 1 naming the file, leave no *.tmp and
# no manifest in DST, and leave SRC untouched and nothing written outside DST. Skipped without a
# C compiler.
set -euo pipefail
cc=$(command -v cc || command -v gcc || command -v clang || true)
[ -n "$cc" ] || { echo "no C compiler: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/../lib.sh"
cat >"$tmp/shim.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long long g_written;

static int under_dir(int fd) {
    const char *dir = getenv("SHIM_DIR");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (!dir || n <= 0)
        return 0;
    path[n] = '\0';
    return strncmp(path, dir, strlen(dir)) == 0;
}

ssize_t write(int fd, const void *buf, size_t len) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (under_dir(fd)) {
        if (g_written + (long long)len > atoll(getenv("SHIM_LIMIT"))) {
            errno = ENOSPC;
            return -1;
        }
        g_written += (long long)len;
    }
    return real(fd, buf, len);
}
C
"$cc" -shared -fPIC -o "$tmp/shim.so" "$tmp/shim.c" -ldl
"$NVFP4TOOL" synth "$tmp/src" --preset qwen3-moe --dtype fp8-block --hidden 256 --experts 8 \
    --quiet >/dev/null
before=$(cd "$tmp/src" && sha256sum ./* | sha256sum)
mkdir -p "$tmp/dst"
dst=$(cd "$tmp/dst" && pwd -P)
around=$(snapshot "$tmp" dst err)
for limit in 1000 300000 3000000; do
    rm -rf "${dst:?}"/* "$dst"/.nvfp4-progress.json
    rc=0
    SHIM_DIR="$dst" SHIM_LIMIT=$limit LD_PRELOAD="$tmp/shim.so" \
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
        "$NVFP4TOOL" convert "$tmp/src" "$dst" --force --quiet --max-shard-size 500KB \
        >/dev/null 2>"$tmp/err" || rc=$?
    [ $rc -eq 1 ] || { echo "limit $limit: exit $rc, expected 1" >&2; cat "$tmp/err" >&2; exit 1; }
    grep -q "No space left on device" "$tmp/err" && grep -q "$dst/" "$tmp/err" ||
        { echo "limit $limit: message does not name the file: $(cat "$tmp/err")" >&2; exit 1; }
    left=$(find "$dst" \( -name '*.tmp' -o -name nvfp4-manifest.json \) | wc -l)
    [ "$left" -eq 0 ] || { echo "limit $limit: files left" >&2; ls -la "$dst" >&2; exit 1; }
done
after=$(cd "$tmp/src" && sha256sum ./* | sha256sum)
[ "$before" = "$after" ] || { echo "source changed" >&2; exit 1; }
[ "$around" = "$(snapshot "$tmp" dst err)" ] || fail "written outside DST"
echo ok
