/*
 * Routing and activations of the MoE reference (SPEC section 7), in f32 with each operation
 * rounded on its own (the build forbids contraction). Selection is by repeated arg-max with a
 * strict comparison, so equal scores go to the lower expert (or group) id and a NaN score is
 * never chosen over a number.
 */
#include "moe_weights.h"

#include "nvfp4/moe.h"
#include "nvfp4/moe_router.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* transformers' DeepSeek-V3 (and SGLang's biased_grouped_topk) add this to the denominator. */
#define RENORM_EPS 1e-20f

const char *nvf_moe_route_name(nvf_moe_route route) {
    switch (route) {
    case NVF_MOE_ROUTE_SOFTMAX_TOPK:
        return "softmax_topk";
    case NVF_MOE_ROUTE_SIGMOID_TOPK:
        return "sigmoid_topk";
    case NVF_MOE_ROUTE_DEEPSEEK_V3:
        return "deepseek_v3";
    case NVF_MOE_ROUTE_TOPK_SOFTMAX:
        return "topk_softmax";
    }
    return "softmax_topk";
}

const char *nvf_moe_act_name(nvf_moe_act act) {
    switch (act) {
    case NVF_MOE_ACT_SILU:
        return "silu";
    case NVF_MOE_ACT_SWIGLU:
        return "swiglu";
    case NVF_MOE_ACT_SITU:
        return "situ";
    case NVF_MOE_ACT_RELU2:
        return "relu2";
    }
    return "silu";
}

static float sigmoid(float v) {
    return 1.0f / (1.0f + expf(-v));
}

/* Index of the largest score[i] over i < n with allowed[i] (NULL: all) and not taken[i];
 * equal scores keep the lower index; -1 when none is left. */
static int64_t arg_max(const float *score, const uint8_t *allowed, const uint8_t *taken,
                       int64_t n) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++) {
        if ((allowed && !allowed[i]) || taken[i] || isnan(score[i]))
            continue;
        if (best < 0 || score[i] > score[best])
            best = i;
    }
    return best;
}

/* Top-k of `score` over the allowed entries into ids (selection order); `taken` is scratch
 * [n], cleared here. Fewer than k candidates leave the rest -1. */
static void top_k(int32_t *ids, const float *score, const uint8_t *allowed, uint8_t *taken,
                  int64_t n, int64_t k) {
    if (n <= 0)
        return;
    memset(taken, 0, (size_t)n);
    for (int64_t j = 0; j < k; j++) {
        int64_t b = arg_max(score, allowed, taken, n);
        ids[j] = (int32_t)b;
        if (b >= 0)
            taken[b] = 1;
    }
}

/* DeepSeek-V3's group limit: allowed[e] = 1 for the experts of the topk_group groups with the
 * largest sum of their top-2 sb. */
static void keep_groups(uint8_t *allowed, float *gscore, uint8_t *taken, const float *sb, int64_t n,
                        int64_t n_group, int64_t topk_group) {
    int64_t per = n / n_group;
    for (int64_t g = 0; g < n_group; g++) {
        int32_t two[2] = {-1, -1};
        top_k(two, sb + g * per, NULL, taken, per, per < 2 ? per : 2);
        /* a group whose scores are all NaN never wins */
        gscore[g] = two[0] >= 0 ? sb[g * per + two[0]] : -INFINITY;
        if (two[1] >= 0)
            gscore[g] = gscore[g] + sb[g * per + two[1]];
    }
    memset(taken, 0, (size_t)n_group);
    memset(allowed, 0, (size_t)n);
    for (int64_t j = 0; j < topk_group; j++) {
        int64_t g = arg_max(gscore, NULL, taken, n_group);
        if (g < 0)
            break;
        taken[g] = 1;
        memset(allowed + g * per, 1, (size_t)per);
    }
}

