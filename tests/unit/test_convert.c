/*
 * The conversion plan (lib/convert): jobs, quantization groups, output tensors, shard
 * assignment and --input-amax, on the transformers-written Qwen3-MoE fixture (2 MoE layers,
 * 4 experts, hidden 128, moe_intermediate 128; tests/data/hf/qwen3moe-bf16). The expected
 * counts and values are worked out by hand from that layout. Then the modelopt target's job
 * layout on hand-made codes, and a whole run's progress (source bytes).
 */
#include "check.h"

#include "convert/convert_internal.h"
#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static nvf_backend *g_cpu; /* the prepared pack lays scales out on a backend */

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* modelopt lays a linear out as codes | block scales | F32 scale_2 = 1/gs | F32 input_scale;
 * a split (fused gate_up) member as its first half of rows, then its second half. */
static void test_modelopt_pack(void) {
    uint8_t codes[2][32], scales[2][4], buf[44 + 2 * (16 + 2 + 8)];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 32; i++) {
            codes[k][i] = (uint8_t)(16 * k + i);
            scales[k][i % 4] = (uint8_t)(0xA0 + 4 * k + i % 4);
        }
    uint8_t *packed[2] = {codes[0], codes[1]}, *sc[2] = {scales[0], scales[1]};
    cv_job j;
    memset(&j, 0, sizeof j);
    j.kind = CV_JOB_QUANT;
    j.n_members = 2;
    j.input_scale = 2.0f;
    j.members[0].src.rows = 2; /* [2, 32]: 32 code bytes, 4 scales */
    j.members[0].src.cols = 32;
    j.members[1].src.rows = 4; /* split [4, 16]: gate rows 0-1, up rows 2-3 */
    j.members[1].src.cols = 16;
    j.members[1].split = 1;
    memset(buf, 0xEE, sizeof buf);
    cv_target_modelopt.pack_job(g_cpu, buf, &j, packed, sc, 0.25f); /* weight_scale_2 as given */
    const uint32_t quarter = 0x3E800000u, two = 0x40000000u;        /* 0.25f = 1/4, 2.0f */
    CHECK(memcmp(buf, codes[0], 32) == 0 && memcmp(buf + 32, scales[0], 4) == 0);
    CHECK_EQ_U64(le32(buf + 36), quarter);
    CHECK_EQ_U64(le32(buf + 40), two);
    const uint8_t *g = buf + 44, *u = buf + 44 + 16 + 2 + 8;
    CHECK(memcmp(g, codes[1], 16) == 0 && memcmp(g + 16, scales[1], 2) == 0);
    CHECK_EQ_U64(le32(g + 18), quarter);
    CHECK_EQ_U64(le32(g + 22), two);
    CHECK(memcmp(u, codes[1] + 16, 16) == 0 && memcmp(u + 16, scales[1] + 2, 2) == 0);
    CHECK_EQ_U64(le32(u + 18), quarter);
    CHECK_EQ_U64(le32(u + 22), two);
}

/*
 * The prepared w13 job of one expert, I = 64, H = 32 (2 scale columns): gate row i holds bytes
 * i, up row i bytes 128 + i; gate scale (i, k) is 2i + k, up's 128 + 2i + k. Hand-worked from
 * SPEC section 5: output rows 0..63 are up rows 0..63, rows 64..127 gate rows 0..63 (one group
 * pair); scale (m, k) of the 128 x 4 tile sits at (m % 32) * 16 + (m / 32) * 4 + k, columns 2
 * and 3 are padding (0). Then alpha = the decode scale 1/gs given to the pack (W4A16: 0.25 for
 * gs 4), input_scale / gs and input_scale (W4A4).
 * The same bytes from a fused member (gate rows first, then up) as from two members.
 */
