/*
 * safetensors reader and writer: round trips over every kind of tensor, the writer's header
 * against one written out by hand, a Python stdlib reader agreeing with the written files,
 * streaming and its failures (ENOSPC from an interposed write(), a missing directory), and every
 * malformed file of tests/data/invalid/ rejected with its own message.
 */
#define _GNU_SOURCE
#include "check.h"

#include "io/st_file.h"
#include "io/st_json.h"
#include "manifest/hash_file.h"
#include "nvfp4/fileio.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static char *tmp_path(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

/* The writer's header for two tensors, compared byte for byte with one written by hand:
 * the JSON text is 32 + 53 + 57 = 142 bytes, 8 + 142 = 150, so 2 spaces make N = 144. */
static void test_header_bytes(void) {
    const char *path = tmp_path("hdr.safetensors");
    nvf_st_entry e[2] = {{.name = "a", .dtype = NVF_DTYPE_F32, .ndim = 1, .shape = {2}},
                         {.name = "b\"q", .dtype = NVF_DTYPE_BF16, .ndim = 0}};
    const uint8_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[2] = {9, 10};
    const void *data[2] = {a, b};
    CHECK(nvf_st_write_file(path, e, data, 2) == NVF_OK);
    const char *json = "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\\\"q\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[8,10]}}"
                       "  ";
    CHECK_EQ_U64(strlen(json), 144);
    uint8_t expect[8 + 144 + 10] = {144, 0, 0, 0, 0, 0, 0, 0};
    memcpy(expect + 8, json, 144);
    memcpy(expect + 152, a, 8);
    memcpy(expect + 160, b, 2);
    size_t len = 0;
    uint8_t *got = read_file(path, &len);
    CHECK_EQ_U64(len, sizeof expect);
    CHECK(got && len == sizeof expect && memcmp(got, expect, len) == 0);
    free(got);
    CHECK(!exists(tmp_path("hdr.safetensors.tmp")));
}

typedef struct tcase {
    const char *name;
    nvf_dtype dtype;
    int ndim;
    int64_t shape[4];
    uint64_t bytes; /* worked out by hand */
} tcase;

static const tcase k_cases[] = {
    {"model.layers.0.w", NVF_DTYPE_BF16, 2, {3, 5}, 30},
    {"fp4.packed", NVF_DTYPE_F4, 2, {3, 2}, 3},
    {"scalar", NVF_DTYPE_F32, 0, {0}, 4},
    {"empty", NVF_DTYPE_BF16, 2, {0, 4}, 0},
    {"mask", NVF_DTYPE_BOOL, 1, {5}, 5},
    {"big.u64", NVF_DTYPE_U64, 1, {3}, 24},
    {"scales", NVF_DTYPE_F8_E4M3, 3, {2, 2, 3}, 12},
    {"e8m0", NVF_DTYPE_F8_E8M0, 1, {7}, 7},
    {"f6", NVF_DTYPE_F6_E2M3, 1, {4}, 3},
    {"i16", NVF_DTYPE_I16, 4, {1, 1, 1, 3}, 6},
    {"c64", NVF_DTYPE_C64, 1, {2}, 16},
    {"f64", NVF_DTYPE_F64, 1, {1}, 8},
    {"empty.scalar.neighbour", NVF_DTYPE_U8, 1, {0}, 0},
    {"unicode.\xc3\xa9\xe2\x82\xac", NVF_DTYPE_I32, 1, {2}, 8},
};
#define N_CASES (sizeof k_cases / sizeof k_cases[0])

static uint8_t pattern(size_t t, uint64_t i) {
    return (uint8_t)(t * 37 + i * 11 + 1);
}

