/*
 * Recipes: defaults, YAML parsing with line:column errors, flag overrides, JSON output.
 * Expectations are the values written in SPEC section 4 and positions counted by hand.
 */
#include "check.h"

#include "nvfp4/recipe.h"
#include "nvfp4/status.h"

#include <stdlib.h>

static int parse(nvf_recipe *r, const char *yaml) {
    nvf_recipe_free(r);
    if (nvf_recipe_init(r) < 0)
        return -100;
    return nvf_recipe_parse(r, yaml, strlen(yaml), "t.yaml");
}

static void test_defaults(void) {
    nvf_recipe r;
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(r.version == 1);
    CHECK(r.quant.method == NVF_QUANT_METHOD_4OVER6 && r.quant.error == NVF_QUANT_ERROR_MSE &&
          r.quant.domain == NVF_QUANT_DOMAIN_SCALED && r.quant.e4m3_max == 256);
    CHECK(r.n_include == 1 && strcmp(r.include[0], "*.mlp.experts.*") == 0 && r.n_exclude == 0);
    CHECK(r.target == NVF_TARGET_FORMAT_MODELOPT && r.scale_layout == NVF_SCALE_LAYOUT_128X4);
    CHECK(r.ep == 1 && r.max_shard_size == 5000000000ull);
    CHECK(r.verify_tokens == 64 && r.verify_seed == 0);
    char *js = nvf_recipe_to_json(&r);
    CHECK_EQ_STR(js, "{\"version\":1,\"quantization\":{\"method\":\"4over6\",\"error\":\"mse\","
                     "\"error_domain\":\"scaled\",\"e4m3_max\":256,\"arithmetic\":\"flashinfer\"},"
                     "\"scope\":{\"include\":[\"*."
                     "mlp.experts.*\"],\"exclude\":[]},\"target\":{\"format\":\"modelopt\","
                     "\"scale_layout\":\"128x4\",\"ep\":1},\"output\":{\"max_shard_size\":"
                     "\"5GB\"},\"verify\":{\"tokens\":64,\"seed\":0}}");
    free(js);
    nvf_recipe_free(&r);
    nvf_recipe_free(NULL);
}

static void test_parse(void) {
    nvf_recipe r;
    CHECK(nvf_recipe_init(&r) == 0);
    /* The SPEC's example file gives the defaults back. */
    CHECK(parse(&r,
                "version: 1\n"
                "quantization: {method: 4over6, error: mse, error_domain: scaled, e4m3_max: 256}\n"
                "scope: {include: [\"*.mlp.experts.*\"], exclude: []}\n"
                "target: {format: modelopt, scale_layout: 128x4, ep: 1}  # comment\n"
                "output: {max_shard_size: 5GB}\n"
                "verify: {tokens: 64, seed: 0}\n") == 0);
    CHECK(r.quant.method == NVF_QUANT_METHOD_4OVER6 && r.quant.e4m3_max == 256);
    /* A partial recipe: rtn without e4m3_max gets 448; the rest keeps its defaults. */
    CHECK(parse(&r, "quantization:\n  method: rtn\n") == 0);
    CHECK(r.quant.method == NVF_QUANT_METHOD_RTN && r.quant.e4m3_max == 448);
    CHECK(r.n_include == 1 && r.verify_tokens == 64);
    /* Explicit e4m3_max wins over the method's default, in either order. */
    CHECK(parse(&r, "quantization: {e4m3_max: 256, method: rtn}\n") == 0);
    CHECK(r.quant.e4m3_max == 256);
    CHECK(parse(&r, "quantization: {method: rtn, e4m3_max: 256}\n") == 0);
    CHECK(r.quant.e4m3_max == 256);
    CHECK(parse(&r, "quantization: {error: mae, error_domain: original, e4m3_max: 448}\n") == 0);
    CHECK(r.quant.error == NVF_QUANT_ERROR_MAE && r.quant.domain == NVF_QUANT_DOMAIN_ORIGINAL &&
          r.quant.e4m3_max == 448 && r.quant.method == NVF_QUANT_METHOD_4OVER6);
    CHECK(parse(&r, "scope:\n  include: ['a.*', \"b.*\"]\n  exclude:\n    - '*.0.*'\n") == 0);
    CHECK(r.n_include == 2 && strcmp(r.include[1], "b.*") == 0 && r.n_exclude == 1 &&
          strcmp(r.exclude[0], "*.0.*") == 0);
    CHECK(parse(&r, "scope: {include: []}\n") == 0 && r.n_include == 0);
    CHECK(parse(&r, "target: {format: prepared-w4a16, scale_layout: 128x4, ep: 1}\n") == 0);
    CHECK(r.target == NVF_TARGET_FORMAT_PREPARED_W4A16 &&
          r.scale_layout == NVF_SCALE_LAYOUT_128X4 && r.ep == 1);
    /* The prepared targets' layout and expert-parallel split. */
    CHECK(parse(&r, "target: {scale_layout: 8x4}\n") == 0 &&
          r.scale_layout == NVF_SCALE_LAYOUT_8X4);
    CHECK(parse(&r, "target:\n  ep: 8\n") == 0 && r.ep == 8);
    CHECK(parse(&r, "target:\n  ep: 4097\n") == NVF_E_CONFIG);
    /* Sizes: 512MiB = 536870912; 1.5GB = 1500000000; a plain integer is bytes. */
    CHECK(parse(&r, "output: {max_shard_size: 512MiB}\n") == 0 && r.max_shard_size == 536870912u);
    CHECK(parse(&r, "output: {max_shard_size: 1.5GB}\n") == 0 && r.max_shard_size == 1500000000u);
    CHECK(parse(&r, "output: {max_shard_size: 1000}\n") == 0 && r.max_shard_size == 1000u);
    CHECK(parse(&r, "verify: {tokens: 7, seed: 123456789}\n") == 0);
    CHECK(r.verify_tokens == 7 && r.verify_seed == 123456789u);
    CHECK(parse(&r, "") == 0 && r.quant.e4m3_max == 256);
    CHECK(parse(&r, "# only a comment\n") == 0);
    CHECK(parse(&r, "---\n...\n") == 0);
    nvf_recipe_free(&r);
}

