/*
 * The conversion plan (lib/convert): jobs, quantization groups, output tensors, shard
 * assignment and --input-amax, on the transformers-written Qwen3-MoE fixture (2 MoE layers,
 * 4 experts, hidden 128, moe_intermediate 128; tests/data/hf/qwen3moe-bf16). The expected
 * counts and values are worked out by hand from that layout.
 */
#include "check.h"

#include "convert/convert_internal.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

int main(void) {
    const char *data = getenv("NVFP4_TESTDATA");
    if (!data) {
        fprintf(stderr, "NVFP4_TESTDATA not set\n");
        return 77;
    }
    char src[1024];
    snprintf(src, sizeof src, "%s/hf/qwen3moe-bf16", data);
    nvf_ckpt *ck = NULL;
    nvf_recipe r;
    nvf_convert_options o;
    cv_plan *p = NULL;
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(nvf_ckpt_open(&ck, src) == 0);
    if (!ck)
        return check_summary("convert");
    nvf_convert_options_init(&o, src, "/nonexistent", &r);

    /* Default scope: 2 layers x 4 experts; per expert one gate+up job (2 members, 8 outputs)
     * and one down job (4 outputs). */
    CHECK(cv_plan_build(&p, ck, &o) == 0);
    size_t quant_jobs = 0, pairs = 0, quant_outs = 0;
    for (size_t i = 0; p && i < p->n_jobs; i++) {
        const cv_job *j = &p->jobs[i];
        if (j->kind != CV_JOB_QUANT)
            continue;
        quant_jobs++;
        quant_outs += j->n_out;
        if (j->n_members == 2) {
            pairs++;
            CHECK(strstr(j->members[0].module[0], ".gate_proj") != NULL);
            CHECK(strstr(j->members[1].module[0], ".up_proj") != NULL);
            CHECK_EQ_U64(j->n_out, 8);
            CHECK_EQ_STR(p->outs[j->first_out + 3].name + strlen(j->members[0].module[0]),
                         ".input_scale");
        }
    }
    CHECK_EQ_U64(quant_jobs, 16);
    CHECK_EQ_U64(pairs, 8);
    CHECK_EQ_U64(quant_outs, 8 * 8 + 8 * 4);
    CHECK_EQ_U64(p ? p->counts.linears_quantized : 0, 24);
    CHECK_EQ_U64(p ? p->n_shards : 0, 1); /* 5GB default */
    /* An expert's gate weight: U8 [128, 64] = 8192 bytes, scale F8_E4M3 [128, 8] = 1024. */
    for (size_t i = 0; p && i < p->n_outs; i++) {
        if (strcmp(p->outs[i].name, "model.layers.1.mlp.experts.3.gate_proj.weight") == 0)
            CHECK_EQ_U64(p->outs[i].bytes, 8192);
        if (strcmp(p->outs[i].name, "model.layers.1.mlp.experts.3.gate_proj.weight_scale") == 0)
            CHECK_EQ_U64(p->outs[i].bytes, 1024);
    }
    cv_plan_free(p);
    p = NULL;

    /* Small shards: every shard holds whole jobs, in order, at most the maximum unless it is a
     * single job larger than that; the shards cover every output once. */
    CHECK(nvf_recipe_set(&r, "max-shard-size", "20000") == 0);
    CHECK(cv_plan_build(&p, ck, &o) == 0);
    uint64_t total = 0;
    size_t next_job = 0, next_out = 0;
    for (size_t s = 0; p && s < p->n_shards; s++) {
        const cv_shard *sh = &p->shards[s];
        CHECK_EQ_U64(sh->first_job, next_job);
        CHECK_EQ_U64(sh->first_out, next_out);
        CHECK_MSG(sh->tensor_bytes <= 20000 || sh->n_jobs == 1, "shard %zu holds %llu bytes", s,
                  (unsigned long long)sh->tensor_bytes);
        next_job += sh->n_jobs;
        next_out += sh->n_out;
        total += sh->tensor_bytes;
    }
    CHECK(p && p->n_shards > 2);
    CHECK_EQ_U64(next_job, p ? p->n_jobs : 0);
    CHECK_EQ_U64(total, p ? p->total_size : 0);

    /* --input-amax: gate 2688 and up 5376 share max = 5376 -> 5376 / (6 * 448) = 2.0 exactly;
     * a module not listed keeps 1.0; 0 is refused. */
    char path[] = "/tmp/nvfp4-test-convert-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write_text(path, "{\"model.layers.0.mlp.experts.1.gate_proj\": 2688,"
                           " \"model.layers.0.mlp.experts.1.up_proj\": 5376}") == 0);
    CHECK(p && cv_plan_input_scales(p, path) == 0);
    int found = 0;
    for (size_t i = 0; p && i < p->n_jobs; i++) {
        const cv_job *j = &p->jobs[i];
        if (j->kind != CV_JOB_QUANT)
            continue;
        if (strcmp(j->members[0].module[0], "model.layers.0.mlp.experts.1.gate_proj") == 0) {
            found = 1;
            CHECK(j->input_scale == 2.0f);
        } else {
            CHECK(j->input_scale == 1.0f);
        }
    }
    CHECK(found);
    CHECK(write_text(path, "{\"model.layers.0.mlp.experts.1.gate_proj\": 0}") == 0);
    CHECK(p && cv_plan_input_scales(p, path) == NVF_E_INVALID);
    remove(path);
    if (fd >= 0)
        close(fd);

    cv_plan_free(p);
    nvf_ckpt_close(ck);
    nvf_recipe_free(&r);
    return check_summary("convert");
}