/* Write the cases in streaming chunks of `chunk` bytes, read back, compare everything. */
static void test_round_trip(size_t chunk) {
    const char *path = tmp_path("rt.safetensors");
    nvf_st_entry e[N_CASES];
    memset(e, 0, sizeof e);
    uint64_t total = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        e[i].name = k_cases[i].name;
        e[i].dtype = k_cases[i].dtype;
        e[i].ndim = k_cases[i].ndim;
        memcpy(e[i].shape, k_cases[i].shape, sizeof k_cases[i].shape);
        total += k_cases[i].bytes;
    }
    const char *mk[2] = {"producer", "quote\"key"}, *mv[2] = {"nvfp4tool", "line\nbreak"};
    nvf_st_writer *w = NULL;
    CHECK(nvf_st_writer_open(&w, path, e, N_CASES, mk, mv, 2) == NVF_OK);
    if (!w)
        return;
    CHECK_EQ_U64(nvf_st_writer_data_size(w), total);
    uint8_t *all = malloc(total);
    uint64_t k = 0;
    for (size_t t = 0; t < N_CASES; t++)
        for (uint64_t i = 0; i < k_cases[t].bytes; i++)
            all[k++] = pattern(t, i);
    for (uint64_t off = 0; off < total; off += chunk) {
        size_t n = total - off < chunk ? (size_t)(total - off) : chunk;
        CHECK(nvf_st_writer_write(w, all + off, n) == NVF_OK);
    }
    uint64_t declared = nvf_st_writer_file_size(w);
    CHECK(nvf_st_writer_finish(w) == NVF_OK);
    CHECK_EQ_U64(file_size(path), declared);

    nvf_st_file *f = NULL;
    CHECK_MSG(nvf_st_open(&f, path) == NVF_OK, "%s", nvf_error_last());
    if (!f) {
        free(all);
        return;
    }
    CHECK_EQ_U64(f->data_start % 8, 0);
    CHECK_EQ_U64(f->data_start, 8 + f->header_len);
    CHECK_EQ_U64(f->file_size, f->data_start + total);
    CHECK_EQ_U64(f->n_tensors, N_CASES);
    CHECK_EQ_STR(nvf_st_meta(f, "format"), "pt");
    CHECK_EQ_STR(nvf_st_meta(f, "producer"), "nvfp4tool");
    CHECK_EQ_STR(nvf_st_meta(f, "quote\"key"), "line\nbreak");
    CHECK(nvf_st_meta(f, "absent") == NULL);
    CHECK_EQ_U64(f->n_meta, 3);
    uint64_t begin = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        const tcase *c = &k_cases[i];
        const nvf_st_tensor *t = nvf_st_find(f, c->name);
        CHECK_MSG(t != NULL, "tensor %s", c->name);
        if (!t)
            continue;
        CHECK_EQ_STR(t->name, c->name);
        CHECK_EQ_U64(t->dtype, c->dtype);
        CHECK_EQ_U64(t->ndim, c->ndim);
        uint64_t numel = 1;
        for (int d = 0; d < c->ndim; d++) {
            CHECK_EQ_U64(t->shape[d], c->shape[d]);
            numel *= (uint64_t)c->shape[d];
        }
        CHECK_EQ_U64(t->numel, numel);
        /* Offsets are consecutive in declaration order. */
        CHECK_EQ_U64(t->begin, begin);
        CHECK_EQ_U64(t->end, begin + c->bytes);
        CHECK(t->data == (const uint8_t *)nvf_st_priv_of(f)->map + f->data_start + begin);
        int same = 1;
        for (uint64_t b = 0; b < c->bytes; b++)
            same &= t->data[b] == pattern(i, b);
        CHECK_MSG(same, "bytes of %s", c->name);
        begin += c->bytes;
    }
    /* tensors[] is in offset order. */
    for (size_t i = 1; i < f->n_tensors; i++)
        CHECK(f->tensors[i - 1].begin <= f->tensors[i].begin);
    CHECK(nvf_st_find(f, "missing") == NULL);
    CHECK(nvf_st_find(f, "") == NULL);
    nvf_st_close(f);
    free(all);
}