/* Errors name FILE:LINE:COL (1-based) and the key or value. */
static void test_errors(void) {
    static const struct {
        const char *yaml, *where, *what;
    } cases[] = {
        {"quantization:\n  method: rtn\n  foo: 1\n",
         "t.yaml:3:3:", "unknown key 'foo' in section 'quantization'"},
        {"version: 1\nquantisation: {}\n", "t.yaml:2:1:", "unknown section 'quantisation'"},
        {"quantization: {method: fp8}\n",
         "t.yaml:1:24:", "bad value 'fp8' for 'quantization.method' (expected rtn or 4over6)"},
        {"quantization: {error: l2}\n", "t.yaml:1:23:", "'quantization.error'"},
        {"quantization: {error_domain: both}\n", "t.yaml:1:30:", "'quantization.error_domain'"},
        {"quantization:\n  e4m3_max: 300\n", "t.yaml:2:13:", "bad value '300'"},
        {"quantization: {e4m3_max: '448'}\n", "t.yaml:1:26:", "bad value '448'"},
        {"version: 2\n", "t.yaml:1:10:", "bad value '2' for 'version'"},
        {"quantization: rtn\n", "t.yaml:1:15:", "section 'quantization' must be a mapping"},
        {"scope:\n  include: 'a.*'\n", "t.yaml:2:12:", "'scope.include'"},
        {"scope: {exclude: [a, [b]]}\n", "t.yaml:1:22:", "in 'scope.exclude'"},
        {"scope: {include: ['']}\n", "t.yaml:1:19:", "non-empty glob"},
        {"scope: {other: []}\n", "t.yaml:1:9:", "unknown key 'other' in section 'scope'"},
        {"target: {ep: 0}\n", "t.yaml:1:14:", "'target.ep'"},
        {"target: {ep: 1.5}\n", "t.yaml:1:14:", "'target.ep'"},
        {"target: {format: trtllm}\n", "t.yaml:1:18:", "'target.format'"},
        {"target: {scale_layout: 4x4}\n", "t.yaml:1:24:", "'target.scale_layout'"},
        {"output: {max_shard_size: 5 gigabytes}\n", "t.yaml:1:26:", "'output.max_shard_size'"},
        {"output: {max_shard_size: 0}\n", "t.yaml:1:26:", "'output.max_shard_size'"},
        {"verify: {tokens: -1}\n", "t.yaml:1:18:", "'verify.tokens'"},
        {"verify: {seed: x}\n", "t.yaml:1:16:", "'verify.seed'"},
        {"quantization: {method: rtn, method: 4over6}\n",
         "t.yaml:1:29:", "duplicate key 'method' in section 'quantization'"},
        {"version: 1\nversion: 1\n", "t.yaml:2:1:", "duplicate key 'version'"},
        {"- a\n- b\n", "t.yaml:1:1:", "a recipe is a mapping of sections"},
        {"quantization: {method: rtn\nverify: {}\n", "t.yaml:", "YAML syntax error"},
        {"a: 1\n---\nb: 2\n", "t.yaml:1:1:", "unknown section 'a'"},
        {"version: 1\n---\nversion: 1\n", "t.yaml:3:1:", "one YAML document"},
    };
    nvf_recipe r;
    CHECK(nvf_recipe_init(&r) == 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = parse(&r, cases[i].yaml);
        CHECK_MSG(rc == NVF_E_CONFIG, "case %zu: rc %d", i, rc);
        CHECK_CONTAINS(nvf_error_last(), cases[i].where);
        CHECK_CONTAINS(nvf_error_last(), cases[i].what);
    }
    nvf_recipe_free(&r);
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(nvf_recipe_load(&r, "/nonexistent/recipe.yaml") == NVF_E_IO);
    CHECK_CONTAINS(nvf_error_last(), "/nonexistent/recipe.yaml");
    nvf_recipe_free(&r);
}

