/*
 * LD_PRELOAD shim of tests/cli (lib.sh kill_shim): rename() to a path whose last component is
 * $KILL_AT kills the process with SIGKILL, before the rename (KILL_WHEN=before: the temporary
 * file complete, the final name absent) or right after it (KILL_WHEN=after). A deterministic
 * kill -9 at one step of the finish of a conversion (index, configs, journal, manifest).
 * With $KILL_WRITE_CHUNK, write() writes at most that many bytes a call and first sleeps
 * $KILL_WRITE_DELAY_US microseconds: a conversion slow enough for a poller to stop it at a given
 * size (callers of write() loop over short writes, as POSIX allows them).
 * With $PREAD_EIO_UNDER, pread() of a file under that directory fails with EIO (a disk error
 * while reading a source) and pread() of other files returns at most 4097 bytes a call (callers
 * loop over short reads).
 * With $REPLACE_AT_OPEN=NAME (a file name), the second open() of a file of that name first puts
 * a copy in its place (a new inode, the same bytes, renamed over it): a source file replaced
 * while a conversion runs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rename(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real)
        real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    const char *at = getenv("KILL_AT"), *when = getenv("KILL_WHEN");
    const char *base = strrchr(to, '/');
    base = base ? base + 1 : to;
    int hit = at && strcmp(base, at) == 0;
    int after = when && strcmp(when, "after") == 0;
    if (hit && !after)
        raise(SIGKILL);
    int rc = real(from, to);
    if (hit)
        raise(SIGKILL);
    return rc;
}

ssize_t write(int fd, const void *buf, size_t n) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    const char *chunk = getenv("KILL_WRITE_CHUNK"), *delay = getenv("KILL_WRITE_DELAY_US");
    if (chunk && atol(chunk) > 0) {
        if ((size_t)atol(chunk) < n)
            n = (size_t)atol(chunk);
        if (delay)
            usleep((useconds_t)atol(delay));
    }
    return real(fd, buf, n);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    static ssize_t (*real)(int, void *, size_t, off_t);
    if (!real)
        real = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    const char *under = getenv("PREAD_EIO_UNDER");
    if (under && *under) {
        char link[64], path[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(link, path, sizeof path - 1);
        if (len > 0) {
            path[len] = 0;
            if (strncmp(path, under, strlen(under)) == 0) {
                errno = EIO;
                return -1;
            }
        }
        if (n > 4097)
            n = 4097;
    }
    return real(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off) {
    return pread(fd, buf, n, off);
}

/* Copy `path` to PATH.shim and rename it over `path`. */
static void replace_file(const char *path) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.shim", path);
    FILE *in = fopen(path, "rb"), *out = fopen(tmp, "wb");
    char buf[65536];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    static int (*real_rename)(const char *, const char *);
    if (!real_rename)
        real_rename = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    real_rename(tmp, path);
}

int open(const char *path, int flags, ...) {
    static int (*real)(const char *, int, ...);
    static int opens;
    if (!real)
        real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    const char *name = getenv("REPLACE_AT_OPEN"), *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (name && strcmp(base, name) == 0 && !(flags & O_CREAT) &&
        __atomic_add_fetch(&opens, 1, __ATOMIC_SEQ_CST) == 2)
        replace_file(path);
    return real(path, flags, mode);
}
