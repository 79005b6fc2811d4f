/*
 * Unit tests of lib/manifest: SHA-256 against the FIPS 180-2 example digests, CRC-32 against
 * the check value of the CRC catalogue, the manifest writer/reader round trip and every reader
 * rejection, and hashing/checking a small directory.
 */
#include "check.h"
#include "manifest/manifest_internal.h"
#include "nvfp4/fileio.h"
#include "nvfp4/manifest.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char g_dir[] = "/tmp/test_manifest.XXXXXX";

static char *path_in(const char *name) {
    return nvf_path_join(g_dir, name);
}

static void write_text(const char *name, const char *text) {
    char *p = path_in(name);
    CHECK(nvf_file_write_atomic(p, text, strlen(text)) == NVF_OK);
    free(p);
}

/* SHA-256 and CRC-32 ----------------------------------------------------------------------------
 */

/* FIPS 180-2 appendix B examples and the SHA-256 of the empty string. */
static const char k_sha_empty[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
static const char k_sha_abc[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char k_sha_million_a[] =
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

static void test_sha256(void) {
    char out[65];
    nvf_sha256 *h = nvf_sha256_new();
    CHECK(h != NULL);
    CHECK(nvf_sha256_final(h, out) == NVF_OK);
    CHECK_EQ_STR(out, k_sha_empty);
    /* The context is reusable after final. */
    CHECK(nvf_sha256_update(h, "abc", 3) == NVF_OK);
    CHECK(nvf_sha256_final(h, out) == NVF_OK);
    CHECK_EQ_STR(out, k_sha_abc);
    CHECK(nvf_sha256_update(h, "a", 1) == NVF_OK);
    CHECK(nvf_sha256_update(h, "bc", 2) == NVF_OK);
    CHECK(nvf_sha256_final(h, out) == NVF_OK);
    CHECK_EQ_STR(out, k_sha_abc);

    size_t n = 1000000;
    char *a = malloc(n);
    memset(a, 'a', n);
    /* Uneven pieces, so block boundaries fall inside updates. */
    for (size_t at = 0, step = 1; at < n; at += step, step = step * 3 + 7)
        CHECK(nvf_sha256_update(h, a + at, step < n - at ? step : n - at) == NVF_OK);
    CHECK(nvf_sha256_final(h, out) == NVF_OK);
    CHECK_EQ_STR(out, k_sha_million_a);
    nvf_sha256_free(h);
    nvf_sha256_free(NULL);

    char *p = path_in("million-a");
    CHECK(nvf_file_write_atomic(p, a, n) == NVF_OK);
    uint64_t bytes = 0;
    CHECK(nvf_sha256_file(out, &bytes, p) == NVF_OK);
    CHECK_EQ_STR(out, k_sha_million_a);
    CHECK_EQ_U64(bytes, n);
    free(p);
    p = path_in("empty");
    CHECK(nvf_file_write_atomic(p, "", 0) == NVF_OK);
    CHECK(nvf_sha256_file(out, &bytes, p) == NVF_OK);
    CHECK_EQ_STR(out, k_sha_empty);
    CHECK_EQ_U64(bytes, 0);
    free(p);
    p = path_in("no-such-file");
    CHECK(nvf_sha256_file(out, &bytes, p) == NVF_E_IO);
    CHECK_CONTAINS(nvf_error_last(), "no-such-file");
    free(p);
    free(a);
}

static void test_crc32(void) {
    /* The CRC-32 (ISO-HDLC) check value over "123456789". */
    CHECK_EQ_U64(nvf_crc32(0, "123456789", 9), 0xcbf43926u);
    CHECK_EQ_U64(nvf_crc32(nvf_crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
    CHECK_EQ_U64(nvf_crc32(0, "", 0), 0);
}

/* Tensor CRCs fed chunk by chunk, with chunks that split tensors anywhere. */
static void test_tensor_feed(void) {
    uint8_t data[100];
    for (int i = 0; i < 100; i++)
        data[i] = (uint8_t)(i * 37 + 11);
    /* A 10-byte "header" then tensors [0,7) [7,7) [7,40) [40,90) of the data area. */
    const uint64_t begin[] = {0, 7, 7, 40}, end[] = {7, 7, 40, 90};
    uint32_t want[4];
    for (int k = 0; k < 4; k++)
        want[k] = (uint32_t)crc32(0, data + 10 + begin[k], (uInt)(end[k] - begin[k]));
    const size_t chunks[] = {1, 3, 10, 17, 100};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        uint32_t crc[4] = {0, 0, 0, 0};
        nvf_hash_tensors t = {10, 4, begin, end, crc, 0};
        for (size_t at = 0; at < 100; at += chunks[c]) {
            size_t len = chunks[c] < 100 - at ? chunks[c] : 100 - at;
            if (at + len <= 10)
                continue;
            size_t skip = at < 10 ? 10 - at : 0;
            nvf_hash_tensors_feed(&t, data + at + skip, at + skip - 10, len - skip);
        }
        for (int k = 0; k < 4; k++)
            CHECK_MSG(crc[k] == want[k], "chunk %zu tensor %d: %08x != %08x", chunks[c], k, crc[k],
                      want[k]);
    }
}

/* Writer and reader -----------------------------------------------------------------------------
 */

static const char k_sha1[] = "1111111111111111111111111111111111111111111111111111111111111111";
static const char k_sha2[] = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789";

static nvf_manifest *sample(void) {
    nvf_manifest *m = nvf_manifest_new();
    const int64_t shape[2] = {4, 16};
    CHECK(m != NULL);
    CHECK(nvf_manifest_add_file(m, "model-00002-of-00002.safetensors", 9007199254740992ull,
                                k_sha1) == NVF_OK);
    CHECK(nvf_manifest_add_file(m, "config.json", 17, k_sha2) == NVF_OK);
    CHECK(nvf_manifest_add_file(m, "rank-00000-of-00002/model.safetensors", 0, k_sha2) == NVF_OK);
    CHECK(nvf_manifest_add_source(m, "model.safetensors", 123, k_sha1) == NVF_OK);
    CHECK(nvf_manifest_add_tensor(m, "z.weight", "model-00002-of-00002.safetensors", "U8", 2, shape,
                                  0xcbf43926u) == NVF_OK);
    CHECK(nvf_manifest_add_tensor(m, "a.scale", "model-00002-of-00002.safetensors", "F32", 0, shape,
                                  0) == NVF_OK);
    CHECK(nvf_manifest_add_tensor(m, "a.scale", "rank-00000-of-00002/model.safetensors", "F32", 0,
                                  shape, 0xffffffffu) == NVF_OK);
    nvf_manifest_priv_of(m)->recipe =
        cJSON_Parse("{\"version\": 1, \"quant\": {\"method\": \"4over6\", "
                    "\"e4m3_max\": 448, \"ratio\": 0.1, \"big\": 1e300}}");
    nvf_manifest_priv_of(m)->target = cJSON_Parse("{\"format\": \"modelopt\", \"layout\": null}");
    nvf_manifest_priv_of(m)->summary =
        cJSON_Parse("{\"tensors\": {\"converted\": 3, \"kept\": []}, \"name\": \"\\u00e9\"}");
    return m;
}

static void test_round_trip(void) {
    nvf_manifest *m = sample();
    char *path = path_in(NVF_MANIFEST_NAME);
    CHECK(nvf_manifest_write(path, m) == NVF_OK);
    nvf_manifest *r = NULL;
    CHECK(nvf_manifest_read(&r, path) == NVF_OK);
    CHECK(r != NULL);
    if (r) {
        CHECK_EQ_U64(r->n_files, 3);
        CHECK_EQ_STR(r->files[0].name, "config.json");
        CHECK_EQ_U64(r->files[0].bytes, 17);
        CHECK_EQ_STR(r->files[0].sha256, k_sha2);
        CHECK_EQ_STR(r->files[1].name, "model-00002-of-00002.safetensors");
        CHECK_EQ_U64(r->files[1].bytes, 9007199254740992ull);
        CHECK_EQ_STR(r->files[2].name, "rank-00000-of-00002/model.safetensors");
        CHECK(r->has_source);
        CHECK_EQ_U64(r->n_source, 1);
        CHECK_EQ_STR(r->source[0].name, "model.safetensors");
        CHECK_EQ_U64(r->n_tensors, 3);
        CHECK_EQ_STR(r->tensors[0].name, "a.scale");
        CHECK_EQ_STR(r->tensors[0].file, "model-00002-of-00002.safetensors");
        CHECK_EQ_U64(r->tensors[0].ndim, 0);
        CHECK_EQ_STR(r->tensors[1].file, "rank-00000-of-00002/model.safetensors");
        CHECK_EQ_U64(r->tensors[1].crc32, 0xffffffffu);
        CHECK_EQ_STR(r->tensors[2].name, "z.weight");
        CHECK_EQ_STR(r->tensors[2].dtype, "U8");
        CHECK_EQ_U64(r->tensors[2].ndim, 2);
        CHECK_EQ_U64(r->tensors[2].shape[0], 4);
        CHECK_EQ_U64(r->tensors[2].shape[1], 16);
        CHECK_EQ_U64(r->tensors[2].crc32, 0xcbf43926u);
        CHECK_EQ_STR(r->tool_version, m->tool_version);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(nvf_manifest_priv_of(r)->recipe, "quant");
        CHECK(cJSON_GetObjectItemCaseSensitive(q, "ratio")->valuedouble == 0.1);
        CHECK(cJSON_GetObjectItemCaseSensitive(q, "big")->valuedouble == 1e300);
        CHECK_EQ_STR(cJSON_GetObjectItemCaseSensitive(nvf_manifest_priv_of(r)->target, "format")
                         ->valuestring,
                     "modelopt");
        CHECK_EQ_STR(
            cJSON_GetObjectItemCaseSensitive(nvf_manifest_priv_of(r)->summary, "name")->valuestring,
            "\xc3\xa9");

        /* Re-serializing what was read gives the same bytes. */
        char *file = NULL, *again = NULL;
        size_t flen = 0, alen = 0;
        CHECK(nvf_file_read_all(&file, &flen, path, 1 << 20) == NVF_OK);
        CHECK(nvf_manifest_to_string(&again, &alen, r) == NVF_OK);
        CHECK(again && file && alen == flen && memcmp(again, file, flen) == 0);
        /* Hand-checked pieces of the layout. */
        CHECK_CONTAINS(file, "{\n \"manifest_version\": 1,\n \"tool\": {\n  \"name\": "
                             "\"nvfp4tool\",");
        CHECK_CONTAINS(file, "\n  {\"name\": \"config.json\", \"bytes\": 17, \"sha256\": \"");
        CHECK_CONTAINS(file, "\"bytes\": 9007199254740992,");
        CHECK_CONTAINS(file, "{\"name\": \"z.weight\", \"file\": "
                             "\"model-00002-of-00002.safetensors\", \"dtype\": \"U8\", "
                             "\"shape\": [4, 16], \"crc32\": \"cbf43926\"}\n ]");
        CHECK_CONTAINS(file, "\"shape\": [], \"crc32\": \"00000000\"");
        CHECK_CONTAINS(file, "\"ratio\": 0.1,");
        CHECK_CONTAINS(file, "\"big\": 1e+300");
        CHECK_CONTAINS(file, "\"kept\": []");
        CHECK(flen > 0 && file[flen - 1] == '\n');
        free(file);
        free(again);
    }
    nvf_manifest_free(r);

    /* A manifest written by `hash`: null recipe, target, source and summary. */
    nvf_manifest *e = nvf_manifest_new();
    CHECK(nvf_manifest_write(path, e) == NVF_OK);
    CHECK(nvf_manifest_read(&r, path) == NVF_OK);
    CHECK(r && !r->has_source && !nvf_manifest_priv_of(r)->recipe &&
          !nvf_manifest_priv_of(r)->target && !nvf_manifest_priv_of(r)->summary && r->n_files == 0);
    nvf_manifest_free(r);
    nvf_manifest_free(e);
    nvf_manifest_free(m);
    nvf_manifest_free(NULL);
    free(path);
}

static void test_writer_rejects(void) {
    char *text = NULL;
    size_t len = 0;
    const int64_t shape[1] = {-1};
    struct {
        const char *name;
        uint64_t bytes;
        const char *sha;
        const char *msg;
    } cases[] = {
        {"../x", 1, k_sha1, "'../x' has a '.' or '..' path component"},
        {"/etc/passwd", 1, k_sha1, "starts with '/'"},
        {"a//b", 1, k_sha1, "empty path component"},
        {"", 1, k_sha1, "is empty"},
        {"a\nb", 1, k_sha1, "control character"},
        {"big", 9007199254740993ull, k_sha1, "more than 2^53"},
        {"upper", 1, "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789",
         "not 64 lowercase hex"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nvf_manifest *m = nvf_manifest_new();
        char sha[65];
        memcpy(sha, cases[i].sha, 65);
        CHECK(nvf_manifest_add_file(m, cases[i].name, cases[i].bytes, sha) == NVF_OK);
        CHECK_MSG(nvf_manifest_to_string(&text, &len, m) == NVF_E_INVALID, "case %zu", i);
        CHECK_CONTAINS(nvf_error_last(), cases[i].msg);
        nvf_manifest_free(m);
    }
    nvf_manifest *m = nvf_manifest_new();
    CHECK(nvf_manifest_add_file(m, "a", 1, k_sha1) == NVF_OK);
    CHECK(nvf_manifest_add_file(m, "a", 2, k_sha2) == NVF_OK);
    CHECK(nvf_manifest_to_string(&text, &len, m) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "'a' is listed twice");
    nvf_manifest_free(m);

    m = nvf_manifest_new();
    CHECK(nvf_manifest_add_file(m, "a", 1, k_sha1) == NVF_OK);
    CHECK(nvf_manifest_add_tensor(m, "t", "b", "F32", 0, shape, 0) == NVF_OK);
    CHECK(nvf_manifest_to_string(&text, &len, m) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "tensor 't' is in file 'b', which is not in files");
    nvf_manifest_free(m);

    m = nvf_manifest_new();
    CHECK(nvf_manifest_add_file(m, "a", 1, k_sha1) == NVF_OK);
    CHECK(nvf_manifest_add_tensor(m, "t", "a", "F32", 1, shape, 0) == NVF_OK);
    CHECK(nvf_manifest_to_string(&text, &len, m) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "dimension -1");
    CHECK(nvf_manifest_add_tensor(m, "t", "a", "F32", 9, shape, 0) == NVF_E_INVALID);
    nvf_manifest_free(m);

    m = nvf_manifest_new();
    CHECK(nvf_manifest_add_file(m, "a", 1, k_sha1) == NVF_OK);
    CHECK(nvf_manifest_add_tensor(m, "t", "a", "F33", 0, shape, 0) == NVF_OK);
    CHECK(nvf_manifest_to_string(&text, &len, m) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "unknown dtype 'F33'");
    nvf_manifest_free(m);

    m = nvf_manifest_new();
    nvf_manifest_priv_of(m)->summary = cJSON_CreateObject();
    cJSON_AddNumberToObject(nvf_manifest_priv_of(m)->summary, "nan", 0.0 / 0.0);
    CHECK(nvf_manifest_to_string(&text, &len, m) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "NaN/Inf");
    nvf_manifest_free(m);
}

/* A valid document with "@" standing for the part each reader case replaces. */
static const char *k_doc_template =
    "{\"manifest_version\": 1, \"tool\": {\"name\": \"nvfp4tool\", \"version\": \"0.1.0\"},"
    " \"recipe\": null, \"target\": null, \"source\": null, @ \"summary\": null}";

static const char *k_good_parts =
    "\"files\": [{\"name\": \"a.safetensors\", \"bytes\": 8, \"sha256\": "
    "\"1111111111111111111111111111111111111111111111111111111111111111\"}],"
    " \"tensors\": [{\"name\": \"w\", \"file\": \"a.safetensors\", \"dtype\": \"BF16\","
    " \"shape\": [2, 2], \"crc32\": \"cbf43926\"}],";

static char *doc(const char *parts) {
    const char *at = strchr(k_doc_template, '@');
    size_t a = (size_t)(at - k_doc_template), b = strlen(parts), c = strlen(at + 1);
    char *s = malloc(a + b + c + 1);
    memcpy(s, k_doc_template, a);
    memcpy(s + a, parts, b);
    memcpy(s + a + b, at + 1, c + 1);
    return s;
}

/* `parts` with the first occurrence of `from` replaced by `to`, as a whole document. */
static char *doc_edit(const char *from, const char *to) {
    const char *p = strstr(k_good_parts, from);
    size_t a = (size_t)(p - k_good_parts), b = strlen(to), f = strlen(from);
    char *parts = malloc(strlen(k_good_parts) - f + b + 1);
    memcpy(parts, k_good_parts, a);
    memcpy(parts + a, to, b);
    strcpy(parts + a + b, p + f);
    char *s = doc(parts);
    free(parts);
    return s;
}

static void expect_reject(const char *label, const char *text, size_t len, const char *msg) {
    nvf_manifest *m = (nvf_manifest *)1;
    int rc = nvf_manifest_parse(&m, "M.json", text, len);
    CHECK_MSG(rc == NVF_E_FORMAT, "%s: rc %d", label, rc);
    CHECK_MSG(m == NULL, "%s", label);
    CHECK_CONTAINS(nvf_error_last(), "invalid manifest 'M.json': ");
    CHECK_MSG(strstr(nvf_error_last(), msg) != NULL, "%s: \"%s\" lacks \"%s\"", label,
              nvf_error_last(), msg);
    nvf_manifest_free(m == (nvf_manifest *)1 ? NULL : m);
}

static void test_reader_rejects(void) {
    char *good = doc(k_good_parts);
    nvf_manifest *m = NULL;
    CHECK(nvf_manifest_parse(&m, "M.json", good, strlen(good)) == NVF_OK);
    CHECK(m && m->n_files == 1 && m->n_tensors == 1 && m->tensors[0].crc32 == 0xcbf43926u);
    nvf_manifest_free(m);

    struct {
        const char *from, *to, *msg;
    } edits[] = {
        {"\"a.safetensors\", \"bytes\"", "\"/a.safetensors\", \"bytes\"",
         "files[0].name '/a.safetensors' starts with '/'"},
        {"\"a.safetensors\", \"bytes\"", "\"x/../a.safetensors\", \"bytes\"",
         "files[0].name 'x/../a.safetensors' has a '.' or '..' path component"},
        {"\"a.safetensors\", \"bytes\"", "\"..\", \"bytes\"", "'..' has a '.' or '..'"},
        {"\"a.safetensors\", \"bytes\"", "\"\", \"bytes\"", "files[0].name '' is empty"},
        {"\"a.safetensors\", \"bytes\"", "7, \"bytes\"", "files[0].name is not a string"},
        {"\"bytes\": 8", "\"bytes\": -1", "files[0].bytes is -1, not an integer in 0..2^53"},
        {"\"bytes\": 8", "\"bytes\": 1.5", "files[0].bytes is 1.5, not an integer"},
        {"\"bytes\": 8", "\"bytes\": 9007199254740994", "files[0].bytes is 9007199254740994"},
        {"\"bytes\": 8", "\"bytes\": \"8\"", "files[0].bytes is not a number"},
        {"\"sha256\": \"1111", "\"sha256\": \"111", "files[0].sha256 is '111"},
        {"\"sha256\": \"1111", "\"sha256\": \"A111", "not 64 lowercase hex digits"},
        {"\"sha256\": \"1111", "\"sha256\": \"g111", "not 64 lowercase hex digits"},
        {"\"sha256\": \"1111", "\"extra\": 1, \"sha256\": \"1111",
         "files[0] has an unknown key 'extra'"},
        {"\"bytes\": 8, ", "", "files[0] has no \"bytes\""},
        {"\"files\": [{", "\"files\": [7, {", "files[0] is not an object"},
        {"\"file\": \"a.safetensors\"", "\"file\": \"b.safetensors\"",
         "tensors[0].file 'b.safetensors' is not in files"},
        {"\"name\": \"w\"", "\"name\": \"\"", "tensors[0].name is empty"},
        {"\"BF16\"", "\"bf16\"", "tensors[0].dtype 'bf16' is not a safetensors dtype"},
        {"[2, 2]", "[1, 1, 1, 1, 1, 1, 1, 1, 1]", "tensors[0].shape has 9 dimensions"},
        {"[2, 2]", "[2, -2]", "tensors[0].shape[1] is -2"},
        {"[2, 2]", "2", "tensors[0].shape is not an array"},
        {"\"cbf43926\"", "\"CBF43926\"", "tensors[0].crc32 is 'CBF43926', not 8 lowercase hex"},
        {"\"cbf43926\"", "\"cbf4392\"", "tensors[0].crc32 is 'cbf4392'"},
        {"\"cbf43926\"", "3421780262", "tensors[0].crc32 is not a string"},
        {"\"crc32\": \"cbf43926\"}]",
         "\"crc32\": \"cbf43926\"}, {\"name\": \"w\", \"file\": \"a.safetensors\", \"dtype\": "
         "\"U8\", \"shape\": [], \"crc32\": \"00000000\"}]",
         "tensors lists 'w' of file 'a.safetensors' twice"},
        {"\"sha256\": \"1111111111111111111111111111111111111111111111111111111111111111\"}]",
         "\"sha256\": \"1111111111111111111111111111111111111111111111111111111111111111\"}, "
         "{\"name\": \"a.safetensors\", \"bytes\": 1, \"sha256\": "
         "\"2222222222222222222222222222222222222222222222222222222222222222\"}]",
         "files lists 'a.safetensors' twice"},
        {"\"bytes\": 8,", "\"bytes\": 8, \"bytes\": 8,", "duplicate key 'bytes' in files[0]"},
        {"\"dtype\": \"BF16\",", "\"dtype\": \"BF16\", \"dtype\": \"U8\",",
         "duplicate key 'dtype' in tensors[0]"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *s = doc_edit(edits[i].from, edits[i].to);
        char label[32];
        snprintf(label, sizeof label, "edit %zu", i);
        expect_reject(label, s, strlen(s), edits[i].msg);
        free(s);
    }

    struct {
        const char *text, *msg;
    } whole[] = {
        {"", "not valid JSON"},
        {"[]", "not a JSON object"},
        {"{\"manifest_version\": 1,}", "not valid JSON"},
        {"{\"manifest_version\": 1}", "the document has no \"tool\""},
        {"{\"manifest_version\": 1, \"manifest_version\": 1}",
         "duplicate key 'manifest_version' in the document"},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        expect_reject(whole[i].text, whole[i].text, strlen(whole[i].text), whole[i].msg);

    /* Edits of the fixed part of the template. */
    struct {
        const char *from, *to, *msg;
    } top[] = {
        {"\"manifest_version\": 1", "\"manifest_version\": 2", "manifest_version is not 1"},
        {"\"manifest_version\": 1", "\"manifest_version\": \"1\"", "manifest_version is not 1"},
        {"\"name\": \"nvfp4tool\"", "\"name\": \"other\"", "tool.name is not \"nvfp4tool\""},
        {"\"version\": \"0.1.0\"", "\"version\": \"\"", "tool.version is not a non-empty"},
        {"\"version\": \"0.1.0\"", "\"version\": \"0.1.0\", \"x\": 1",
         "tool has an unknown key 'x'"},
        {"\"recipe\": null", "\"recipe\": []", "recipe is neither an object nor null"},
        {"\"target\": null", "\"target\": {\"layout\": null}", "target.format is missing"},
        {"\"target\": null", "\"target\": {\"format\": \"modelopt\", \"layout\": 3}",
         "target.layout is neither a string nor null"},
        {"\"target\": null", "\"target\": \"modelopt\"", "target is neither an object nor null"},
        {"\"source\": null", "\"source\": {}", "source has no \"files\""},
        {"\"source\": null", "\"source\": {\"files\": [{\"name\": \"a\"}]}",
         "source.files[0] has no \"bytes\""},
        {"\"summary\": null", "\"summary\": 3", "summary is neither an object nor null"},
        {"\"summary\": null", "\"summary\": {\"a\": {\"b\": 1, \"b\": 2}}",
         "duplicate key 'b' in summary.a"},
        {"\"summary\": null", "\"summary\": {\"x\": [1, 1e999]}",
         "summary.x[1] is a number beyond the range of a double"},
        {"\"summary\": null", "\"summary\": null, \"more\": 1",
         "the document has an unknown key 'more'"},
    };
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
        const char *p = strstr(good, top[i].from);
        size_t a = (size_t)(p - good), f = strlen(top[i].from), b = strlen(top[i].to);
        char *s = malloc(strlen(good) - f + b + 1);
        memcpy(s, good, a);
        memcpy(s + a, top[i].to, b);
        strcpy(s + a + b, p + f);
        expect_reject(top[i].to, s, strlen(s), top[i].msg);
        free(s);
    }

    char *s = doc("\"files\": {}, \"tensors\": [],");
    expect_reject("files object", s, strlen(s), "files is not an array");
    free(s);
    s = doc("\"files\": [], \"tensors\": {},");
    expect_reject("tensors object", s, strlen(s), "tensors is not an array");
    free(s);

    /* Byte-level faults. */
    char bin[64];
    size_t n = (size_t)snprintf(bin, sizeof bin, "{\"a\": \"x\xff\"}");
    expect_reject("bad utf-8", bin, n, "not valid UTF-8 at byte 8");
    memcpy(bin, "{\"a\": 1}\0", 9);
    expect_reject("nul", bin, 9, "not valid JSON");

    /* A missing file is an I/O error, not a format error. */
    char *path = path_in("nothing.json");
    CHECK(nvf_manifest_read(&m, path) == NVF_E_IO);
    CHECK(m == NULL);
    free(path);
    free(good);
}

/* Directories ---------------------------------------------------------------------------------- */

static void test_dir(void) {
    char *sub = path_in("ck");
    char *sub2 = path_in("ck/rank-00000-of-00001");
    CHECK(nvf_mkdir_p(sub2) == NVF_OK);
    write_text("ck/config.json", "{}\n");
    write_text("ck/rank-00000-of-00001/abc", "abc");
    write_text("ck/left.tmp", "partial");
    write_text("ck/" NVF_MANIFEST_NAME, "not even JSON");
    /* A safetensors file with two tensors whose CRCs zlib computes here. */
    const uint8_t w[6] = {1, 2, 3, 4, 5, 6};
    const uint8_t b[4] = {9, 8, 7, 6};
    nvf_st_entry e[2] = {{"w", NVF_DTYPE_U8, 2, {2, 3}}, {"b", NVF_DTYPE_U8, 1, {4}}};
    const void *data[2] = {w, b};
    char *st = path_in("ck/model.safetensors");
    CHECK(nvf_st_write_file(st, e, data, 2) == NVF_OK);

    char **names = NULL;
    size_t n = 0;
    CHECK(nvf_manifest_list_dir(&names, &n, sub, 1) == NVF_OK);
    CHECK_EQ_U64(n, 3);
    if (n == 3) {
        CHECK_EQ_STR(names[0], "config.json");
        CHECK_EQ_STR(names[1], "model.safetensors");
        CHECK_EQ_STR(names[2], "rank-00000-of-00001/abc");
    }
    nvf_manifest_names_free(names, n);
    CHECK(nvf_manifest_list_dir(&names, &n, sub, 0) == NVF_OK);
    CHECK_EQ_U64(n, 4);
    nvf_manifest_names_free(names, n);

    char *text[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        nvf_hash_opts o = {k == 0 ? 1 : 3, 0, NULL, NULL, NULL};
        nvf_manifest *m = NULL;
        size_t len;
        CHECK(nvf_manifest_hash_dir(&m, sub, &o) == NVF_OK);
        CHECK(m && m->n_files == 3 && m->n_tensors == 2);
        if (m && m->n_files == 3 && m->n_tensors == 2) {
            CHECK_EQ_STR(m->files[2].sha256, k_sha_abc);
            CHECK_EQ_U64(m->files[2].bytes, 3);
            CHECK_EQ_STR(m->tensors[0].name, "w");
            CHECK_EQ_U64(m->tensors[0].crc32, crc32(0, w, 6));
            CHECK_EQ_STR(m->tensors[1].name, "b");
            CHECK_EQ_U64(m->tensors[1].crc32, crc32(0, b, 4));
            CHECK_EQ_STR(m->tensors[1].file, "model.safetensors");
        }
        CHECK(nvf_manifest_to_string(&text[k], &len, m) == NVF_OK);
        nvf_manifest_free(m);
    }
    CHECK(text[0] && text[1] && strcmp(text[0], text[1]) == 0);
    free(text[0]);
    free(text[1]);

    /* Check: clean but for the .tmp file, then with a change in every way. */
    nvf_hash_opts o = {2, 1, NULL, NULL, NULL};
    nvf_manifest *m = NULL;
    nvf_manifest_report *r = NULL;
    CHECK(nvf_manifest_hash_dir(&m, sub, &o) == NVF_OK);
    CHECK(nvf_manifest_check_dir(&r, sub, m, &o) == NVF_OK);
    CHECK(r && r->n_findings == 1 && r->files_ok == 3 && r->tensors_checked == 2);
    if (r && r->n_findings == 1)
        CHECK_EQ_STR(r->findings[0].line, "EXTRA left.tmp");
    nvf_manifest_report_free(r);

    write_text("ck/config.json", "{}}");            /* same size */
    write_text("ck/rank-00000-of-00001/abc", "ab"); /* shorter */
    write_text("ck/new.txt", "new");
    const uint8_t w2[6] = {1, 2, 3, 4, 5, 7};
    data[0] = w2;
    CHECK(nvf_st_write_file(st, e, data, 2) == NVF_OK);
    CHECK(nvf_manifest_check_dir(&r, sub, m, &o) == NVF_OK);
    CHECK(r && r->files_ok == 0);
    const char *want[] = {
        NULL, /* the SHA256 of config.json: checked by prefix below */
        "EXTRA left.tmp",
        NULL, /* the SHA256 of model.safetensors: checked by prefix below */
        "CRC32 model.safetensors:w: got ",
        "EXTRA new.txt",
        "SIZE rank-00000-of-00001/abc: 2 != 3",
    };
    CHECK(r && r->n_findings == 6);
    for (size_t i = 0; r && i < r->n_findings && i < 6; i++) {
        if (i == 0)
            CHECK_CONTAINS(r->findings[i].line, "SHA256 config.json: got ");
        else if (i == 2)
            CHECK_CONTAINS(r->findings[i].line, "SHA256 model.safetensors: got ");
        else
            CHECK_CONTAINS(r->findings[i].line, want[i]);
    }
    if (r && r->n_findings == 6) {
        char exp[16];
        snprintf(exp, sizeof exp, "%08lx", crc32(0, w, 6));
        CHECK_EQ_STR(r->findings[3].expected, exp);
        snprintf(exp, sizeof exp, "%08lx", crc32(0, w2, 6));
        CHECK_EQ_STR(r->findings[3].got, exp);
        CHECK(r->findings[3].kind == NVF_FINDING_CRC32);
    }
    nvf_manifest_report_free(r);

    char *cfg = path_in("ck/config.json");
    unlink(cfg);
    free(cfg);
    CHECK(nvf_manifest_check_dir(&r, sub, m, &o) == NVF_OK);
    CHECK(r && r->n_findings >= 1);
    if (r && r->n_findings >= 1)
        CHECK_EQ_STR(r->findings[0].line, "MISSING config.json");
    nvf_manifest_report_free(r);

    /* A listed tensor's dtype and shape are compared with the file's header (--tensors). */
    for (size_t i = 0; i < m->n_tensors; i++) {
        if (strcmp(m->tensors[i].name, "b") == 0) {
            free(m->tensors[i].dtype);
            m->tensors[i].dtype = strdup("F32");
            m->tensors[i].ndim = 2;
            m->tensors[i].shape[0] = m->tensors[i].shape[1] = 7;
        }
    }
    r = NULL;
    CHECK(nvf_manifest_check_dir(&r, sub, m, &o) == NVF_OK);
    int seen = 0;
    for (size_t i = 0; r && i < r->n_findings; i++) {
        if (r->findings[i].kind != NVF_FINDING_TENSOR)
            continue;
        seen++;
        CHECK_EQ_STR(r->findings[i].name, "model.safetensors:b");
        CHECK_EQ_STR(r->findings[i].got, "U8 [4]");
        CHECK_EQ_STR(r->findings[i].expected, "F32 [7, 7]");
    }
    CHECK(seen == 1);
    nvf_manifest_report_free(r);

    /* A stop flag already set: both walks stop before reading, NVF_E_INTERRUPTED, no result. */
    volatile sig_atomic_t stop = 1;
    nvf_hash_opts so = {2, 1, NULL, NULL, &stop};
    nvf_manifest *m2 = NULL;
    r = NULL;
    CHECK(nvf_manifest_hash_dir(&m2, sub, &so) == NVF_E_INTERRUPTED && m2 == NULL);
    CHECK(nvf_manifest_check_dir(&r, sub, m, &so) == NVF_E_INTERRUPTED && r == NULL);
    nvf_manifest_free(m);
    free(st);
    free(sub2);
    free(sub);
}

/* `hash` over a converted checkpoint: the recipe, target, source and summary move to the new
 * manifest; the old one keeps only its files and tensors. */
static void test_move_provenance(void) {
    const char *text =
        "{\"manifest_version\": 1, \"tool\": {\"name\": \"nvfp4tool\", \"version\": \"9\"},"
        " \"recipe\": {\"version\": 1}, \"target\": {\"format\": \"modelopt\"},"
        " \"source\": {\"files\": [{\"name\": \"a\", \"bytes\": 1, \"sha256\": "
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}]},"
        " \"files\": [{\"name\": \"b\", \"bytes\": 2, \"sha256\": "
        "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"}],"
        " \"tensors\": [], \"summary\": {\"shards\": 1}}";
    nvf_manifest *old = NULL, *m = nvf_manifest_new();
    CHECK(nvf_manifest_parse(&old, "old.json", text, strlen(text)) == NVF_OK);
    if (!old || !m) {
        nvf_manifest_free(m);
        nvf_manifest_free(old);
        return;
    }
    CHECK(nvf_manifest_add_source(m, "stale", 3, old->files[0].sha256) == NVF_OK);
    nvf_manifest_move_provenance(m, old);
    const nvf_manifest_priv *pm = nvf_manifest_priv_of(m), *po = nvf_manifest_priv_of(old);
    CHECK(m->has_source && m->n_source == 1 && strcmp(m->source[0].name, "a") == 0);
    CHECK(cJSON_GetObjectItemCaseSensitive(pm->recipe, "version")->valuedouble == 1.0);
    CHECK_EQ_STR(cJSON_GetObjectItemCaseSensitive(pm->target, "format")->valuestring, "modelopt");
    CHECK(cJSON_GetObjectItemCaseSensitive(pm->summary, "shards")->valuedouble == 1.0);
    CHECK(!old->has_source && old->n_source == 0 && !old->source);
    CHECK(!po->recipe && !po->target && !po->summary);
    CHECK(old->n_files == 1 && strcmp(old->files[0].name, "b") == 0);
    /* The new manifest grows its moved source list like any other. */
    CHECK(nvf_manifest_add_source(m, "c", 4, old->files[0].sha256) == NVF_OK);
    CHECK(m->n_source == 2 && strcmp(m->source[1].name, "c") == 0);
    nvf_manifest_free(m);
    nvf_manifest_free(old);
}

