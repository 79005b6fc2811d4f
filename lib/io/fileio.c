#include "nvfp4/fileio.h"

#include "nvfp4/status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int nvf_file_open_regular(int *fd, struct stat *st, const char *path) {
    int rc = NVF_OK;
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return nvf_error_set(NVF_E_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(*fd, st) != 0)
        rc = nvf_error_set(NVF_E_IO, "cannot stat '%s': %s", path, strerror(errno));
    else if (!S_ISREG(st->st_mode))
        rc = nvf_error_set(NVF_E_IO, "'%s' is not a regular file", path);
    if (rc != NVF_OK) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

int nvf_file_read_all(char **out, size_t *out_len, const char *path, size_t max_len) {
    char *buf = NULL;
    struct stat st;
    int fd;
    int rc = nvf_file_open_regular(&fd, &st, path);
    if (rc != NVF_OK)
        return rc;
    if ((uint64_t)st.st_size > max_len) {
        rc = nvf_error_set(NVF_E_FORMAT, "'%s' is %lld bytes, more than the %zu allowed", path,
                           (long long)st.st_size, max_len);
        goto done;
    }
    size_t len = (size_t)st.st_size;
    buf = malloc(len + 1);
    if (!buf) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for '%s' (%zu bytes)", path, len);
        goto done;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = nvf_error_set(NVF_E_IO, "cannot read '%s': %s", path,
                               r < 0 ? strerror(errno) : "file shrank while reading");
            goto done;
        }
        got += (size_t)r;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    buf = NULL;
done:
    free(buf);
    close(fd);
    return rc;
}

static int write_full(int fd, const void *data, size_t len, const char *path) {
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return nvf_error_set(NVF_E_IO, "cannot write '%s': %s", path, strerror(errno));
        p += w;
        len -= (size_t)w;
    }
    return NVF_OK;
}

int nvf_fsync_parent_dir(const char *path) {
    char *dir = strdup(path);
    if (!dir)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    if (!nvf_path_is_dir(path)) {
        char *slash = strrchr(dir, '/');
        if (!slash)
            strcpy(dir, ".");
        else if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
    }
    int rc = NVF_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0)
        rc = nvf_error_set(NVF_E_IO, "cannot fsync directory '%s': %s", dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(dir);
    return rc;
}

int nvf_file_create_tmp(const char *tmp) {
    struct stat sb;
    if (lstat(tmp, &sb) == 0 && !S_ISDIR(sb.st_mode) && unlink(tmp) != 0 && errno != ENOENT) {
        nvf_error_set(NVF_E_IO, "cannot remove the stale '%s': %s", tmp, strerror(errno));
        return -1;
    }
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        nvf_error_set(NVF_E_IO, "cannot create '%s': %s", tmp, strerror(errno));
    return fd;
}

int nvf_file_write_atomic(const char *path, const void *data, size_t len) {
    size_t n = strlen(path) + 5;
    char *tmp = malloc(n);
    if (!tmp)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    snprintf(tmp, n, "%s.tmp", path);
    int rc = NVF_OK;
    int fd = nvf_file_create_tmp(tmp);
    if (fd < 0) {
        rc = nvf_error_code();
        goto done;
    }
    rc = write_full(fd, data, len, tmp);
    if (rc == NVF_OK && fsync(fd) != 0)
        rc = nvf_error_set(NVF_E_IO, "cannot fsync '%s': %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == NVF_OK)
        rc = nvf_error_set(NVF_E_IO, "cannot close '%s': %s", tmp, strerror(errno));
    if (rc == NVF_OK && rename(tmp, path) != 0)
        rc = nvf_error_set(NVF_E_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (rc != NVF_OK)
        unlink(tmp);
    else
        rc = nvf_fsync_parent_dir(path);
done:
    free(tmp);
    return rc;
}

int nvf_mkdir_p(const char *path) {
    char *p = strdup(path);
    if (!p)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int rc = NVF_OK;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                rc =
                    nvf_error_set(NVF_E_IO, "cannot create directory '%s': %s", p, strerror(errno));
                break;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    if (rc == NVF_OK && !nvf_path_is_dir(path))
        rc = nvf_error_set(NVF_E_IO, "'%s' exists and is not a directory", path);
    free(p);
    return rc;
}

char *nvf_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *s = malloc(a + b + 2);
    if (!s)
        return NULL;
    memcpy(s, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/')
        s[k++] = '/';
    memcpy(s + k, name, b + 1);
    return s;
}

int nvf_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int nvf_path_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int nvf_file_copy(const char *dst, const char *src) {
    char *buf = NULL;
    size_t len = 0;
    /* Side files (tokenizers, chat templates) are small; 1 GiB is a sanity cap. */
    int rc = nvf_file_read_all(&buf, &len, src, (size_t)1 << 30);
    if (rc == NVF_OK)
        rc = nvf_file_write_atomic(dst, buf, len);
    free(buf);
    return rc;
}
