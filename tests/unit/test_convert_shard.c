/*
 * The shard writer of convert (lib/convert/convert_shard.c): tensors written as pieces at
 * offsets, in order, in reverse and shuffled, give the same file bytes as lib/io's in-order
 * writer, and the SHA-256 and CRC-32 the writer records are those that OpenSSL and zlib compute
 * here over the file and the tensors' bytes (also when the hasher follows the writer on
 * another thread). A tensor not fully written fails the finish and
 * leaves no file; a byte written twice is refused.
 */
#include "check.h"

#include "convert/convert_internal.h"
#include "nvfp4/fileio.h"
#include "nvfp4/status.h"

#include <openssl/sha.h>
#include <zlib.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_OUT     5
#define PIECE_MAX 700000

/* Tensor 0 is large enough (33 MiB) that its CRC and the others' run as separate tasks. */
static const int64_t g_bytes[N_OUT] = {(int64_t)33 << 20, 84, 0, 12288, 5001};
static uint8_t *g_data[N_OUT];

static uint64_t g_rng = 0x9E3779B97F4A7C15u;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void make_plan(cv_plan *p, cv_out *outs, cv_shard *sh) {
    memset(p, 0, sizeof *p);
    memset(sh, 0, sizeof *sh);
    static char names[N_OUT][16];
    for (int i = 0; i < N_OUT; i++) {
        memset(&outs[i], 0, sizeof outs[i]);
        snprintf(names[i], sizeof names[i], "t%d.weight", i);
        outs[i].name = names[i];
        outs[i].dtype = NVF_DTYPE_U8;
        outs[i].ndim = 1;
        outs[i].shape[0] = g_bytes[i];
        outs[i].bytes = (uint64_t)g_bytes[i];
    }
    snprintf(sh->name, sizeof sh->name, "model-00001-of-00001.safetensors");
    sh->n_out = N_OUT;
    p->n_outs = N_OUT;
    p->outs = outs;
    p->n_shards = 1;
    p->shards = sh;
}

/* Each output's CRC-32 is zlib's over its bytes. */
static void check_crcs(const cv_out *outs) {
    for (int i = 0; i < N_OUT; i++) {
        uLong crc = crc32(0L, Z_NULL, 0);
        for (int64_t off = 0; off < g_bytes[i]; off += 1 << 20) {
            int64_t k = g_bytes[i] - off < (1 << 20) ? g_bytes[i] - off : (1 << 20);
            crc = crc32(crc, g_data[i] + off, (uInt)k);
        }
        CHECK_MSG(outs[i].crc32 == (uint32_t)crc, "tensor %d: CRC-32 %08x, zlib %08x", i,
                  outs[i].crc32, (uint32_t)crc);
    }
}

typedef struct piece {
    size_t out;
    uint64_t off, len;
} piece;

/* Every tensor cut into pieces of 1..PIECE_MAX bytes, in declaration order. */
static size_t cut(piece *ps) {
    size_t n = 0;
    for (size_t i = 0; i < N_OUT; i++)
        for (uint64_t off = 0; off < (uint64_t)g_bytes[i];) {
            uint64_t k = 1 + rnd() % PIECE_MAX;
            if (k > (uint64_t)g_bytes[i] - off)
                k = (uint64_t)g_bytes[i] - off;
            ps[n++] = (piece){i, off, k};
            off += k;
        }
    return n;
}

static char *read_file(const char *path, size_t *len) {
    char *s = NULL;
    CHECK(nvf_file_read_all(&s, len, path, (size_t)1 << 30) == NVF_OK);
    return s;
}

/* Write the pieces in the order given into dir; check the recorded hashes independently.
 * @return the file's bytes (malloc'd). */