/* A second reader, written with Python's stdlib, must agree with the file the writer made. */
static void test_python_agrees(void) {
    const char *py = getenv("NVFP4_PYTHON");
    if (!py || access(py, X_OK) != 0) {
        printf("python reader: skipped (NVFP4_PYTHON not set)\n");
        return;
    }
    const char *path = tmp_path("py.safetensors");
    nvf_st_entry e[3] = {
        {.name = "w", .dtype = NVF_DTYPE_BF16, .ndim = 2, .shape = {2, 3}},
        {.name = "s\xc3\xa9", .dtype = NVF_DTYPE_F32, .ndim = 0},
        {.name = "p", .dtype = NVF_DTYPE_F4, .ndim = 1, .shape = {6}},
    };
    uint8_t w[12], s[4] = {0, 0, 128, 63}, p[3] = {0x21, 0x43, 0x65};
    for (int i = 0; i < 12; i++)
        w[i] = (uint8_t)(i * 7);
    const void *data[3] = {w, s, p};
    CHECK(nvf_st_write_file(path, e, data, 3) == NVF_OK);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s -c 'import json,struct,sys\n"
             "b=open(sys.argv[1],\"rb\").read()\n"
             "n=struct.unpack(\"<Q\",b[:8])[0]\n"
             "h=json.loads(b[8:8+n].decode(\"utf-8\"))\n"
             "d=b[8+n:]\n"
             "print((8+n)%%8, len(d), h.pop(\"__metadata__\"))\n"
             "for k,v in h.items():\n"
             "  s,e=v[\"data_offsets\"]\n"
             "  print(k.encode(\"unicode_escape\").decode(), v[\"dtype\"], v[\"shape\"], s, e, "
             "sum(d[s:e]))\n"
             "' %s",
             py, path);
    FILE *pp = popen(cmd, "r");
    char out[1024] = {0};
    size_t n = pp ? fread(out, 1, sizeof out - 1, pp) : 0;
    if (pp)
        pclose(pp);
    out[n] = '\0';
    /* w's bytes sum to 7 * (0 + ... + 11) = 462; s: 128 + 63 = 191; p: 0x21+0x43+0x65 = 201. */
    CHECK_EQ_STR(out, "0 19 {'format': 'pt'}\n"
                      "w BF16 [2, 3] 0 12 462\n"
                      "s\\xe9 F32 [] 12 16 191\n"
                      "p F4 [6] 16 19 201\n");
}

