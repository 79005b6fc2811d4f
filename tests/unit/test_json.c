/*
 * The library's JSON under memory pressure (issue #10 item 6): every writer and reader of a
 * JSON document, run with cJSON allowed 0, 1, 2, ... allocations (cJSON_InitHooks with a
 * failing malloc), must either succeed or fail with NVF_E_NOMEM, never crash, never report a
 * malformed file, never succeed with an allocation lost. And the grammar check that tells the
 * two apart (nvf_json_syntax_ok) agrees with cJSON itself on hand-picked texts.
 */
#include "check.h"

#include "convert/convert_internal.h"
#include "io/json_strict.h"
#include "manifest/manifest_internal.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/convert.h"
#include "nvfp4/fileio.h"
#include "nvfp4/manifest.h"
#include "nvfp4/recipe.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"
#include "nvfp4/synth.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The failing allocator: `g_budget` more allocations succeed, then every one fails. */
static long g_budget;
static int g_denied;

static void *limited_malloc(size_t n) {
    if (g_budget <= 0) {
        g_denied = 1;
        return NULL;
    }
    g_budget--;
    return malloc(n);
}

/* One run of a writer or reader: NVF_OK or a negative status; frees what it made. */
typedef int (*step_fn)(void *ctx);

/*
 * Run `step` with a budget of 0, 1, 2, ... cJSON allocations until a run is not denied any.
 * A denied run must return NVF_E_NOMEM; the first run with enough memory must succeed.
 * @return how many budgets were tried (so that a test can check the loop covered the build).
 */
static long each_budget(const char *what, step_fn step, void *ctx) {
    cJSON_Hooks hooks = {limited_malloc, free};
    long n;
    for (n = 0; n < 1000000; n++) {
        g_budget = n;
        g_denied = 0;
        nvf_error_clear();
        cJSON_InitHooks(&hooks);
        int rc = step(ctx);
        cJSON_InitHooks(NULL);
        if (!g_denied) {
            CHECK_MSG(rc == NVF_OK, "%s with enough memory: %s", what, nvf_error_last());
            break;
        }
        if (rc != NVF_E_NOMEM) {
            CHECK_MSG(rc == NVF_E_NOMEM, "%s with %ld cJSON allocations: got %d (%s)", what, n, rc,
                      nvf_error_last());
            break;
        }
    }
    return n;
}

/* A NULL result of a writer that sets the error: its code. */
static int text_rc(char *text) {
    int rc = text ? NVF_OK : nvf_error_code();
    free(text);
    return rc;
}

/* Writers ----------------------------------------------------------------------------------- */

static int step_summary(void *ctx) {
    return text_rc(nvf_convert_summary_to_json(ctx));
}

static int step_recipe(void *ctx) {
    return text_rc(nvf_recipe_to_json(ctx));
}

static int step_synth_config(void *ctx) {
    return text_rc(nvf_synth_config_json(ctx));
}

typedef struct meta_ctx {
    cv_plan *plan;
    cJSON *source_config;
} meta_ctx;

/* The three ModelOpt documents; the NULL of a builder is its out-of-memory report. */
static int step_meta(void *ctx) {
    meta_ctx *m = ctx;
    int rc = NVF_OK;
    for (int mixed = 0; mixed <= 1 && rc == NVF_OK; mixed++) {
        cJSON *d[3] = {cv_meta_config(m->plan, m->source_config, mixed),
                       cv_meta_hf_quant_config(m->plan, mixed),
                       cv_meta_quant_config(m->plan, mixed)};
        for (int i = 0; i < 3; i++) {
            if (!d[i])
                rc = NVF_E_NOMEM;
            cJSON_Delete(d[i]);
        }
    }
    return rc;
}