static void test_prepared_w13(void) {
    enum { I = 64, H = 32, RB = H / 2, KC = H / 16, SB = 512, LEN = 2 * I * RB + SB + 8 };
    static uint8_t gate[I * RB], up[I * RB], gs_[I * KC], us[I * KC], fused[2 * I * RB],
        fs[2 * I * KC], buf[LEN], buf2[LEN];
    for (int i = 0; i < I; i++) {
        memset(gate + i * RB, i, RB);
        memset(up + i * RB, 128 + i, RB);
        for (int k = 0; k < KC; k++) {
            gs_[i * KC + k] = (uint8_t)(2 * i + k);
            us[i * KC + k] = (uint8_t)(128 + 2 * i + k);
        }
    }
    memcpy(fused, gate, sizeof gate);
    memcpy(fused + sizeof gate, up, sizeof up);
    memcpy(fs, gs_, sizeof gs_);
    memcpy(fs + sizeof gs_, us, sizeof us);
    cv_job j;
    memset(&j, 0, sizeof j);
    j.kind = CV_JOB_QUANT;
    j.prep = CV_PREP_W13;
    j.layout = NVF_LAYOUT_128X4;
    j.input_scale = 2.0f;
    j.n_members = 2;
    /* up first: the pack goes by each member's projection, not by its place */
    j.members[0].proj = NVF_PROJ_UP;
    j.members[1].proj = NVF_PROJ_GATE;
    for (int k = 0; k < 2; k++) {
        j.members[k].src.rows = I;
        j.members[k].src.cols = H;
    }
    uint8_t *packed[2] = {up, gate}, *sc[2] = {us, gs_};
    memset(buf, 0xEE, sizeof buf);
    cv_target_prepared_w4a4.pack_job(g_cpu, buf, &j, packed, sc, 0.25f);
    CHECK(buf[0] == 128 && buf[63 * RB] == 128 + 63 && buf[64 * RB] == 0 &&
          buf[127 * RB + RB - 1] == 63);
    const uint8_t *s = buf + 2 * I * RB;
    CHECK(s[1] == 129);                           /* m 0 (up 0), k 1 */
    CHECK(s[8] == 0);                             /* m 64 (gate 0), k 0 */
    CHECK(s[21] == 195);                          /* m 33 (up 33), k 1: 16 + 4 + 1 */
    CHECK(s[509] == 127);                         /* m 127 (gate 63), k 1: 31 * 16 + 3 * 4 + 1 */
    CHECK(s[2] == 0 && s[3] == 0 && s[511] == 0); /* padding columns */
    CHECK_EQ_U64(le32(s + SB), 0x3F000000u);      /* 2 * (1/4) = 0.5 */
    CHECK_EQ_U64(le32(s + SB + 4), 0x40000000u);  /* input_scale 2.0 */
    /* A fused member (gate rows then up) gives the same bytes; W4A16 has alpha 1/gs only. */
    j.n_members = 1;
    j.members[0].split = 1;
    j.members[0].proj = NVF_PROJ_GATE_UP;
    j.members[0].src.rows = 2 * I;
    uint8_t *fp[1] = {fused}, *fsc[1] = {fs};
    memset(buf2, 0xEE, sizeof buf2);
    cv_target_prepared_w4a4.pack_job(g_cpu, buf2, &j, fp, fsc, 0.25f);
    CHECK(memcmp(buf, buf2, LEN) == 0);
    memset(buf2, 0xEE, sizeof buf2);
    cv_target_prepared_w4a16.pack_job(g_cpu, buf2, &j, fp, fsc, 0.25f);
    CHECK(memcmp(buf, buf2, LEN - 8) == 0);
    CHECK_EQ_U64(le32(buf2 + LEN - 8), 0x3E800000u); /* 0.25 */
    CHECK(buf2[LEN - 4] == 0xEE);                    /* nothing more */
}

typedef struct progress_seen {
    uint64_t total, done_before_final, calls;
    int finals;
} progress_seen;

static void on_progress(const nvf_convert_progress *p, int final, void *user) {
    progress_seen *s = user;
    s->total = p->bytes_total;
    s->calls++;
    if (final)
        s->finals++;
    else
        s->done_before_final = p->bytes_done;
}

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

    nvf_device cpu;
    CHECK(nvf_device_select(&cpu, "cpu") == 0);
    CHECK(nvf_backend_open(&g_cpu, &cpu, 2) == 0);
    test_modelopt_pack();
    if (g_cpu)
        test_prepared_w13();
    nvf_backend_close(g_cpu);

    /* A whole run in small shards: progress counts source bytes, the sum of the source tensors'
     * sizes (read here from the checkpoint), all of them before the final call. */
    uint64_t source_bytes = 0;
    for (size_t i = 0; i < ck->n_tensors; i++)
        source_bytes += ck->tensors[i].st->end - ck->tensors[i].st->begin;
    char dst[] = "/tmp/nvfp4-test-convert-dst-XXXXXX";
    CHECK(mkdtemp(dst) != NULL);
    progress_seen seen = {0};
    nvf_convert_summary sum;
    o.dst = dst;
    o.threads = 2;
    o.progress = on_progress;
    o.progress_user = &seen;
    CHECK(nvf_convert_run(&sum, &o) == 0);
    CHECK_EQ_U64(seen.total, source_bytes);
    CHECK_EQ_U64(seen.done_before_final, source_bytes);
    CHECK_EQ_U64(seen.finals, 1);
    CHECK_EQ_U64(sum.bytes_in, source_bytes);
    CHECK(sum.shards > 2);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dst);
    CHECK(system(cmd) == 0);

    nvf_ckpt_close(ck);
    nvf_recipe_free(&r);
    return check_summary("convert");
}