/* A file made of many tiny chunks and chunks larger than the writer's 4 MiB buffer. */
static void test_streaming_large(void) {
    const char *path = tmp_path("big.safetensors");
    nvf_st_entry e[2] = {{.name = "a", .dtype = NVF_DTYPE_U8, .ndim = 1, .shape = {5000001}},
                         {.name = "b", .dtype = NVF_DTYPE_U16, .ndim = 2, .shape = {1500, 2000}}};
    size_t na = 5000001, nb = 6000000;
    uint8_t *buf = malloc(nb);
    for (size_t i = 0; i < nb; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    nvf_st_writer *w = NULL;
    CHECK(nvf_st_writer_open(&w, path, e, 2, NULL, NULL, 0) == NVF_OK);
    if (!w) {
        free(buf);
        return;
    }
    /* a: 1-byte chunks for the first 1000 bytes, then one big chunk. */
    for (size_t i = 0; i < 1000; i++)
        CHECK(nvf_st_writer_write(w, buf + i, 1) == NVF_OK);
    CHECK(nvf_st_writer_write(w, buf + 1000, na - 1000) == NVF_OK);
    /* b: the 6 MB chunk first tops up the buffer, then what remains (over 4 MiB) goes straight
     * to the file. An empty chunk is fine. */
    CHECK(nvf_st_writer_write(w, buf, 3) == NVF_OK);
    CHECK(nvf_st_writer_write(w, buf + 3, nb - 3) == NVF_OK);
    CHECK(nvf_st_writer_write(w, buf, 0) == NVF_OK);
    CHECK_EQ_U64(nvf_st_writer_data_size(w), na + nb);
    CHECK(nvf_st_writer_finish(w) == NVF_OK);
    nvf_st_file *f = NULL;
    CHECK(nvf_st_open(&f, path) == NVF_OK);
    if (f) {
        const nvf_st_tensor *a = nvf_st_find(f, "a"), *b = nvf_st_find(f, "b");
        CHECK(a && b && a->end - a->begin == na && b->end - b->begin == nb);
        CHECK(a && memcmp(a->data, buf, na) == 0);
        CHECK(b && memcmp(b->data, buf, nb) == 0);
        CHECK_EQ_U64(f->file_size, f->data_start + na + nb);
        nvf_st_close(f);
    }
    free(buf);
    unlink(path);
}

static void test_writer_misuse(void) {
    const char *path = tmp_path("bad.safetensors");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    nvf_st_writer *w = NULL;
    nvf_st_entry dup[2] = {{.name = "x", .dtype = NVF_DTYPE_U8, .ndim = 1, .shape = {1}},
                           {.name = "x", .dtype = NVF_DTYPE_U8, .ndim = 1, .shape = {1}}};
    CHECK(nvf_st_writer_open(&w, path, dup, 2, NULL, NULL, 0) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "duplicate tensor name 'x'");
    CHECK(w == NULL && !exists(path) && !exists(tmp));

    const char *mk[1] = {"format"}, *mv[1] = {"np"};
    CHECK(nvf_st_writer_open(&w, path, dup, 1, mk, mv, 1) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "duplicate metadata key 'format'");

    nvf_st_entry odd = {.name = "f4", .dtype = NVF_DTYPE_F4, .ndim = 1, .shape = {3}};
    CHECK(nvf_st_writer_open(&w, path, &odd, 1, NULL, NULL, 0) == NVF_E_SHAPE);
    nvf_st_entry neg = {.name = "n", .dtype = NVF_DTYPE_U8, .ndim = 1, .shape = {-1}};
    CHECK(nvf_st_writer_open(&w, path, &neg, 1, NULL, NULL, 0) == NVF_E_INVALID);
    nvf_st_entry badname = {.name = "bad\xff", .dtype = NVF_DTYPE_U8, .ndim = 0};
    CHECK(nvf_st_writer_open(&w, path, &badname, 1, NULL, NULL, 0) == NVF_E_INVALID);
    CHECK(!exists(path) && !exists(tmp));

    /* Too many bytes, then too few. */
    uint8_t data[4] = {0};
    CHECK(nvf_st_writer_open(&w, path, dup, 1, NULL, NULL, 0) == NVF_OK);
    CHECK(exists(tmp));
    CHECK(nvf_st_writer_write(w, data, 2) == NVF_E_INVALID);
    CHECK(nvf_st_writer_finish(w) == NVF_E_INVALID);
    CHECK(!exists(path) && !exists(tmp));
    CHECK(nvf_st_writer_open(&w, path, dup, 1, NULL, NULL, 0) == NVF_OK);
    CHECK(nvf_st_writer_finish(w) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "only 0 of the 1 data bytes");
    CHECK(!exists(path) && !exists(tmp));

    /* Abort leaves nothing; NULL is fine. */
    CHECK(nvf_st_writer_open(&w, path, dup, 1, NULL, NULL, 0) == NVF_OK);
    CHECK(nvf_st_writer_write(w, data, 1) == NVF_OK);
    nvf_st_writer_abort(w);
    nvf_st_writer_abort(NULL);
    nvf_st_close(NULL);
    CHECK(!exists(path) && !exists(tmp));

    /* Zero tensors: a header and nothing else. */
    CHECK(nvf_st_write_file(path, NULL, NULL, 0) == NVF_OK);
    nvf_st_file *f = NULL;
    CHECK(nvf_st_open(&f, path) == NVF_OK);
    CHECK(f && f->n_tensors == 0 && f->file_size == f->data_start);
    nvf_st_close(f);
    unlink(path);
}

/* ENOSPC: this executable's write() fails with ENOSPC for any file whose name ends in
 * "full.safetensors.tmp" (the library's writers call write(), which resolves here first). A
 * symlink to /dev/full no longer works: the writer removes a stale PATH.tmp and creates it
 * with O_EXCL|O_NOFOLLOW. */
static int fd_is_full(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return 0;
    path[n] = '\0';
    const char *suffix = "full.safetensors.tmp";
    size_t ls = strlen(suffix);
    return (size_t)n >= ls && strcmp(path + n - ls, suffix) == 0;
}

ssize_t write(int fd, const void *buf, size_t len) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "write");
    if (fd_is_full(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, buf, len);
}

