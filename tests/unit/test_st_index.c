/*
 * model.safetensors.index.json: the writer's exact text (hand-written, and Python's
 * json.dumps(indent=2, sort_keys=True) agreeing), reading back, and malformed indexes rejected.
 */
#include "check.h"

#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}

/* Unsorted input, a non-ASCII name and one that needs escaping. */
static const char *k_names[] = {"model.layers.1.mlp.gate.weight", "lm_head.weight",
                                "model.embed_tokens.weight", "caf\xc3\xa9\"\xf0\x9f\x98\x80"};
static const char *k_files[] = {
    "model-00002-of-00002.safetensors", "model-00002-of-00002.safetensors",
    "model-00001-of-00002.safetensors", "model-00001-of-00002.safetensors"};

static void test_write_exact(void) {
    const char *path = tmp_path("model.safetensors.index.json");
    CHECK(nvf_st_index_write(path, 123456789012ull, k_names, k_files, 4) == NVF_OK);
    /* Sorted by name ('c' < 'l' < 'm'), non-ASCII as \u escapes (U+1F600 as a UTF-16 pair). */
    const char *expect =
        "{\n"
        "  \"metadata\": {\n"
        "    \"total_size\": 123456789012\n"
        "  },\n"
        "  \"weight_map\": {\n"
        "    \"caf\\u00e9\\\"\\ud83d\\ude00\": "
        "\"model-00001-of-00002.safetensors\",\n"
        "    \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
        "    \"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\",\n"
        "    \"model.layers.1.mlp.gate.weight\": "
        "\"model-00002-of-00002.safetensors\"\n"
        "  }\n"
        "}\n";
    char *got = slurp(path);
    CHECK_EQ_STR(got, expect);
    free(got);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(access(tmp, F_OK) != 0);

    /* Python's json.dumps, the way Hugging Face writes the file, gives the same text. */
    const char *py = getenv("NVFP4_PYTHON");
    if (py && access(py, X_OK) == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "%s -c 'import json,sys\n"
                 "t=open(sys.argv[1],encoding=\"utf-8\").read()\n"
                 "d=json.loads(t)\n"
                 "sys.exit(0 if t==json.dumps(d,indent=2,sort_keys=True)+\"\\n\" else 1)' %s",
                 py, path);
        CHECK(system(cmd) == 0);
    }

    nvf_st_index *idx = NULL;
    CHECK_MSG(nvf_st_index_read(&idx, path) == NVF_OK, "%s", nvf_error_last());
    if (!idx)
        return;
    CHECK_EQ_U64(idx->total_size, 123456789012ull);
    CHECK_EQ_U64(idx->n, 4);
    CHECK_EQ_STR(idx->names[0], k_names[3]);
    CHECK_EQ_STR(idx->names[1], "lm_head.weight");
    CHECK_EQ_STR(idx->names[3], "model.layers.1.mlp.gate.weight");
    CHECK_EQ_STR(idx->files[1], "model-00002-of-00002.safetensors");
    CHECK_EQ_U64(idx->n_files, 2);
    CHECK_EQ_STR(idx->file_list[0], "model-00001-of-00002.safetensors");
    CHECK_EQ_STR(idx->file_list[1], "model-00002-of-00002.safetensors");
    for (int i = 0; i < 4; i++)
        CHECK_EQ_STR(nvf_st_index_file(idx, k_names[i]), k_files[i]);
    CHECK(nvf_st_index_file(idx, "model.norm.weight") == NULL);
    nvf_st_index_free(idx);
    nvf_st_index_free(NULL);
}

