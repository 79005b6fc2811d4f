/*
 * The seeded value generator of synthetic checkpoints (described in nvfp4/synth.h): a
 * counter-based splitmix64 stream per logical matrix, an Irwin-Hall sum of four 13-bit
 * uniforms, scaled with one binary32 multiply. No libm, no floating-point environment.
 */
#include "synth_internal.h"

#define SYNTH_GAMMA 0x9E3779B97F4A7C15ull
/* Irwin-Hall of four uniforms on 0..8191: mean 4 * 4095.5, std sqrt((8192^2 - 1) / 3). */
#define SYNTH_IH_MEAN  16382
#define SYNTH_IH_SIGMA 4729.65336996275

/* Per kind: the multiplier (float)(std / sigma), the mean, whether outliers occur. */
static const float k_scale[] = {
    [SYNTH_KIND_WEIGHT] = (float)(0.02 / SYNTH_IH_SIGMA),
    [SYNTH_KIND_ROUTER] = (float)(0.02 / SYNTH_IH_SIGMA),
    [SYNTH_KIND_NORM] = (float)(0.05 / SYNTH_IH_SIGMA),
    [SYNTH_KIND_BIAS] = (float)(0.001 / SYNTH_IH_SIGMA),
};
static const float k_mean[] = {
    [SYNTH_KIND_WEIGHT] = 0.0f,
    [SYNTH_KIND_ROUTER] = 0.0f,
    [SYNTH_KIND_NORM] = 1.0f,
    [SYNTH_KIND_BIAS] = 0.0f,
};

/* splitmix64's output function (Steele, Lea, Flood 2014; constants from Vigna's version). */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t synth_key(uint64_t seed, const char *name) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001B3ull;
    }
    return mix64(h ^ mix64(seed));
}

/* Elements [first, first + n) of one logical matrix. */
static void fill_part(float *out, uint64_t key, int kind, uint64_t first, size_t n) {
    const float scale = k_scale[kind];
    const float mean = k_mean[kind];
    const int outliers = kind == SYNTH_KIND_WEIGHT;
    uint64_t z = key + (first + 1) * SYNTH_GAMMA;
    for (size_t i = 0; i < n; i++, z += SYNTH_GAMMA) {
        uint64_t r = mix64(z);
        int32_t f0 = (int32_t)(r & 0x1FFF);
        int32_t s = f0 + (int32_t)((r >> 13) & 0x1FFF) + (int32_t)((r >> 26) & 0x1FFF) +
                    (int32_t)((r >> 39) & 0x1FFF) - SYNTH_IH_MEAN;
        float v = (float)s * scale;
        if (outliers && (r >> 52) == 0)
            v = v * (float)(8 + f0 % 25);
        out[i] = mean != 0.0f ? v + mean : v;
    }
}

void synth_fill_f32(float *out, const synth_make *t, uint64_t first, size_t n) {
    while (n > 0) {
        uint64_t part = first / t->part_numel;
        uint64_t off = first % t->part_numel;
        uint64_t left = t->part_numel - off;
        size_t k = left < n ? (size_t)left : n;
        fill_part(out, t->part_keys[part], t->kind, off, k);
        out += k;
        first += k;
        n -= k;
    }
}
