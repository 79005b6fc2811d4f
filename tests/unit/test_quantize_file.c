/*
 * nvf_quantize_file (lib/convert/quantize_file.c): the plan and the global-scale groups, the
 * output layout, and what it refuses (OUT that is IN, an existing OUT without force, a stop
 * request), on a file of three tensors whose results are worked out by hand:
 *   q_proj F32 [1, 16] of 1.0 and k_proj F32 [1, 16] of 3.0 form one q/k/v group: amax 3, RTN
 *   with E = 448 gives gs = 448 * 6 / 3 = 896; k's block then has amax 2688 = 6 * 448, so its
 *   E4M3 scale is 448 (0x7E) and every value 6.0 (E2M1 code 7, two per byte: 0x77);
 *   norm F32 [16] is 1-D: copied.
 */
#include "check.h"

#include "nvfp4/convert.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define Q "model.layers.0.self_attn.q_proj.weight"
#define K "model.layers.0.self_attn.k_proj.weight"

static int exists(const char *path) {
    return access(path, F_OK) == 0;
}

int main(void) {
    char dir[] = "/tmp/nvf_qf_XXXXXX", in[64], out[64], tmp[80];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(in, sizeof in, "%s/in.safetensors", dir);
    snprintf(out, sizeof out, "%s/out.safetensors", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    float q[16], k[16], norm[16];
    for (int i = 0; i < 16; i++) {
        q[i] = 1.0f;
        k[i] = 3.0f;
        norm[i] = 1.0f;
    }
    nvf_st_entry e[3] = {{Q, NVF_DTYPE_F32, 2, {1, 16}},
                         {K, NVF_DTYPE_F32, 2, {1, 16}},
                         {"model.norm.weight", NVF_DTYPE_F32, 1, {16}}};
    const void *data[3] = {q, k, norm};
    CHECK(nvf_st_write_file(in, e, data, 3) == NVF_OK);

    nvf_recipe r;
    CHECK(nvf_recipe_init(&r) == 0);
    CHECK(nvf_recipe_set(&r, "method", "rtn") == 0);
    CHECK(nvf_recipe_set(&r, "e4m3-max", "448") == 0);
    nvf_quantize_file_options o;
    nvf_quantize_file_summary s;
    nvf_quantize_file_options_init(&o, in, out, &r);
    o.threads = 1;

    /* A stop request: interrupted, nothing written. */
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    CHECK(nvf_quantize_file(&s, &o) == NVF_E_INTERRUPTED);
    CHECK_CONTAINS(nvf_error_last(), "interrupted");
    CHECK(!exists(out) && !exists(tmp));
    CHECK(s.n_tensors == 0 && s.tensors == NULL);
    stop = 0;

    CHECK(nvf_quantize_file(&s, &o) == NVF_OK);
    CHECK_EQ_U64(s.n_tensors, 3);
    CHECK_EQ_U64(s.tensors_quantized, 2);
    CHECK_EQ_U64(s.tensors_kept, 1);
    CHECK_EQ_U64(s.tensors_dropped, 0);
    CHECK_EQ_U64(s.bytes_quantized, 128);
    for (size_t i = 0; s.tensors && i < 2; i++) {
        CHECK(s.tensors[i].action == NVF_QUANTIZE_QUANT);
        CHECK(s.tensors[i].gs == 896.0f);
        CHECK_EQ_STR(s.tensors[i].source, "plain");
        CHECK_EQ_STR(s.tensors[i].group, "model.layers.0.self_attn.{q,k,v}.weight");
    }
    CHECK(s.tensors && s.tensors[2].action == NVF_QUANTIZE_KEEP && !s.tensors[2].group);
    nvf_quantize_file_summary_free(&s);
    CHECK(exists(out) && !exists(tmp));

    nvf_st_file *f = NULL;
    CHECK(nvf_st_open(&f, out) == NVF_OK);
    if (f) {
        CHECK_EQ_U64(f->n_tensors, 7);
        const nvf_st_tensor *t = nvf_st_find(f, K);
        CHECK(t && t->dtype == NVF_DTYPE_U8 && t->shape[0] == 1 && t->shape[1] == 8);
        for (int i = 0; t && i < 8; i++)
            CHECK(t->data[i] == 0x77);
        t = nvf_st_find(f, K "_scale");
        CHECK(t && t->dtype == NVF_DTYPE_F8_E4M3 && t->numel == 1 && t->data[0] == 0x7E);
        t = nvf_st_find(f, Q "_scale_2");
        float s2 = 0.0f;
        if (t && t->ndim == 0 && t->dtype == NVF_DTYPE_F32)
            memcpy(&s2, t->data, 4);
        CHECK(s2 == 1.0f / 896.0f);
        t = nvf_st_find(f, "model.norm.weight");
        CHECK(t && t->end - t->begin == sizeof norm && memcmp(t->data, norm, sizeof norm) == 0);
        nvf_st_close(f);
    }

    /* OUT exists: refused without force, replaced with it; OUT that is IN: refused always. */
    CHECK(nvf_quantize_file(&s, &o) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "use --force");
    o.force = 1;
    CHECK(nvf_quantize_file(&s, &o) == NVF_OK);
    nvf_quantize_file_summary_free(&s);
    o.out = in;
    CHECK(nvf_quantize_file(&s, &o) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "is the input file");

    nvf_recipe_free(&r);
    unlink(out);
    unlink(in);
    rmdir(dir);
    return check_summary("quantize_file");
}