static void test_writers(void) {
    nvf_convert_summary s = {.tensors_quantized = 3,
                             .linears_quantized = 2,
                             .tensors_kept = 5,
                             .tensors_dequantized = 1,
                             .tensors_dropped = 4,
                             .tensors_written = 13,
                             .shards = 2,
                             .shards_reused = 1,
                             .bytes_in = 1000,
                             .bytes_out = 600};
    /* 1 object + 9 numbers (each a node and a key) + the printed text, at least. */
    CHECK(each_budget("convert summary", step_summary, &s) >= 11);
    char *text = nvf_convert_summary_to_json(&s);
    CHECK_EQ_STR(text, "{\"tensors_quantized\":3,\"linears_quantized\":2,\"tensors_kept\":5,"
                       "\"tensors_dequantized\":1,\"tensors_dropped\":4,\"tensors_written\":13,"
                       "\"shards\":2,\"bytes_in\":1000,\"bytes_out\":600}");
    free(text);

    nvf_recipe r;
    CHECK(nvf_recipe_init(&r) == NVF_OK);
    const char *globs[] = {"*.mlp.*", "*.self_attn.*"};
    CHECK(nvf_recipe_set_globs(&r, 1, globs, 2) == NVF_OK);
    CHECK(each_budget("recipe", step_recipe, &r) >= 20);
    nvf_recipe_free(&r);

    nvf_synth_options o;
    nvf_synth_options_init(&o);
    nvf_synth_plan *plan = NULL;
    CHECK(nvf_synth_plan_build(&plan, &o) == NVF_OK);
    if (plan) {
        CHECK(each_budget("synth config.json", step_synth_config, plan) >= 40);
        nvf_synth_plan_free(plan);
    }
    o.preset = NVF_SYNTH_PRESET_DEEPSEEK_V3;
    o.dtype = NVF_SYNTH_DTYPE_FP8_BLOCK;
    plan = NULL;
    CHECK(nvf_synth_plan_build(&plan, &o) == NVF_OK);
    if (plan) {
        CHECK(each_budget("synth DeepSeek FP8 config.json", step_synth_config, plan) >= 40);
        nvf_synth_plan_free(plan);
    }

    cv_plan p = {0};
    p.exclude_modules = cJSON_Parse("[\"lm_head\", \"model.layers.0.mlp.gate\"]");
    p.fp8_modules = cJSON_Parse("{\"model.layers.0.self_attn.q_proj\": \"FP8_PB_WO\"}");
    p.nvfp4_modules = cJSON_Parse("[\"model.layers.0.mlp.experts.0.up_proj\"]");
    meta_ctx m = {&p, cJSON_Parse("{\"model_type\": \"qwen3_moe\", \"quantization_config\": "
                                  "{\"quant_method\": \"fp8\"}, \"base_model_ep_plan\": "
                                  "{\"a.weight_scale_inv\": \"local\", \"a.weight\": \"local\"}}")};
    CHECK(p.exclude_modules && p.fp8_modules && p.nvfp4_modules && m.source_config);
    CHECK(each_budget("ModelOpt metadata", step_meta, &m) >= 30);
    cJSON_Delete(p.exclude_modules);
    cJSON_Delete(p.fp8_modules);
    cJSON_Delete(p.nvfp4_modules);
    cJSON_Delete(m.source_config);
}

/* Readers ----------------------------------------------------------------------------------- */

static const char k_manifest[] =
    "{\n \"manifest_version\": 1,\n \"tool\": {\"name\": \"nvfp4tool\", \"version\": \"0.1.0\"},\n"
    " \"recipe\": {\"version\": 1, \"quantization\": {\"method\": \"4over6\"}},\n"
    " \"target\": {\"format\": \"modelopt\", \"layout\": null},\n"
    " \"source\": {\"files\": [{\"name\": \"config.json\", \"bytes\": 2, \"sha256\": "
    "\"0000000000000000000000000000000000000000000000000000000000000000\"}]},\n"
    " \"files\": [{\"name\": \"model.safetensors\", \"bytes\": 80, \"sha256\": "
    "\"1111111111111111111111111111111111111111111111111111111111111111\"}],\n"
    " \"tensors\": [{\"name\": \"w\", \"file\": \"model.safetensors\", \"dtype\": \"BF16\", "
    "\"shape\": [2, 2], \"crc32\": \"00000000\"}],\n"
    " \"summary\": {\"tensors_quantized\": 0, \"source_format\": \"BF16\"}\n}\n";

static int step_manifest(void *ctx) {
    (void)ctx;
    nvf_manifest *m = NULL;
    int rc = nvf_manifest_parse(&m, "nvfp4-manifest.json", k_manifest, strlen(k_manifest));
    if (rc == NVF_OK) {
        /* What was read is whole: written back, it is the document (re-indented). */
        char *text = NULL;
        size_t len = 0;
        rc = nvf_manifest_to_string(&text, &len, m);
        if (rc == NVF_OK && !strstr(text, "\"source_format\": \"BF16\""))
            rc = NVF_E_INVALID;
        free(text);
    }
    nvf_manifest_free(m);
    return rc;
}

static int step_strict(void *ctx) {
    cJSON *root = NULL;
    const char *text = ctx;
    int rc = nvf_json_parse_strict(&root, text, strlen(text), "journal", "j.json", 0);
    cJSON_Delete(root);
    return rc;
}

/* A safetensors header of one BF16 [2, 2] tensor, padded to 8 bytes, then its 8 data bytes. */
static size_t st_bytes(uint8_t *out) {
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"BF16\",\"shape\":"
                      "[2,2],\"data_offsets\":[0,8]}}";
    size_t n = strlen(hdr), padded = (n + 7) / 8 * 8;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memset(out + 8, ' ', padded);
    memcpy(out + 8, hdr, n);
    memset(out + 8 + padded, 0, 8);
    return 8 + padded + 8;
}

