/*
 * The ModelOpt config rules (nvfp4/modelopt_rules.h) on small checkpoints written here: one
 * NVFP4 linear (q_proj: U8 weight, F8_E4M3 weight_scale, F32 scalars) and a BF16 lm_head, with
 * config.json and hf_quant_config.json varied one rule at a time; each case expects exactly the
 * finding ids its construction breaks. Also the naming helpers validate asks lib/ckpt, and the
 * shared findings list (stable sort).
 */
#include "check.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/finding.h"
#include "nvfp4/modelopt_rules.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char g_root[256];

static void write_file(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A checkpoint directory `name` with the shard (nvfp4: the q_proj linear is NVFP4) and the two
 * configs (NULL: absent). */
static nvf_ckpt *make(const char *name, int nvfp4, const char *qc, const char *hqc) {
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s/%s", g_root, name);
    mkdir(dir, 0755);
    static uint8_t w[32 * 8], bf[8 * 16 * 2], lm[8 * 16 * 2];
    static uint8_t s[32];
    float one = 1.0f;
    memset(s, 0x38, sizeof s); /* E4M3 1.0 */
    nvf_st_entry e[5] = {
        {"lm_head.weight", NVF_DTYPE_BF16, 2, {8, 16}},
        {"model.layers.0.self_attn.q_proj.input_scale", NVF_DTYPE_F32, 0, {0}},
        {"model.layers.0.self_attn.q_proj.weight", NVF_DTYPE_U8, 2, {32, 8}},
        {"model.layers.0.self_attn.q_proj.weight_scale", NVF_DTYPE_F8_E4M3, 2, {32, 1}},
        {"model.layers.0.self_attn.q_proj.weight_scale_2", NVF_DTYPE_F32, 0, {0}},
    };
    const void *data[5] = {lm, &one, w, s, &one};
    size_t n = 5;
    if (!nvfp4) {
        e[1] = (nvf_st_entry){"model.layers.0.self_attn.q_proj.weight", NVF_DTYPE_BF16, 2, {8, 16}};
        data[1] = bf;
        n = 2;
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK_MSG(nvf_st_write_file(p, e, data, n) == 0, "%s", nvf_error_last());
    char cfg[2048];
    snprintf(cfg, sizeof cfg, "{\"model_type\": \"llama\", \"hidden_size\": 16%s%s}",
             qc ? ", \"quantization_config\": " : "", qc ? qc : "");
    write_file(dir, "config.json", cfg);
    if (hqc)
        write_file(dir, NVF_MODELOPT_HF_QUANT_CONFIG, hqc);
    nvf_ckpt *ck = NULL;
    CHECK_MSG(nvf_ckpt_open(&ck, dir) == 0, "open %s: %s", dir, nvf_error_last());
    return ck;
}

/* Run the rules; the ids found must be exactly `want` (space-separated, sorted, may repeat). */
static void expect(const char *name, int nvfp4, const char *qc, const char *hqc, const char *want) {
    nvf_ckpt *ck = make(name, nvfp4, qc, hqc);
    if (!ck)
        return;
    nvf_findings l = {0};
    CHECK(nvf_modelopt_check_config(&l, ck) == 0);
    nvf_findings_sort(&l);
    char got[1024] = "";
    const char *ids[16];
    size_t n = 0;
    for (size_t i = 0; i < l.n && n < 16; i++)
        ids[n++] = l.v[i].id;
    /* sort the ids alone for the comparison */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(ids[j], ids[j - 1]) < 0; j--) {
            const char *t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? " " : "", ids[i]);
    CHECK_MSG(strcmp(got, want) == 0, "%s: findings '%s', expected '%s'", name, got, want);
    for (size_t i = 0; i < l.n; i++)
        CHECK_MSG(strcmp(l.v[i].severity, "error") == 0 && l.v[i].file[0] && l.v[i].message[0],
                  "%s: %s", name, l.v[i].message);
    nvf_findings_free(&l);
    nvf_ckpt_close(ck);
}

#define QC(method, algo, gs, ignore)                                                               \
    "{\"quant_method\": \"" method "\", \"quant_algo\": \"" algo "\", \"group_size\": " gs         \
    ", \"ignore\": " ignore "}"
#define HQC(algo, gs, exclude)                                                                     \
    "{\"producer\": {\"name\": \"x\"}, \"quantization\": {\"quant_algo\": \"" algo                 \
    "\", \"group_size\": " gs ", \"exclude_modules\": " exclude "}}"

static void test_rules(void) {
    expect("good", 1, QC("modelopt", "NVFP4", "16", "[\"lm_head\"]"),
           HQC("NVFP4", "16", "[\"lm_head\"]"), "");
    expect("hqc_only", 1, NULL, HQC("NVFP4", "16", "[\"lm_head\"]"), "");
    expect("group", 1, QC("modelopt", "NVFP4", "16", "[\"lm_head\"]"),
           HQC("NVFP4", "32", "[\"lm_head\"]"), "modelopt.config-mismatch modelopt.group-size");
    expect("method", 1, QC("fp8", "NVFP4", "16", "[\"lm_head\"]"),
           HQC("NVFP4", "16", "[\"lm_head\"]"), "modelopt.quant-method");
    expect("algo", 1, QC("modelopt", "FP8", "16", "[\"lm_head\"]"),
           HQC("FP8", "16", "[\"lm_head\"]"), "modelopt.quant-algo modelopt.quant-algo");
    expect("mixed", 1, NULL, HQC("MIXED_PRECISION", "16", "[\"lm_head\"]"), "modelopt.quant-algo");
    expect("empty", 1, QC("modelopt", "NVFP4", "16", "[\"lm_head\"]"), HQC("NVFP4", "16", "[]"),
           "modelopt.config-mismatch modelopt.exclude-modules-empty");
    expect("excluded", 1, NULL,
           HQC("NVFP4", "16", "[\"lm_head\", \"model.layers.0.self_attn.q_proj\"]"),
           "modelopt.config-contradicts-tensors");
    expect("no_config", 1, NULL, NULL, "modelopt.quant-config-missing");
    expect("no_nvfp4", 0, QC("modelopt", "NVFP4", "16", "[\"lm_head\"]"), NULL,
           "modelopt.config-contradicts-tensors");
    expect("bf16", 0, NULL, NULL, "");
}

static void test_naming(void) {
    int64_t r = -1, n = -1;
    CHECK(nvf_ckpt_rank_dir_parse("rank-00001-of-00004", &r, &n) == 1 && r == 1 && n == 4);
    CHECK(nvf_ckpt_rank_dir_parse("rank-00004-of-00004", &r, &n) == 0);
    CHECK(nvf_ckpt_rank_dir_parse("rank-0001-of-00004", &r, &n) == 0);
    CHECK(nvf_ckpt_rank_dir_parse("rank-0000x-of-00004", &r, &n) == 0);
    char dirname[32];
    CHECK(nvf_ckpt_rank_dir_name(dirname, sizeof dirname, 3, 12) == 0);
    CHECK_EQ_STR(dirname, "rank-00003-of-00012");
    char key[256], name[256];
    CHECK(nvf_ckpt_group_of(key, sizeof key, "m.layers.1.mlp.experts.3.up_proj.weight") ==
          NVF_GROUP_GATE_UP);
    CHECK_EQ_STR(key, "m.layers.1.mlp.experts.3.{gate,up}.weight");
    CHECK(nvf_ckpt_group_of(key, sizeof key, "m.layers.1.self_attn.k_proj.weight") ==
          NVF_GROUP_QKV);
    CHECK(nvf_ckpt_group_of(key, sizeof key, "m.layers.1.self_attn.o_proj.weight") ==
          NVF_GROUP_NONE);
    CHECK(nvf_ckpt_companion_name(name, sizeof name, "a.b.weight", NVF_COMPANION_SCALE_2, 0) == 0);
    CHECK_EQ_STR(name, "a.b.weight_scale_2");
    CHECK(nvf_ckpt_companion_name(name, sizeof name, "a.b.weight_packed", NVF_COMPANION_INPUT, 1) ==
          0);
    CHECK_EQ_STR(name, "a.b.input_global_scale");
    CHECK(nvf_ckpt_prepared_name(name, sizeof name, "model.layers.2", NVF_PREP_W2_SCALE) == 0);
    CHECK_EQ_STR(name, "model.layers.2.mlp.experts.w2_weight_scale");
}

static void test_sort(void) {
    nvf_findings l = {0};
    CHECK(nvf_findings_add(&l, "b.x", "error", "f2", "t", "m") == 0);
    CHECK(nvf_findings_add(&l, "a.x", "warning", "f1", "t", "same") == 0);
    CHECK(nvf_findings_add(&l, "a.x", "error", "f1", "t", "same") == 0);
    CHECK(nvf_findings_add(&l, "a.y", "error", "", "", "z") == 0);
    nvf_findings_sort(&l);
    CHECK_EQ_STR(l.v[0].file, "");
    CHECK_EQ_STR(l.v[1].severity, "warning"); /* equal keys keep their order */
    CHECK_EQ_STR(l.v[2].severity, "error");
    CHECK_EQ_STR(l.v[3].file, "f2");
    CHECK(nvf_findings_errors(&l) == 3);
    nvf_findings_free(&l);
    CHECK(l.n == 0 && l.v == NULL);
}

int main(void) {
    snprintf(g_root, sizeof g_root, "/tmp/nvf_rules_XXXXXX");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }
    test_rules();
    test_naming();
    test_sort();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_root);
    return check_summary("test_modelopt_rules");
}