static void test_writer_io_errors(void) {
    {
        const char *path = tmp_path("full.safetensors");
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        /* Small file: everything is buffered, the failure comes at finish. */
        nvf_st_entry e = {.name = "x", .dtype = NVF_DTYPE_U8, .ndim = 1, .shape = {16}};
        uint8_t data[16] = {0};
        const void *dp[1] = {data};
        CHECK(nvf_st_write_file(path, &e, dp, 1) == NVF_E_IO);
        CHECK_CONTAINS(nvf_error_last(), "full.safetensors");
        CHECK_CONTAINS(nvf_error_last(), "No space left on device");
        CHECK(!exists(path));
        CHECK(access(tmp, F_OK) != 0 && errno == ENOENT);

        /* Large chunk: the failure comes at write, later calls keep failing. */
        nvf_st_entry big = {.name = "x", .dtype = NVF_DTYPE_U8, .ndim = 1, .shape = {8 << 20}};
        uint8_t *buf = calloc(8 << 20, 1);
        nvf_st_writer *w = NULL;
        CHECK(nvf_st_writer_open(&w, path, &big, 1, NULL, NULL, 0) == NVF_OK);
        if (w) {
            CHECK(nvf_st_writer_write(w, buf, 8 << 20) == NVF_E_IO);
            CHECK_CONTAINS(nvf_error_last(), "No space left on device");
            CHECK(nvf_st_writer_write(w, buf, 1) == NVF_E_IO);
            CHECK(nvf_st_writer_finish(w) == NVF_E_IO);
        }
        free(buf);
        CHECK(!exists(path));
        CHECK(access(tmp, F_OK) != 0);
    }
    const char *nodir = tmp_path("no/such/dir/x.safetensors");
    nvf_st_writer *w = NULL;
    nvf_st_entry e = {.name = "x", .dtype = NVF_DTYPE_U8, .ndim = 0};
    CHECK(nvf_st_writer_open(&w, nodir, &e, 1, NULL, NULL, 0) == NVF_E_IO);
    CHECK_CONTAINS(nvf_error_last(), "x.safetensors.tmp");
    CHECK_CONTAINS(nvf_error_last(), "No such file or directory");
    CHECK(w == NULL);

    nvf_st_file *f = NULL;
    CHECK(nvf_st_open(&f, tmp_path("absent.safetensors")) == NVF_E_IO);
    CHECK_CONTAINS(nvf_error_last(), "No such file or directory");
    CHECK(nvf_st_open(&f, g_dir) == NVF_E_IO);
    CHECK(f == NULL);
}

/* Parsing from a buffer: what the fuzz target sees. */
static int parse_buf(const char *header, size_t data_len) {
    size_t hn = strlen(header), len = 8 + hn + data_len;
    uint8_t *buf = calloc(len, 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)hn >> (8 * i));
    memcpy(buf + 8, header, hn);
    nvf_st_file *f = NULL;
    int rc = nvf_st_parse(&f, "buf", buf, len, len);
    if (rc == NVF_OK) {
        for (size_t i = 0; i < f->n_tensors; i++)
            CHECK(f->tensors[i].data == NULL);
    }
    nvf_st_close(f);
    free(buf);
    return rc;
}