static char *write_pieces(const char *dir, const piece *ps, size_t n, size_t *len) {
    cv_plan p;
    cv_out outs[N_OUT];
    cv_shard sh;
    make_plan(&p, outs, &sh);
    cv_writer *w = NULL;
    CHECK(cv_writer_open(&w, dir, &p, 0) == NVF_OK);
    for (size_t i = 0; i < n; i++)
        CHECK(cv_writer_write_at(w, ps[i].out, ps[i].off, g_data[ps[i].out] + ps[i].off,
                                 (size_t)ps[i].len) == NVF_OK);
    CHECK(cv_writer_close(w, &p) == NVF_OK);
    CHECK(cv_writer_finish(w, &p, NULL, NULL) == NVF_OK);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, sh.name);
    char *bytes = read_file(path, len);
    CHECK(sh.file_bytes == *len);
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)bytes, *len, md);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    CHECK(strcmp(hex, sh.sha256) == 0);
    check_crcs(outs);
    char tmp[4210];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0);
    return bytes;
}

static void test_orders(const char *dir) {
    piece *ps = malloc(4096 * sizeof *ps);
    CHECK(ps != NULL);
    size_t n = cut(ps);
    CHECK(n > 50);

    /* The reference: lib/io's in-order writer, whole tensors. */
    nvf_st_entry e[N_OUT];
    const void *d[N_OUT];
    char names[N_OUT][16];
    for (int i = 0; i < N_OUT; i++) {
        snprintf(names[i], sizeof names[i], "t%d.weight", i);
        e[i] = (nvf_st_entry){.name = names[i], .dtype = NVF_DTYPE_U8, .ndim = 1};
        e[i].shape[0] = g_bytes[i];
        d[i] = g_data[i];
    }
    char ref_path[4200];
    snprintf(ref_path, sizeof ref_path, "%s/ref.safetensors", dir);
    CHECK(nvf_st_write_file(ref_path, e, d, N_OUT) == NVF_OK);
    size_t ref_len = 0;
    char *ref = read_file(ref_path, &ref_len);

    for (int order = 0; order < 3; order++) {
        if (order == 1) /* reverse */
            for (size_t i = 0; i < n / 2; i++) {
                piece t = ps[i];
                ps[i] = ps[n - 1 - i];
                ps[n - 1 - i] = t;
            }
        if (order == 2) /* shuffled (Fisher-Yates) */
            for (size_t i = n - 1; i > 0; i--) {
                size_t k = (size_t)(rnd() % (i + 1));
                piece t = ps[i];
                ps[i] = ps[k];
                ps[k] = t;
            }
        size_t len = 0;
        char *got = write_pieces(dir, ps, n, &len);
        CHECK(len == ref_len && memcmp(got, ref, len) == 0);
        free(got);
    }
    free(ref);
    free(ps);
}

static void test_incomplete(const char *dir) {
    cv_plan p;
    cv_out outs[N_OUT];
    cv_shard sh;
    make_plan(&p, outs, &sh);
    cv_writer *w = NULL;
    CHECK(cv_writer_open(&w, dir, &p, 0) == NVF_OK);
    /* A byte written twice is refused. */
    CHECK(cv_writer_write_at(w, 1, 0, g_data[1], 84) == NVF_OK);
    CHECK(cv_writer_write_at(w, 1, 83, g_data[1] + 83, 1) == NVF_E_INVALID);
    cv_writer_abort(w);

    make_plan(&p, outs, &sh);
    CHECK(cv_writer_open(&w, dir, &p, 0) == NVF_OK);
    for (int i = 0; i < N_OUT; i++) /* all but the last byte of tensor 3 */
        CHECK(cv_writer_write_at(w, (size_t)i, 0, g_data[i], (size_t)g_bytes[i] - (i == 3)) ==
              NVF_OK);
    CHECK(cv_writer_close(w, &p) == NVF_E_INVALID);
    CHECK(strstr(nvf_error_last(), "t3.weight") != NULL);
    CHECK(cv_writer_finish(w, &p, NULL, NULL) != NVF_OK);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, sh.name);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/%s.tmp", dir, sh.name);
    CHECK(access(path, F_OK) != 0);
    /* An output of another shard is refused. */
    CHECK(cv_writer_open(&w, dir, &p, 0) == NVF_OK);
    CHECK(cv_writer_write_at(w, N_OUT, 0, g_data[0], 1) == NVF_E_INVALID);
    cv_writer_abort(w);
    CHECK(access(path, F_OK) != 0);
}