static void test_write_empty_and_bad(void) {
    const char *path = tmp_path("empty.index.json");
    CHECK(nvf_st_index_write(path, 0, NULL, NULL, 0) == NVF_OK);
    char *got = slurp(path);
    CHECK_EQ_STR(got,
                 "{\n  \"metadata\": {\n    \"total_size\": 0\n  },\n  \"weight_map\": {}\n}\n");
    free(got);
    nvf_st_index *idx = NULL;
    CHECK(nvf_st_index_read(&idx, path) == NVF_OK);
    CHECK(idx && idx->n == 0 && idx->n_files == 0 && nvf_st_index_file(idx, "x") == NULL);
    nvf_st_index_free(idx);

    const char *dup_names[2] = {"a", "a"}, *files[2] = {"x.safetensors", "y.safetensors"};
    CHECK(nvf_st_index_write(tmp_path("dup.json"), 1, dup_names, files, 2) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "'a' is listed twice");
    const char *names[1] = {"a"}, *sub[1] = {"sub/x.safetensors"};
    CHECK(nvf_st_index_write(tmp_path("sub.json"), 1, names, sub, 1) == NVF_E_INVALID);
    CHECK(access(tmp_path("dup.json"), F_OK) != 0 && access(tmp_path("sub.json"), F_OK) != 0);
    CHECK(nvf_st_index_write(tmp_path("no/dir/i.json"), 1, names, files, 1) == NVF_E_IO);
}

static void test_read_variants(void) {
    const char *path = tmp_path("v.json");
    nvf_st_index *idx = NULL;
    /* total_size as a string, extra keys anywhere, no trailing newline. */
    put(path, "{\"metadata\":{\"total_size\":\"18446744073709551615\",\"format\":\"pt\"},"
              "\"extra\":[1,2],\"weight_map\":{\"b\":\"s2\",\"a\":\"s1\",\"c\":\"s1\"}}");
    CHECK_MSG(nvf_st_index_read(&idx, path) == NVF_OK, "%s", nvf_error_last());
    if (idx) {
        CHECK_EQ_U64(idx->total_size, UINT64_MAX);
        CHECK_EQ_U64(idx->n, 3);
        CHECK_EQ_STR(idx->names[0], "a");
        CHECK_EQ_STR(idx->files[0], "s1");
        CHECK_EQ_STR(idx->names[2], "c");
        CHECK_EQ_U64(idx->n_files, 2);
        CHECK_EQ_STR(nvf_st_index_file(idx, "b"), "s2");
        nvf_st_index_free(idx);
        idx = NULL;
    }
    /* No metadata: total_size 0. */
    put(path, " {\"weight_map\":{\"a\":\"s1\"}} \n");
    CHECK(nvf_st_index_read(&idx, path) == NVF_OK);
    CHECK(idx && idx->total_size == 0 && idx->n == 1);
    nvf_st_index_free(idx);
    idx = NULL;

    CHECK(nvf_st_index_read(&idx, tmp_path("absent.json")) == NVF_E_IO);
    CHECK(idx == NULL);
}

static void test_read_invalid(void) {
    static const struct {
        const char *text, *phrase;
    } cases[] = {
        {"", "not valid JSON"},
        {"[]", "not a JSON object"},
        {"{\"metadata\":{}}", "no \"weight_map\" object"},
        {"{\"weight_map\":[]}", "weight_map is not an object"},
        {"{\"weight_map\":{},\"weight_map\":{}}", "duplicate key 'weight_map'"},
        {"{\"weight_map\":{\"a\":\"s1\",\"a\":\"s2\"}}", "tensor 'a' appears twice"},
        {"{\"weight_map\":{\"a\":1}}", "weight_map value of tensor 'a' is not a string"},
        {"{\"weight_map\":{\"a\":\"../s1\"}}", "weight_map file of tensor 'a' is '../s1'"},
        {"{\"weight_map\":{\"a\":\"/etc/passwd\"}}", "weight_map file of tensor 'a'"},
        {"{\"weight_map\":{\"a\":\"\"}}", "weight_map file of tensor 'a' is ''"},
        {"{\"weight_map\":{\"a\":\"s\\u0000\"}}", "escaped NUL"},
        {"{\"weight_map\":{\"a\xff\":\"s\"}}", "not valid UTF-8 at byte 17"},
        {"{\"metadata\":[],\"weight_map\":{}}", "metadata is not an object"},
        {"{\"metadata\":{\"total_size\":-1},\"weight_map\":{}}", "metadata.total_size is -1"},
        {"{\"metadata\":{\"total_size\":1.5},\"weight_map\":{}}", "metadata.total_size is 1.5"},
        {"{\"metadata\":{\"total_size\":\"12x\"},\"weight_map\":{}}", "metadata.total_size is 12x"},
        {"{\"metadata\":{\"total_size\":\"18446744073709551616\"},\"weight_map\":{}}",
         "metadata.total_size is 18446744073709551616"},
        {"{\"metadata\":{\"total_size\":null},\"weight_map\":{}}", "not a non-negative integer"},
        {"{\"weight_map\":{}} {}", "not valid JSON"},
    };
    const char *path = tmp_path("bad.json");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        put(path, cases[i].text);
        nvf_st_index *idx = NULL;
        int rc = nvf_st_index_read(&idx, path);
        CHECK_MSG(rc == NVF_E_FORMAT, "case %zu: rc %d", i, rc);
        CHECK_CONTAINS(nvf_error_last(), "invalid safetensors index '");
        CHECK_CONTAINS(nvf_error_last(), path);
        CHECK_CONTAINS(nvf_error_last(), cases[i].phrase);
        CHECK(idx == NULL);
    }
}