static void test_parse_buffer(void) {
    CHECK(parse_buf("{}", 0) == NVF_OK);
    CHECK(parse_buf(" \t\r\n{}\n  ", 0) == NVF_OK);
    CHECK(parse_buf("{\"__metadata__\":{}}", 0) == NVF_OK);
    CHECK(parse_buf("{\"a\":{\"data_offsets\":[0,2],\"shape\":[1],\"dtype\":\"BF16\"}}", 2) ==
          NVF_OK);
    /* Zero-size tensors at the start, between and at the end of the data area. */
    CHECK(parse_buf("{\"z0\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
                    "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                    "\"z1\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[2,2]},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
                    "\"z2\":{\"dtype\":\"U8\",\"shape\":[0,7],\"data_offsets\":[3,3]}}",
                    3) == NVF_OK);
    /* A zero dimension after a would-be overflow: the product is 0. */
    CHECK(parse_buf("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],"
                    "\"data_offsets\":[0,0]}}",
                    0) == NVF_OK);
    /* Escaped characters in names are decoded. */
    nvf_st_file *f = NULL;
    const char *h = "{\"a\\u00e9\\n\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}";
    uint8_t buf[128] = {0};
    buf[0] = (uint8_t)strlen(h);
    memcpy(buf + 8, h, strlen(h));
    size_t len = 8 + strlen(h) + 1;
    CHECK(nvf_st_parse(&f, "buf", buf, len, len) == NVF_OK);
    CHECK(f && nvf_st_find(f, "a\xc3\xa9\n") != NULL);
    nvf_st_close(f);
    /* A buffer shorter than its header is the caller's mistake. */
    CHECK(nvf_st_parse(&f, "buf", buf, 20, len) == NVF_E_INVALID);
    /* JSON whitespace is only space, tab, CR and LF; \v is not. */
    CHECK(parse_buf("{}\v", 0) == NVF_E_FORMAT);
    CHECK(parse_buf("{\"a\tb\":{}}", 0) == NVF_E_FORMAT);
    CHECK_CONTAINS(nvf_error_last(), "unescaped control character");
}

