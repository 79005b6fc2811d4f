/*
 * SHA-256 through OpenSSL's EVP interface and zlib's CRC-32, both fed in chunks so that files
 * of hundreds of GB are hashed with a fixed, small buffer.
 */
#include "manifest_internal.h"
#include "nvfp4/fileio.h"
#include "nvfp4/manifest.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

struct nvf_sha256 {
    EVP_MD_CTX *ctx;
    int started; /* EVP_DigestInit_ex done since the last final */
};

static int sha_start(nvf_sha256 *h) {
    if (h->started)
        return NVF_OK;
    if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
        return nvf_error_set(NVF_E_NOMEM, "OpenSSL could not start a SHA-256 digest");
    h->started = 1;
    return NVF_OK;
}

nvf_sha256 *nvf_sha256_new(void) {
    nvf_sha256 *h = calloc(1, sizeof *h);
    if (h)
        h->ctx = EVP_MD_CTX_new();
    if (!h || !h->ctx || sha_start(h) != NVF_OK) {
        nvf_sha256_free(h);
        nvf_error_set(NVF_E_NOMEM, "no memory for a SHA-256 context");
        return NULL;
    }
    return h;
}

int nvf_sha256_update(nvf_sha256 *h, const void *data, size_t len) {
    int rc = sha_start(h);
    if (rc != NVF_OK)
        return rc;
    if (len > 0 && EVP_DigestUpdate(h->ctx, data, len) != 1)
        return nvf_error_set(NVF_E_INVALID, "OpenSSL SHA-256 update failed");
    return NVF_OK;
}

int nvf_sha256_final(nvf_sha256 *h, char out[65]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    int rc = sha_start(h);
    if (rc != NVF_OK)
        return rc;
    h->started = 0;
    if (EVP_DigestFinal_ex(h->ctx, md, &n) != 1 || n != 32)
        return nvf_error_set(NVF_E_INVALID, "OpenSSL SHA-256 final failed");
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
    return NVF_OK;
}

void nvf_sha256_free(nvf_sha256 *h) {
    if (!h)
        return;
    EVP_MD_CTX_free(h->ctx);
    free(h);
}

uint32_t nvf_crc32(uint32_t crc, const void *data, size_t len) {
    const Bytef *p = data;
    uLong c = crc;
    while (len > 0) {
        uInt n = len > (size_t)1 << 30 ? (uInt)1 << 30 : (uInt)len;
        c = crc32(c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
}

void nvf_hash_tensors_feed(nvf_hash_tensors *t, const uint8_t *p, uint64_t at, size_t len) {
    /* The tensors are in data-offset order and tile the data area: a cursor moves forward. */
    uint64_t end = at + len;
    while (t->cursor < t->n && at < end) {
        size_t i = t->cursor;
        if (t->end[i] <= at) {
            t->cursor++;
            continue;
        }
        uint64_t e = t->end[i] < end ? t->end[i] : end;
        if (t->begin[i] <= at) {
            t->crc[i] = nvf_crc32(t->crc[i], p, (size_t)(e - at));
            p += e - at;
            at = e;
        } else {
            /* A gap cannot occur in a validated file; step over it anyway. */
            uint64_t skip = t->begin[i] < end ? t->begin[i] - at : end - at;
            p += skip;
            at += skip;
        }
    }
}

int nvf_hash_file_ex(char out[65], uint64_t *out_bytes, const char *path, nvf_hash_tensors *t,
                     nvf_hash_chunk_fn on_chunk, void *user) {
    int fd;
    struct stat st;
    int rc = nvf_file_open_regular(&fd, &st, path);
    if (rc != NVF_OK)
        return rc;
    rc = nvf_hash_fd_ex(out, out_bytes, fd, path, t, on_chunk, user);
    close(fd);
    return rc;
}

int nvf_hash_fd_ex(char out[65], uint64_t *out_bytes, int fd, const char *path, nvf_hash_tensors *t,
                   nvf_hash_chunk_fn on_chunk, void *user) {
    int rc = NVF_OK;
    uint8_t *buf = NULL;
    nvf_sha256 *h = NULL;
#ifdef POSIX_FADV_SEQUENTIAL
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    buf = malloc(NVF_HASH_READ);
    h = nvf_sha256_new();
    if (!buf || !h) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to hash '%s'", path);
        goto done;
    }
    uint64_t total = 0, told = 0; /* bytes told to on_chunk so far */
    for (;;) {
        ssize_t r = read(fd, buf, NVF_HASH_READ);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = nvf_error_set(NVF_E_IO, "cannot read '%s' at byte %llu: %s", path,
                               (unsigned long long)total, strerror(errno));
            goto done;
        }
        if (r == 0) {
            if (on_chunk && total > told && on_chunk(user, total - told) != 0) {
                rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted while hashing '%s'", path);
                goto done;
            }
            break;
        }
        rc = nvf_sha256_update(h, buf, (size_t)r);
        if (rc != NVF_OK)
            goto done;
        if (t && total + (uint64_t)r > t->data_start) {
            uint64_t skip = total < t->data_start ? t->data_start - total : 0;
            nvf_hash_tensors_feed(t, buf + skip, total + skip - t->data_start,
                                  (size_t)r - (size_t)skip);
        }
        total += (uint64_t)r;
        if (on_chunk && total - told >= NVF_HASH_CHUNK) {
            uint64_t news = total - told;
            told = total;
            if (on_chunk(user, news) != 0) {
                rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted while hashing '%s'", path);
                goto done;
            }
        }
    }
    rc = nvf_sha256_final(h, out);
    if (rc == NVF_OK && out_bytes)
        *out_bytes = total;
done:
    nvf_sha256_free(h);
    free(buf);
    /* Files are hashed on the core pool, whose threads outlive the call: give back OpenSSL's
     * per-thread state now (made again on the next use), as a thread that ends would. */
    OPENSSL_thread_stop();
    return rc;
}

int nvf_sha256_file(char out[65], uint64_t *out_bytes, const char *path) {
    return nvf_hash_file_ex(out, out_bytes, path, NULL, NULL, NULL);
}