/* The checkpoints Hugging Face transformers wrote (tests/data/hf): the index agrees with the
 * shards. Totals and counts computed with a Python stdlib reader of the same files. */
static void test_hf_fixtures(void) {
    const char *data = getenv("NVFP4_TESTDATA");
    if (!data) {
        printf("hf fixtures: skipped (NVFP4_TESTDATA not set)\n");
        return;
    }
    static const struct {
        const char *dir;
        uint64_t total_size;
        size_t n_tensors, n_files;
    } k_hf[] = {
        {"deepseekv3-bf16", 1133320, 41, 5},
        {"deepseekv3-fp8", 699276, 69, 3},
        {"qwen3moe-bf16", 1249024, 45, 5},
        {"qwen3moe-fp8", 757632, 77, 3},
    };
    for (size_t d = 0; d < sizeof k_hf / sizeof k_hf[0]; d++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/hf/%s/model.safetensors.index.json", data, k_hf[d].dir);
        nvf_st_index *idx = NULL;
        CHECK_MSG(nvf_st_index_read(&idx, path) == NVF_OK, "%s", nvf_error_last());
        if (!idx)
            continue;
        CHECK_EQ_U64(idx->total_size, k_hf[d].total_size);
        CHECK_EQ_U64(idx->n, k_hf[d].n_tensors);
        CHECK_EQ_U64(idx->n_files, k_hf[d].n_files);
        uint64_t bytes = 0;
        size_t tensors = 0;
        for (size_t i = 0; i < idx->n_files; i++) {
            snprintf(path, sizeof path, "%s/hf/%s/%s", data, k_hf[d].dir, idx->file_list[i]);
            nvf_st_file *f = NULL;
            CHECK_MSG(nvf_st_open(&f, path) == NVF_OK, "%s", nvf_error_last());
            if (!f)
                continue;
            CHECK_EQ_STR(nvf_st_meta(f, "format"), "pt");
            for (size_t t = 0; t < f->n_tensors; t++) {
                CHECK_EQ_STR(nvf_st_index_file(idx, f->tensors[t].name), idx->file_list[i]);
                bytes += f->tensors[t].end - f->tensors[t].begin;
            }
            tensors += f->n_tensors;
            nvf_st_close(f);
        }
        CHECK_EQ_U64(bytes, k_hf[d].total_size);
        CHECK_EQ_U64(tensors, k_hf[d].n_tensors);
        nvf_st_index_free(idx);
    }
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/nvfp4-test-idx-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_write_exact();
    test_write_empty_and_bad();
    test_read_variants();
    test_read_invalid();
    test_hf_fixtures();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK(system(cmd) == 0);
    return check_summary("test_st_index");
}