static void test_utf8(void) {
    struct {
        const char *s;
        size_t bad; /* offset of the first invalid byte, or the length */
    } cases[] = {
        {"plain", 5},
        {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9}, /* é € 😀 */
        {"\xf4\x8f\xbf\xbf", 4},                     /* U+10FFFF */
        {"a\xc0\xaf", 1},                            /* overlong '/' */
        {"\xe0\x80\xaf", 0},                         /* overlong, 3 bytes */
        {"\xf0\x80\x80\xaf", 0},                     /* overlong, 4 bytes */
        {"ab\xed\xa0\x80", 2},                       /* surrogate U+D800 */
        {"\xed\xbf\xbf", 0},                         /* surrogate U+DFFF */
        {"\xee\x80\x80", 3},                         /* U+E000 */
        {"\xf4\x90\x80\x80", 0},                     /* U+110000 */
        {"\xf5\x80\x80\x80", 0},
        {"x\x80", 1},       /* lone continuation */
        {"\xe2\x82", 0},    /* truncated */
        {"\xe2\x28\xa1", 0} /* bad continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(nvf_st_utf8_check((const uint8_t *)cases[i].s, strlen(cases[i].s)) ==
                      cases[i].bad,
                  "case %zu", i);
}

/* Every file of tests/data/invalid/ with the phrase its message must contain. */
static const struct {
    const char *file, *phrase;
} k_invalid[] = {
    {"header_too_small", "file is 5 bytes, shorter than the 8-byte header length"},
    {"header_too_large", "header length 100000001 exceeds the 100000000 limit"},
    {"header_past_eof", "header length 512 runs past the end of the 100-byte file"},
    {"header_not_utf8", "header is not valid UTF-8 at byte 3"},
    {"header_not_json", "header is not valid JSON"},
    {"header_not_object", "header is not a JSON object"},
    {"offsets_overlap", "tensors 'a' and 'b' overlap at offset 4"},
    {"offsets_gap", "gap in the data area between offset 8 and 12"},
    {"offsets_reversed", "tensor 'a': data_offsets [8, 4] are reversed"},
    {"trailing_bytes", "4 trailing bytes after the last tensor"},
    {"missing_bytes", "data area is 8 bytes but tensors need 16"},
    {"shape_overflow", "tensor 'a': shape [1099511627776, 1099511627776] has more than 2^64"},
    {"size_mismatch",
     "tensor 'a.weight': data_offsets [0, 10] hold 10 bytes but shape [2, 3] of BF16 needs 12"},
    {"utf8_overlong", "header is not valid UTF-8 at byte 2"},
    {"utf8_surrogate", "header is not valid UTF-8 at byte 2"},
    {"utf8_above_max", "header is not valid UTF-8 at byte 2"},
    {"header_nul_byte", "a NUL byte at byte 2"},
    {"header_control_char", "a control character outside a string at byte 0"},
    {"header_escaped_nul", "escaped NUL"},
    {"header_trailing_garbage", "header is not valid JSON"},
    {"header_empty", "header is not valid JSON"},
    {"duplicate_name", "duplicate tensor name 'x'"},
    {"duplicate_metadata", "duplicate key '__metadata__'"},
    {"duplicate_metadata_key", "duplicate __metadata__ key 'a'"},
    {"duplicate_field", "tensor 'x' has the field 'dtype' twice"},
    {"unknown_dtype", "unknown dtype 'F128' for tensor 'x'"},
    {"metadata_not_string", "__metadata__ value of 'format' is not a string"},
    {"metadata_not_object", "__metadata__ is an array, not an object"},
    {"entry_not_object", "entry of tensor 'x' is 5, not an object"},
    {"dtype_not_string", "dtype of tensor 'x' is 8, not a string"},
    {"shape_not_array", "shape of tensor 'x' is 4, not an array"},
    {"missing_field", "tensor 'x' has no 'data_offsets' field"},
    {"extra_field", "tensor 'x' has an unknown field 'extra'"},
    {"offsets_not_pair", "data_offsets of tensor 'x' is an array of 1, not [begin, end]"},
    {"too_many_dims", "tensor 'x' has 9 dimensions, more than the 8 supported"},
    {"negative_dim", "tensor 'x': shape dimension 0 is -1, not a non-negative integer"},
    {"negative_offset", "tensor 'x': data_offsets begin is -1, not a non-negative integer"},
    {"fractional_dim", "tensor 'x': shape dimension 0 is 2.5, not a non-negative integer"},
    {"number_too_large",
     "tensor 'x': shape dimension 0 is 1.8446744073709552e+19, not a non-negative integer"},
    {"number_above_2p53", "header number '9007199254740993' at byte 28 is not a plain"},
    {"number_with_fraction", "header number '2.0' at byte 28 is not a plain"},
    {"number_with_exponent", "header number '2e0' at byte 49 is not a plain"},
    {"f4_odd_count", "tensor 'x': shape [3] of F4: 3 elements of F4 are not a whole number"},
    {"bytes_overflow", "tensor 'x': shape [4294967296, 2147483648] of F32: 9223372036854775808 "
                       "elements of F32 overflow 64 bits"},
    {"empty_with_trailing", "4 trailing bytes in the data area of a file without tensors"},
    {"header_length_max", "header length 18446744073709551615 exceeds the 100000000 limit"},
    {"offset_fractional", "tensor 'x': data_offsets end is 2.5, not a non-negative integer"},
    {"offset_above_2p53", "header number '9007199254740993' at byte 64 is not a plain"},
    {"offsets_past_eof", "data area is 16 bytes but tensors need 64"},
    {"truncated_file", "data area is 21 bytes but tensors need 24"},
};

static void test_invalid_files(void) {
    const char *data = getenv("NVFP4_TESTDATA");
    if (!data) {
        printf("invalid files: skipped (NVFP4_TESTDATA not set)\n");
        return;
    }
    size_t n = sizeof k_invalid / sizeof k_invalid[0];
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/invalid/%s.safetensors", data, k_invalid[i].file);
        nvf_st_file *f = NULL;
        int rc = nvf_st_open(&f, path);
        CHECK_MSG(rc == NVF_E_FORMAT, "%s: rc %d (%s)", k_invalid[i].file, rc, nvf_error_last());
        CHECK_CONTAINS(nvf_error_last(), "invalid safetensors file '");
        CHECK_CONTAINS(nvf_error_last(), path);
        CHECK_CONTAINS(nvf_error_last(), k_invalid[i].phrase);
        CHECK(f == NULL);
        nvf_st_close(f);
    }
    /* Every file in the directory is in the table. */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/invalid", data);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *e;
    size_t seen = 0;
    while (d && (e = readdir(d)) != NULL) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || strcmp(dot, ".safetensors") != 0)
            continue;
        seen++;
        int found = 0;
        for (size_t i = 0; i < n; i++)
            found |= strlen(k_invalid[i].file) == (size_t)(dot - e->d_name) &&
                     strncmp(k_invalid[i].file, e->d_name, (size_t)(dot - e->d_name)) == 0;
        CHECK_MSG(found, "%s is not in the table", e->d_name);
    }
    if (d)
        closedir(d);
    CHECK_EQ_U64(seen, n);
}

