/*
 * The numbers of verify (nvfp4/verify.h): seeded activations and the comparison of an output with
 * its reference, both written out plainly (f64 sums in index order).
 */
#include "verify_internal.h"

#include "nvfp4/format.h"

#include <math.h>

void vf_compare(vf_stats *out, const float *a, const float *b, uint64_t n) {
    double dd = 0.0, bb = 0.0, aa = 0.0, ab = 0.0, sum = 0.0, sum2 = 0.0, max_abs = 0.0;
    int finite = 1;
    for (uint64_t i = 0; i < n; i++) {
        double x = a[i], y = b[i], d = x - y;
        if (!isfinite(a[i]))
            finite = 0;
        dd += d * d;
        bb += y * y;
        aa += x * x;
        ab += x * y;
        sum += y;
        sum2 += y * y;
        if (fabs(d) > max_abs || isnan(d))
            max_abs = isnan(d) ? INFINITY : fabs(d);
    }
    double mean = n ? sum / (double)n : 0.0;
    double var = n ? sum2 / (double)n - mean * mean : 0.0;
    double sd = var > 0.0 ? sqrt(var) : 0.0;
    /* FlashInfer's tolerance (SPEC section 7): |d| < max(0.05, 1.5 max(std(ref), 0.01)), or
     * |d| / |ref| < 0.5 */
    double atol = 1.5 * (sd > 0.01 ? sd : 0.01);
    atol = atol > 0.05 ? atol : 0.05;
    uint64_t ok = 0;
    for (uint64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]), r = fabs((double)b[i]);
        if (d < atol || (r > 0.0 && d / r < 0.5))
            ok++;
    }
    out->rel_l2 = bb > 0.0 ? sqrt(dd / bb) : sqrt(dd);
    out->cosine = aa > 0.0 && bb > 0.0 ? ab / sqrt(aa * bb) : (aa == 0.0 && bb == 0.0 ? 1.0 : 0.0);
    out->max_abs = max_abs;
    out->within = n ? (double)ok / (double)n : 1.0;
    out->finite = finite && isfinite(dd);
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in (0, 1): 53 random bits, never 0 */
static double uniform(uint64_t *s) {
    return ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
}

void vf_activations(float *x, int64_t t, int64_t h, uint64_t seed, int64_t layer) {
    uint64_t s = seed ^ ((uint64_t)(layer + 1) * 0xD1B54A32D192ED03ull);
    int64_t n = t * h;
    /* hidden states after the MoE block's RMSNorm: about N(0, 1) per element; BF16 as the model
     * feeds them. Box-Muller, both values used. */
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = uniform(&s), u2 = uniform(&s), r = sqrt(-2.0 * log(u1));
        x[i] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn((float)(r * cos(6.283185307179586 * u2))));
        if (i + 1 < n)
            x[i + 1] =
                nvf_bf16_to_f32(nvf_f32_to_bf16_rn((float)(r * sin(6.283185307179586 * u2))));
    }
}
