/*
 * The prepared targets' pack (convert_prepared.c's pack_job) on the CUDA backend against the
 * CPU backend and against the layout written out here from SPEC section 5, byte for byte: a
 * w13 job (gate + up members, I = 128, H = 96: 6 scale columns, padded to 8), a w2 job
 * (H = 96 rows, I = 128) and a dense job of 200 x 48 (rows padded), each with the 128x4 and the
 * 8x4 layout, W4A16 and W4A4. The scales lie in the buffer after the packed weights; the
 * expected bytes are put together from the formulas:
 *   w13 row r: group g = r / 64, up when g is even, source row (g / 2) * 64 + r % 64;
 *   128x4: off = (m/128)*ceil(K/4)*512 + (k/4)*512 + (m%32)*16 + ((m%128)/32)*4 + k%4;
 *   8x4:   off = (m/8)*ceil(K/4)*32 + (k/4)*32 + (m%8)*4 + k%4; padding 0.
 * Exit 77 (skip) without a GPU.
 */
#include "check.h"

#include "convert/convert_internal.h"
#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static nvf_backend *g_cpu, *g_gpu;

static void fill(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        g_rng ^= g_rng << 13;
        g_rng ^= g_rng >> 7;
        g_rng ^= g_rng << 17;
        p[i] = (uint8_t)(g_rng >> 32);
    }
}

static int64_t spec_off(nvf_layout l, int64_t m, int64_t k, int64_t K) {
    int64_t kt = (K + 3) / 4;
    if (l == NVF_LAYOUT_128X4)
        return (m / 128) * kt * 512 + (k / 4) * 512 + (m % 32) * 16 + ((m % 128) / 32) * 4 + k % 4;
    return (m / 8) * kt * 32 + (k / 4) * 32 + (m % 8) * 4 + k % 4;
}

static int64_t pad(int64_t v, int64_t t) {
    return (v + t - 1) / t * t;
}

/* Expected scale bytes of `rows` x `K` scales whose row m is src_row(m) of `s`. */
static void expect_scales(uint8_t *out, nvf_layout l, const uint8_t *const *s, int64_t rows,
                          int64_t K, int w13) {
    int64_t tr = l == NVF_LAYOUT_128X4 ? 128 : 8;
    memset(out, 0, (size_t)(pad(rows, tr) * pad(K, 4)));
    for (int64_t m = 0; m < rows; m++) {
        int64_t g = m / 64, src = w13 ? (g / 2) * 64 + m % 64 : m;
        const uint8_t *row = (w13 ? s[g % 2 == 0 ? 1 : 0] : s[0]) + src * K;
        for (int64_t k = 0; k < K; k++)
            out[spec_off(l, m, k, K)] = row[k];
    }
}

/* Pack job `j` on both backends; compare with each other and with `want` (scale part at
 * offset `sc_off`, `sc_len` bytes). */
static void both(const cv_target *t, cv_job *j, uint8_t *const *packed, uint8_t *const *scales,
                 size_t len, const uint8_t *want, size_t sc_off, size_t sc_len, const char *what) {
    uint8_t *a = malloc(len), *b = malloc(len);
    CHECK(a && b);
    if (a && b) {
        memset(a, 0xEE, len);
        memset(b, 0x11, len);
        CHECK(t->pack_job(g_cpu, a, j, packed, scales, 0.25f) == 0);
        CHECK_MSG(t->pack_job(g_gpu, b, j, packed, scales, 0.25f) == 0, "%s: %s", what,
                  nvf_error_last());
        CHECK_MSG(memcmp(a, b, len) == 0, "%s: CPU and CUDA packs differ", what);
        CHECK_MSG(memcmp(b + sc_off, want, sc_len) == 0, "%s: scales differ from SPEC", what);
    }
    free(a);
    free(b);
}