/* A directory or a missing path where a file is read: NVF_E_IO naming it, from each reader that
 * opens through nvf_file_open_regular, and no descriptor left open. */
static void test_not_a_file(void) {
    char missing[1100];
    snprintf(missing, sizeof missing, "%s/missing.safetensors", g_dir);
    const char *paths[] = {g_dir, missing};
    const char *phrases[] = {"is not a regular file", "cannot open"};
    int lowest = open("/dev/null", O_RDONLY); /* the lowest free descriptor before */
    CHECK(lowest >= 0);
    if (lowest >= 0)
        close(lowest);
    for (int i = 0; i < 2; i++) {
        nvf_st_file *f = NULL;
        CHECK_EQ_U64((uint64_t)nvf_st_open(&f, paths[i]), (uint64_t)NVF_E_IO);
        CHECK(f == NULL);
        CHECK_CONTAINS(nvf_error_last(), paths[i]);
        CHECK_CONTAINS(nvf_error_last(), phrases[i]);
        char *text = NULL;
        size_t len = 0;
        CHECK_EQ_U64((uint64_t)nvf_file_read_all(&text, &len, paths[i], 1 << 20),
                     (uint64_t)NVF_E_IO);
        CHECK(text == NULL);
        CHECK_CONTAINS(nvf_error_last(), phrases[i]);
        char hex[65];
        uint64_t bytes = 0;
        CHECK_EQ_U64((uint64_t)nvf_hash_file_ex(hex, &bytes, paths[i], NULL, NULL, NULL),
                     (uint64_t)NVF_E_IO);
        CHECK_CONTAINS(nvf_error_last(), phrases[i]);
    }
    int fd = open("/dev/null", O_RDONLY); /* the same after: no descriptor was left open */
    CHECK_EQ_U64((uint64_t)fd, (uint64_t)lowest);
    if (fd >= 0)
        close(fd);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/nvfp4-test-st-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_header_bytes();
    test_round_trip(1);
    test_round_trip(7);
    test_round_trip(1 << 20);
    test_python_agrees();
    test_streaming_large();
    test_writer_misuse();
    test_writer_io_errors();
    test_parse_buffer();
    test_utf8();
    test_invalid_files();
    test_not_a_file();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    return check_summary("test_safetensors");
}