static void test_flags(void) {
    nvf_recipe r;
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(nvf_recipe_set(&r, "method", "rtn") == 0);
    CHECK(r.quant.method == NVF_QUANT_METHOD_RTN && r.quant.e4m3_max == 448);
    CHECK(nvf_recipe_set(&r, "e4m3-max", "256") == 0 && r.quant.e4m3_max == 256);
    CHECK(nvf_recipe_set(&r, "method", "4over6") == 0 && r.quant.e4m3_max == 256);
    CHECK(nvf_recipe_set(&r, "error", "mae") == 0 && r.quant.error == NVF_QUANT_ERROR_MAE);
    CHECK(nvf_recipe_set(&r, "error-domain", "original") == 0 &&
          r.quant.domain == NVF_QUANT_DOMAIN_ORIGINAL);
    CHECK(nvf_recipe_set(&r, "target", "prepared-w4a4") == 0 &&
          r.target == NVF_TARGET_FORMAT_PREPARED_W4A4);
    CHECK(nvf_recipe_set(&r, "scale-layout", "128x4") == 0 &&
          r.scale_layout == NVF_SCALE_LAYOUT_128X4);
    CHECK(nvf_recipe_set(&r, "ep", "1") == 0 && r.ep == 1);
    CHECK(nvf_recipe_set(&r, "scale-layout", "8x4") == 0 && r.scale_layout == NVF_SCALE_LAYOUT_8X4);
    CHECK(nvf_recipe_set(&r, "ep", "4") == 0 && r.ep == 4);
    CHECK(nvf_recipe_set(&r, "ep", "0") == NVF_E_CONFIG && strstr(nvf_error_last(), "bad value"));
    CHECK(nvf_recipe_set(&r, "max-shard-size", "2GiB") == 0 && r.max_shard_size == 2147483648u);
    CHECK(nvf_recipe_set(&r, "tokens", "16") == 0 && r.verify_tokens == 16);
    CHECK(nvf_recipe_set(&r, "seed", "9") == 0 && r.verify_seed == 9);
    CHECK(nvf_recipe_set(&r, "e4m3-max", "512") == NVF_E_CONFIG);
    CHECK_EQ_STR(nvf_error_last(), "--e4m3-max: bad value '512' (expected 256 or 448)");
    CHECK(nvf_recipe_set(&r, "colour", "red") == NVF_E_INVALID);
    const char *inc[2] = {"*.experts.*", "*.shared_experts.*"};
    CHECK(nvf_recipe_set_globs(&r, 0, inc, 2) == 0 && r.n_include == 2);
    CHECK(nvf_recipe_set_globs(&r, 1, inc, 1) == 0 && r.n_exclude == 1);
    const char *empty = "";
    CHECK(nvf_recipe_set_globs(&r, 1, &empty, 1) == NVF_E_CONFIG && r.n_exclude == 1);
    /* Every flag the table lists is accepted by nvf_recipe_set (with some value). */
    size_t n = 0;
    for (const char *const *f = nvf_recipe_flags(); *f; f++, n++)
        CHECK_MSG(nvf_recipe_set(&r, *f, "zzz") == NVF_E_CONFIG, "flag %s", *f);
    CHECK(n == 11);
    char *js = nvf_recipe_to_json(&r);
    CHECK_CONTAINS(js, "\"method\":\"4over6\",\"error\":\"mae\",\"error_domain\":\"original\","
                       "\"e4m3_max\":256");
    CHECK_CONTAINS(js, "\"include\":[\"*.experts.*\",\"*.shared_experts.*\"]");
    CHECK_CONTAINS(js, "\"max_shard_size\":\"2GiB\"");
    free(js);
    nvf_recipe_free(&r);
}

/* Size and nesting are bounded before YAML loading (issue #11 item 14). */
static void test_bounds(void) {
    nvf_recipe r;
    CHECK(nvf_recipe_init(&r) == 0);
    /* "q: " then 64 '[' (the root mapping is level 1): level 65 opens at column 67. */
    char deep[256];
    int n = snprintf(deep, sizeof deep, "q: ");
    for (int i = 0; i < 64; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    CHECK(parse(&r, deep) == NVF_E_CONFIG);
    CHECK_CONTAINS(nvf_error_last(), "t.yaml:1:67: nested deeper than 64 levels");
    deep[n - 1] = '\0'; /* 64 levels: past the bound, then an ordinary syntax error */
    CHECK(parse(&r, deep) == NVF_E_CONFIG);
    CHECK_CONTAINS(nvf_error_last(), "YAML syntax error");
    size_t big = ((size_t)1 << 20) + 1;
    char *text = malloc(big);
    CHECK(text != NULL);
    if (text) {
        memset(text, '#', big);
        CHECK(nvf_recipe_parse(&r, text, big, "t.yaml") == NVF_E_CONFIG);
        CHECK_CONTAINS(nvf_error_last(), "t.yaml: 1048577 bytes; a recipe is at most 1048576");
        CHECK(nvf_recipe_parse(&r, text, big - 1, "t.yaml") == 0); /* one comment, 1 MiB */
        free(text);
    }
    nvf_recipe_free(&r);
}

int main(void) {
    test_defaults();
    test_parse();
    test_errors();
    test_flags();
    test_bounds();
    return check_summary("test_recipe");
}