/* The writer thread of the two: pieces in order, published after each, then close (or, with
 * `cancel`, cancel halfway). */
typedef struct writer_arg {
    cv_writer *w;
    cv_plan *p;
    const piece *ps;
    size_t n;
    int cancel;
    int rc;
} writer_arg;

static void *writer_thread(void *arg) {
    writer_arg *a = arg;
    a->rc = NVF_OK;
    for (size_t i = 0; a->rc == NVF_OK && i < a->n; i++) {
        if (a->cancel && i == a->n / 2) {
            cv_writer_cancel(a->w);
            return NULL;
        }
        a->rc = cv_writer_write_at(a->w, a->ps[i].out, a->ps[i].off,
                                   g_data[a->ps[i].out] + a->ps[i].off, (size_t)a->ps[i].len);
        if (a->rc == NVF_OK)
            a->rc = cv_writer_publish(a->w, a->p);
        usleep(200);
    }
    if (a->rc == NVF_OK)
        a->rc = cv_writer_close(a->w, a->p);
    return NULL;
}

/* The hasher follows a writer on another thread: the same bytes and hashes as one thread; a
 * cancelled shard leaves no file. */
static void test_threads(const char *dir) {
    piece *ps = malloc(4096 * sizeof *ps);
    CHECK(ps != NULL);
    size_t n = cut(ps);
    size_t ref_len = 0, len = 0;
    char *ref = write_pieces(dir, ps, n, &ref_len);
    for (int cancel = 0; cancel < 2; cancel++) {
        cv_plan p;
        cv_out outs[N_OUT];
        cv_shard sh;
        make_plan(&p, outs, &sh);
        writer_arg a = {.p = &p, .ps = ps, .n = n, .cancel = cancel};
        CHECK(cv_writer_open(&a.w, dir, &p, 0) == NVF_OK);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, writer_thread, &a) == 0);
        int rc = cv_writer_finish(a.w, &p, NULL, NULL);
        pthread_join(t, NULL);
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, sh.name);
        if (cancel) {
            CHECK(rc == NVF_E_INTERRUPTED);
            CHECK(access(path, F_OK) != 0);
            continue;
        }
        CHECK(rc == NVF_OK && a.rc == NVF_OK);
        char *got = read_file(path, &len);
        CHECK(len == ref_len && memcmp(got, ref, len) == 0);
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)got, len, md);
        char hex[65];
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
        CHECK(strcmp(hex, sh.sha256) == 0);
        check_crcs(outs);
        CHECK(unlink(path) == 0);
        free(got);
    }
    free(ref);
    free(ps);
}

int main(void) {
    for (int i = 0; i < N_OUT; i++) {
        g_data[i] = malloc(g_bytes[i] ? (size_t)g_bytes[i] : 1);
        CHECK(g_data[i] != NULL);
        for (int64_t k = 0; k < g_bytes[i]; k++)
            g_data[i][k] = (uint8_t)(rnd() >> 24);
    }
    char dir[] = "/tmp/nvfp4-shard-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    test_orders(dir);
    char sub[64];
    snprintf(sub, sizeof sub, "%s/incomplete", dir);
    CHECK(mkdir(sub, 0755) == 0);
    test_incomplete(sub);
    snprintf(sub, sizeof sub, "%s/threads", dir);
    CHECK(mkdir(sub, 0755) == 0);
    test_threads(sub);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    for (int i = 0; i < N_OUT; i++)
        free(g_data[i]);
    return check_summary("convert_shard");
}