/* A worker's error reaches the calling thread whole (code and message), as the worker set it:
 * a file that vanished between listing and hashing, and a safetensors file that does not
 * parse, each hashed on a worker thread of its own. */
static void test_worker_errors(void) {
    char *sub = path_in("werr");
    CHECK(nvf_mkdir_p(sub) == NVF_OK);
    write_text("werr/a", "abc");
    char *const names[2] = {"a", "gone"};
    nvf_hash_job *jobs = NULL;
    CHECK(nvf_hash_jobs_make(&jobs, sub, names, 2, NULL) == NVF_OK);
    nvf_hash_opts o = {2, 0, NULL, NULL, NULL};
    nvf_error_clear();
    if (jobs)
        CHECK(nvf_hash_jobs_run(jobs, 2, &o) == NVF_E_IO);
    char want[1024];
    snprintf(want, sizeof want, "cannot open '%s/gone': %s", sub, strerror(ENOENT));
    CHECK_EQ_STR(nvf_error_last(), want);
    CHECK(nvf_error_code() == NVF_E_IO);
    nvf_hash_jobs_free(jobs, 2);

    write_text("werr/b.safetensors", "xx");
    nvf_manifest *m = NULL;
    nvf_error_clear();
    CHECK(nvf_manifest_hash_dir(&m, sub, &o) == NVF_E_FORMAT && m == NULL);
    snprintf(want, sizeof want,
             "invalid safetensors file '%s/b.safetensors': file is 2 bytes, shorter than the "
             "8-byte header length",
             sub);
    CHECK_EQ_STR(nvf_error_last(), want);
    CHECK(nvf_error_code() == NVF_E_FORMAT);
    nvf_manifest_free(m);
    free(sub);
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_sha256();
    test_crc32();
    test_tensor_feed();
    test_round_trip();
    test_writer_rejects();
    test_reader_rejects();
    test_dir();
    test_move_provenance();
    test_worker_errors();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return check_summary("test_manifest");
}