/* One token: score and choice arrays are scratch of n_experts floats each. */
static void route_token(int32_t *ids, float *w, const float *l, const float *bias,
                        const nvf_moe_spec *s, float *score, float *choice, uint8_t *allowed,
                        uint8_t *taken, float *gscore) {
    int64_t n = s->n_experts, k = s->top_k;
    const uint8_t *mask = NULL;
    switch (s->route) {
    case NVF_MOE_ROUTE_SOFTMAX_TOPK: {
        float m = -INFINITY, sum = 0.0f;
        for (int64_t e = 0; e < n; e++)
            m = l[e] > m ? l[e] : m;
        for (int64_t e = 0; e < n; e++) {
            score[e] = expf(l[e] - m);
            sum = sum + score[e];
        }
        for (int64_t e = 0; e < n; e++)
            score[e] = score[e] / sum;
        memcpy(choice, score, (size_t)n * sizeof *choice);
        break;
    }
    case NVF_MOE_ROUTE_TOPK_SOFTMAX:
        for (int64_t e = 0; e < n; e++)
            choice[e] = bias ? l[e] + bias[e] : l[e];
        break;
    case NVF_MOE_ROUTE_SIGMOID_TOPK:
    case NVF_MOE_ROUTE_DEEPSEEK_V3:
        for (int64_t e = 0; e < n; e++) {
            score[e] = sigmoid(l[e]);
            choice[e] = bias ? score[e] + bias[e] : score[e];
        }
        if (s->route == NVF_MOE_ROUTE_DEEPSEEK_V3 && s->n_group > 1) {
            keep_groups(allowed, gscore, taken, choice, n, s->n_group, s->topk_group);
            mask = allowed;
        }
        break;
    }
    top_k(ids, choice, mask, taken, n, k);
    if (s->route == NVF_MOE_ROUTE_TOPK_SOFTMAX) {
        /* softmax over the selected logits; the first is the largest */
        float m = ids[0] >= 0 ? choice[ids[0]] : 0.0f, sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            w[j] = ids[j] >= 0 ? expf(choice[ids[j]] - m) : 0.0f;
            sum = sum + w[j];
        }
        for (int64_t j = 0; j < k; j++)
            w[j] = w[j] / sum;
    } else {
        float sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            w[j] = ids[j] >= 0 ? score[ids[j]] : 0.0f;
            sum = sum + w[j];
        }
        if (s->renormalize) {
            if (s->route != NVF_MOE_ROUTE_SOFTMAX_TOPK)
                sum = sum + RENORM_EPS;
            for (int64_t j = 0; j < k; j++)
                w[j] = w[j] / sum;
        }
    }
    for (int64_t j = 0; j < k; j++)
        w[j] = w[j] * s->routed_scaling_factor;
}

int nvf_moe_route_ref(int32_t *ids, float *weights, const float *logits, const float *bias,
                      int64_t t, const nvf_moe_spec *spec) {
    nvf_moe_router router = moe_router_of(spec);
    int rc = nvf_moe_router_check(&router, t);
    if (rc != NVF_OK)
        return rc;
    int64_t n = spec->n_experts;
    float *score = malloc((size_t)(3 * n) * sizeof *score);
    uint8_t *flags = malloc((size_t)(2 * n));
    if (!score || !flags) {
        free(score);
        free(flags);
        return nvf_error_set(NVF_E_NOMEM, "no memory for routing %lld experts", (long long)n);
    }
    for (int64_t i = 0; i < t; i++)
        route_token(ids + i * spec->top_k, weights + i * spec->top_k, logits + i * n, bias, spec,
                    score, score + n, flags, flags + n, score + 2 * n);
    free(score);
    free(flags);
    return NVF_OK;
}

float nvf_moe_act_ref(const nvf_moe_spec *s, float g, float u) {
    switch (s->act) {
    case NVF_MOE_ACT_SILU:
        return g * sigmoid(g) * u;
    case NVF_MOE_ACT_SWIGLU: {
        float lim = s->swiglu_limit;
        g = g < lim ? g : lim;
        u = u < lim ? (u > -lim ? u : -lim) : lim;
        return g * sigmoid(s->swiglu_alpha * g) * (u + s->swiglu_beta);
    }
    case NVF_MOE_ACT_SITU: {
        float b = s->situ_beta, bl = s->situ_beta_l;
        float left = b * tanhf(g / b) * sigmoid(g);
        return left * (bl != 0.0f ? bl * tanhf(u / bl) : u);
    }
    case NVF_MOE_ACT_RELU2: {
        float r = u > 0.0f ? u : 0.0f;
        return r * r;
    }
    }
    return 0.0f;
}