static int step_st(void *ctx) {
    uint8_t buf[256];
    size_t len = st_bytes(buf);
    nvf_st_file *f = NULL;
    (void)ctx;
    int rc = nvf_st_parse(&f, "model.safetensors", buf, len, len);
    if (rc == NVF_OK && (f->n_tensors != 1 || !nvf_st_find(f, "w")))
        rc = NVF_E_INVALID;
    nvf_st_close(f);
    return rc;
}

static int step_ckpt(void *ctx) {
    nvf_ckpt *ck = NULL;
    int rc = nvf_ckpt_open(&ck, ctx);
    char *qc = NULL;
    if (rc == NVF_OK)
        rc = nvf_ckpt_config_json(&qc, ck, "quantization_config");
    if (rc == NVF_OK && (!qc || strcmp(qc, "{\"quant_method\":\"none\",\"bits\":16}") != 0))
        rc = NVF_E_INVALID;
    free(qc);
    nvf_ckpt_close(ck);
    return rc;
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len);
    if (f)
        fclose(f);
}

static void test_readers(void) {
    CHECK(each_budget("manifest", step_manifest, NULL) >= 40);
    CHECK(each_budget("strict JSON", step_strict,
                      "{\"key\": \"k\", \"shards\": [{\"name\": \"a\", \"bytes\": 1}]}") >= 8);
    CHECK(each_budget("safetensors header", step_st, NULL) >= 8);

    char dir[] = "/tmp/nvf_test_json_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *cfg = "{\"model_type\": \"llama\", \"quantization_config\": "
                      "{\"quant_method\": \"none\", \"bits\": 16}}";
    write_file(path, cfg, strlen(cfg));
    uint8_t buf[256];
    size_t len = st_bytes(buf);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_file(path, buf, len);
    CHECK(each_budget("checkpoint", step_ckpt, dir) >= 12);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

/* The grammar check -------------------------------------------------------------------------- */

static char *nested(int depth) {
    char *s = malloc((size_t)depth * 2 + 1);
    memset(s, '[', (size_t)depth);
    memset(s + depth, ']', (size_t)depth);
    s[depth * 2] = '\0';
    return s;
}

/* nvf_json_syntax_ok(text) must be what cJSON says (with all the memory it wants), and `ok`. */
static void agree(const char *text, int ok) {
    cJSON *j = cJSON_ParseWithOpts(text, NULL, 1);
    int got = nvf_json_syntax_ok(text, strlen(text), 0);
    CHECK_MSG(got == ok, "nvf_json_syntax_ok(%.60s) = %d, expected %d", text, got, ok);
    CHECK_MSG((j != NULL) == ok, "cJSON on %.60s: %s, expected %d", text, j ? "parsed" : "NULL",
              ok);
    cJSON_Delete(j);
}

static void test_syntax(void) {
    agree("{}", 1);
    agree(" [1, -2.5e+3, 0, true, false, null, \"x\"] ", 1);
    agree("{\"a\": {\"b\": [\"\\u00e9\\ud83d\\ude00\\n\\/\"]}}", 1);
    agree("\xEF\xBB\xBF{\"bom\": 1}", 1);
    agree("", 0);
    agree("{\"a\": 1,}", 0);
    agree("[1 2]", 0);
    agree("{\"a\" 1}", 0);
    agree("{1: 2}", 0);
    agree("[\"\\x\"]", 0);
    agree("[\"\\ud800\"]", 0);        /* lone high surrogate */
    agree("[\"\\udc00\"]", 0);        /* lone low surrogate */
    agree("[\"\\ud800\\u0041\"]", 0); /* high surrogate, then not a low one */
    agree("[\"abc]", 0);
    agree("[tru]", 0);
    agree("{} x", 0);
    /* A long number (cJSON 1.7.15 as Debian patches it reads one whole). */
    char num[101];
    memset(num, '7', 100);
    num[100] = '\0';
    agree(num, 1);
    /* Nesting: cJSON's limit. */
    char *s = nested(CJSON_NESTING_LIMIT);
    agree(s, 1);
    free(s);
    s = nested(CJSON_NESTING_LIMIT + 1);
    agree(s, 0);
    free(s);
    /* Trailing text, when the caller allows it (config.json is read that way). */
    CHECK(nvf_json_syntax_ok("{} x", 4, 1) == 1);
    CHECK(nvf_json_syntax_ok("{", 1, 1) == 0);
}

int main(void) {
    test_syntax();
    test_writers();
    test_readers();
    return check_summary("test_json");
}
