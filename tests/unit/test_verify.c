/*
 * lib/verify's pieces that have hand-worked answers: the layer list parser, the comparison
 * numbers (rel-L2, cosine, max-abs, the share within FlashInfer's tolerance, worked out by hand on
 * small vectors), the seeded activations (deterministic, BF16 values, about N(0, 1)), and the
 * report's JSON for a made-up report.
 */
#include "check.h"

#include "nvfp4/format.h"
#include "nvfp4/status.h"
#include "nvfp4/verify.h"
#include "verify/verify_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int near(double a, double b, double tol) {
    return fabs(a - b) <= tol;
}

static void test_layers(void) {
    int64_t *l = NULL;
    size_t n = 0;
    CHECK(nvf_verify_parse_layers(&l, &n, "5,1,3-4,4") == NVF_OK);
    CHECK_EQ_U64(n, 4);
    if (n == 4)
        CHECK(l[0] == 1 && l[1] == 3 && l[2] == 4 && l[3] == 5);
    free(l);
    CHECK(nvf_verify_parse_layers(&l, &n, "7") == NVF_OK && n == 1 && l[0] == 7);
    free(l);
    static const char *const bad[] = {"", "1,", "a", "3-1", "1-", "-2", "1;2", "1,,2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(nvf_verify_parse_layers(&l, &n, bad[i]) == NVF_E_INVALID, "'%s' accepted",
                  bad[i]);
        CHECK(l == NULL && n == 0);
    }
    CHECK(nvf_verify_parse_layers(&l, &n, "3-1") == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "3-1");
}

static void test_compare(void) {
    vf_stats s;
    /* b = (3, 4): ||b|| = 5; a - b = (0, -1): rel 1/5; a.b = 3*3 + 3*4 = 21, ||a|| = sqrt(18):
     * cos = 21 / (5 sqrt(18)) = 0.98995; std(b) = 0.5: atol = max(0.05, 0.75) = 0.75; |d| = 0 ok,
     * |d| = 1 > 0.75 but 1/4 < 0.5 ok: within 1. */
    const float a[2] = {3, 3}, b[2] = {3, 4};
    vf_compare(&s, a, b, 2);
    CHECK(near(s.rel_l2, 0.2, 1e-12));
    CHECK(near(s.cosine, 21.0 / (5.0 * sqrt(18.0)), 1e-12));
    CHECK(near(s.max_abs, 1.0, 0));
    CHECK(near(s.within, 1.0, 0) && s.finite);
    /* b = (0, 0, 0, 10): mean 2.5, std sqrt(18.75) = 4.330: atol 6.495. a = (7, 0, 1, 10):
     * d = 7 (> atol, b 0: out), 0, 1 (in), 0: within 3/4; rel = sqrt(50) / 10. */
    const float a2[4] = {7, 0, 1, 10}, b2[4] = {0, 0, 0, 10};
    vf_compare(&s, a2, b2, 4);
    CHECK(near(s.within, 0.75, 0));
    CHECK(near(s.rel_l2, sqrt(50.0) / 10.0, 1e-12));
    CHECK(near(s.max_abs, 7.0, 0));
    /* tiny reference: std 0 -> atol max(0.05, 0.015) = 0.05; d = 0.04 in, 0.06 with ref 0.1
     * (0.6 > 0.5) out */
    const float a3[2] = {0.14f, 0.16f}, b3[2] = {0.1f, 0.1f};
    vf_compare(&s, a3, b3, 2);
    CHECK(near(s.within, 0.5, 0));
    const float a4[2] = {NAN, 1}, b4[2] = {1, 1};
    vf_compare(&s, a4, b4, 2);
    CHECK(!s.finite && isinf(s.max_abs));
    const float z[2] = {0, 0};
    vf_compare(&s, z, z, 2);
    CHECK(s.rel_l2 == 0 && s.cosine == 1 && s.within == 1);
}

static void test_activations(void) {
    enum { T = 64, H = 256 };
    float *x = malloc(T * H * sizeof *x), *y = malloc(T * H * sizeof *y);
    CHECK(x && y);
    if (!x || !y)
        return;
    vf_activations(x, T, H, 7, 3);
    vf_activations(y, T, H, 7, 3);
    CHECK(memcmp(x, y, T * H * sizeof *x) == 0);
    double sum = 0, sum2 = 0;
    int bf16 = 1;
    for (int i = 0; i < T * H; i++) {
        sum += x[i];
        sum2 += (double)x[i] * x[i];
        bf16 &= nvf_bf16_to_f32(nvf_f32_to_bf16_rn(x[i])) == x[i];
    }
    double mean = sum / (T * H), var = sum2 / (T * H) - mean * mean;
    CHECK(bf16);
    CHECK_MSG(fabs(mean) < 0.05 && fabs(var - 1.0) < 0.05, "mean %g var %g", mean, var);
    vf_activations(y, T, H, 7, 4); /* another layer, other values */
    CHECK(memcmp(x, y, T * H * sizeof *x) != 0);
    vf_activations(y, T, H, 8, 3); /* another seed */
    CHECK(memcmp(x, y, T * H * sizeof *x) != 0);
    free(x);
    free(y);
}

static void test_json(void) {
    nvf_verify_report r;
    memset(&r, 0, sizeof r);
    r.checkpoint = strdup("ck");
    r.method = "cpu-reference";
    r.tokens = 4;
    r.n_layers = 1;
    r.layers = calloc(1, sizeof *r.layers);
    CHECK(r.checkpoint && r.layers);
    if (!r.checkpoint || !r.layers)
        return;
    r.layers[0].layer = 3;
    r.layers[0].pass = 1;
    nvf_verify_check *c = vf_check(&r.layers[0], "within_tolerance", 0, "%d%%", 50);
    vf_check_value(c, 0.5, 1, 0.97);
    CHECK(r.layers[0].pass == 0);
    CHECK(vf_flag(&r.layers[0], 9) == NVF_OK && vf_flag(&r.layers[0], 2) == NVF_OK &&
          vf_flag(&r.layers[0], 9) == NVF_OK);
    CHECK(r.layers[0].n_flagged == 2 && r.layers[0].flagged[0] == 2);
    CHECK(vf_finding(&r, "expert_rel_l2", "error", 3, 9, "t", "expert %d", 9) == NVF_OK);
    r.failed = 1;
    char *text = NULL;
    CHECK(nvf_verify_report_json(&text, &r) == NVF_OK);
    CHECK_CONTAINS(text, "\"experts_flagged\":\t[2, 9]");
    CHECK_CONTAINS(text, "\"threshold\":\t0.97");
    CHECK_CONTAINS(text, "\"reference\":\tnull");
    CHECK_CONTAINS(text, "\"expert\":\t9");
    CHECK_CONTAINS(text, "\"pass\":\tfalse");
    free(text);
    nvf_verify_report_free(&r);
    nvf_verify_report_free(NULL);
}

int main(void) {
    test_layers();
    test_compare();
    test_activations();
    test_json();
    return check_summary("test_verify");
}