static void cases(nvf_layout l, int w4a4) {
    const cv_target *t = w4a4 ? &cv_target_prepared_w4a4 : &cv_target_prepared_w4a16;
    enum { I = 128, H = 96, KH = H / 16, KI = I / 16, DR = 200, DC = 48 };
    static uint8_t gw[I * H / 2], uw[I * H / 2], gs[I * KH], us[I * KH], dw[H * I / 2], ds[H * KI],
        xw[DR * DC / 2], xs[DR * DC / 16], want[2 * I * 8 * 2];
    fill(gw, sizeof gw);
    fill(uw, sizeof uw);
    fill(gs, sizeof gs);
    fill(us, sizeof us);
    fill(dw, sizeof dw);
    fill(ds, sizeof ds);
    fill(xw, sizeof xw);
    fill(xs, sizeof xs);
    int64_t tr = l == NVF_LAYOUT_128X4 ? 128 : 8;
    cv_job j;
    memset(&j, 0, sizeof j);
    j.kind = CV_JOB_QUANT;
    j.layout = (int)l;
    j.input_scale = 2.0f;
    char name[64];
    snprintf(name, sizeof name, "%s %s", nvf_layout_name(l), w4a4 ? "w4a4" : "w4a16");
    /* w13 */
    j.prep = CV_PREP_W13;
    j.n_members = 2;
    j.members[0].proj = NVF_PROJ_GATE;
    j.members[1].proj = NVF_PROJ_UP;
    for (int k = 0; k < 2; k++) {
        j.members[k].src.rows = I;
        j.members[k].src.cols = H;
    }
    uint8_t *p13[2] = {gw, uw}, *s13[2] = {gs, us};
    const uint8_t *e13[2] = {gs, us};
    size_t sc13 = (size_t)(pad(2 * I, tr) * pad(KH, 4));
    expect_scales(want, l, e13, 2 * I, KH, 1);
    both(t, &j, p13, s13, (size_t)(2 * I * H / 2) + sc13 + (w4a4 ? 8 : 4), want,
         (size_t)(2 * I * H / 2), sc13, name);
    /* w2 */
    j.prep = CV_PREP_W2;
    j.n_members = 1;
    j.members[0].proj = NVF_PROJ_DOWN;
    j.members[0].src.rows = H;
    j.members[0].src.cols = I;
    uint8_t *p2[1] = {dw}, *s2[1] = {ds};
    const uint8_t *e2[1] = {ds};
    size_t sc2 = (size_t)(pad(H, tr) * pad(KI, 4));
    expect_scales(want, l, e2, H, KI, 0);
    both(t, &j, p2, s2, (size_t)(H * I / 2) + sc2 + 4, want, (size_t)(H * I / 2), sc2, name);
    /* dense */
    j.prep = CV_PREP_DENSE;
    j.members[0].src.rows = DR;
    j.members[0].src.cols = DC;
    uint8_t *px[1] = {xw}, *sx[1] = {xs};
    const uint8_t *ex[1] = {xs};
    size_t scx = (size_t)(pad(DR, tr) * pad(DC / 16, 4));
    expect_scales(want, l, ex, DR, DC / 16, 0);
    both(t, &j, px, sx, (size_t)(DR * DC / 2) + scx + (w4a4 ? 8 : 4), want, (size_t)(DR * DC / 2),
         scx, name);
}

int main(void) {
    if (nvf_cuda_device_count() == 0) {
        printf("test_prepared_pack_cuda: no CUDA device, skipped\n");
        return 77;
    }
    nvf_device cpu, gpu;
    CHECK(nvf_device_select(&cpu, "cpu") == 0);
    CHECK(nvf_device_select(&gpu, "cuda:0") == 0);
    int rc = nvf_backend_open(&g_cpu, &cpu, 0);
    CHECK_MSG(rc == 0, "open cpu: %s", nvf_error_last());
    int rg = nvf_backend_open(&g_gpu, &gpu, 0);
    CHECK_MSG(rg == 0, "open cuda:0: %s", nvf_error_last());
    if (rc == 0 && rg == 0)
        for (int w = 0; w < 2; w++) {
            cases(NVF_LAYOUT_128X4, w);
            cases(NVF_LAYOUT_8X4, w);
        }
    nvf_backend_close(g_gpu);
    nvf_backend_close(g_cpu);
    return check_summary("test_prepared_pack_cuda");
}
