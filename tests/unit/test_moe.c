/*
 * lib/moe: routing and activations on hand-worked numbers (expected values written out here,
 * with libm in double where a transcendental is involved), the spec each family's config.json
 * gives, and the forward on a tiny hand-built checkpoint whose FC1 output rounds differently in
 * BF16.
 */
#include "check.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/moe.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double sig(double v) {
    return 1.0 / (1.0 + exp(-v));
}

#define CHECK_NEAR(a, b)                                                                           \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        CHECK_MSG(fabs(a_ - b_) <= 1e-6 * (fabs(b_) > 1 ? fabs(b_) : 1),                           \
                  "%s = %.9g, expected %.9g", #a, a_, b_);                                         \
    } while (0)

static nvf_moe_spec spec_of(nvf_moe_route route, int64_t n, int64_t k, int renorm) {
    nvf_moe_spec s;
    memset(&s, 0, sizeof s);
    s.route = route;
    s.n_experts = n;
    s.top_k = k;
    s.renormalize = renorm;
    s.n_group = 1;
    s.topk_group = 1;
    s.routed_scaling_factor = 1.0f;
    s.swiglu_limit = INFINITY;
    s.situ_beta = 1.0f;
    return s;
}

static void test_softmax_topk(void) {
    int32_t ids[4];
    float w[4];
    /* experts 1 and 2 tie: the lower id comes first */
    const float l[4] = {1, 3, 3, 0};
    nvf_moe_spec s = spec_of(NVF_MOE_ROUTE_SOFTMAX_TOPK, 4, 2, 0);
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == 0);
    CHECK(ids[0] == 1 && ids[1] == 2);
    double p = exp(3.0) / (exp(1.0) + 2 * exp(3.0) + 1.0);
    CHECK_NEAR(w[0], p);
    CHECK_NEAR(w[1], p);
    /* renormalized: two equal weights are exactly one half */
    s.renormalize = 1;
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == 0);
    CHECK(w[0] == 0.5f && w[1] == 0.5f);
    /* the tie is on the boundary: of 0, 2, 3 (all 2) the two lowest ids */
    const float l2[4] = {2, 1, 2, 2};
    CHECK(nvf_moe_route_ref(ids, w, l2, NULL, 1, &s) == 0);
    CHECK(ids[0] == 0 && ids[1] == 2);
    /* routed_scaling_factor multiplies the weights */
    s.routed_scaling_factor = 2.0f;
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == 0);
    CHECK(w[0] == 1.0f && w[1] == 1.0f);
    /* two tokens at once, and top_k out of range */
    const float l3[8] = {0, 0, 0, 5, 4, 0, 0, 0};
    s = spec_of(NVF_MOE_ROUTE_SOFTMAX_TOPK, 4, 1, 1);
    CHECK(nvf_moe_route_ref(ids, w, l3, NULL, 2, &s) == 0);
    CHECK(ids[0] == 3 && ids[1] == 0 && w[0] == 1.0f && w[1] == 1.0f);
    s.top_k = 5;
    CHECK(nvf_moe_route_ref(ids, w, l3, NULL, 1, &s) == NVF_E_INVALID);
}

static void test_sigmoid_topk(void) {
    int32_t ids[2];
    float w[2];
    const float l[4] = {0, 1, -1, 1};
    nvf_moe_spec s = spec_of(NVF_MOE_ROUTE_SIGMOID_TOPK, 4, 2, 0);
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == 0);
    CHECK(ids[0] == 1 && ids[1] == 3);
    CHECK_NEAR(w[0], sig(1));
    CHECK_NEAR(w[1], sig(1));
    /* the bias decides the choice (s + b: .5, .731, .769, .731), the weight is s */
    const float b[4] = {0, 0, 0.5f, 0};
    CHECK(nvf_moe_route_ref(ids, w, l, b, 1, &s) == 0);
    CHECK(ids[0] == 2 && ids[1] == 1);
    CHECK_NEAR(w[0], sig(-1));
    CHECK_NEAR(w[1], sig(1));
    s.renormalize = 1;
    CHECK(nvf_moe_route_ref(ids, w, l, b, 1, &s) == 0);
    CHECK_NEAR(w[0], sig(-1) / (sig(-1) + sig(1)));
    /* a NaN score is never chosen; with too few candidates the rest are -1 with weight 0 */
    const float ln[4] = {NAN, 1, 0, NAN};
    int32_t ids3[3];
    float w3[3];
    s.top_k = 3;
    s.renormalize = 0;
    CHECK(nvf_moe_route_ref(ids3, w3, ln, NULL, 1, &s) == 0);
    CHECK(ids3[0] == 1 && ids3[1] == 2 && ids3[2] == -1 && w3[2] == 0.0f);
    CHECK_NEAR(w3[1], 0.5);
}

static void test_deepseek_v3(void) {
    int32_t ids[2];
    float w[2];
    /* groups of two: G0 {4, -4} sums to 1.0 although expert 0 (.982) is the best single
     * expert; G1 {1, 1} 1.462; G2 {2, -1} 1.150; G3 {-1, -1} 0.538. Kept: G1 and G2. */
    const float l[8] = {4, -4, 1, 1, 2, -1, -1, -1};
    nvf_moe_spec s = spec_of(NVF_MOE_ROUTE_DEEPSEEK_V3, 8, 2, 1);
    s.n_group = 4;
    s.topk_group = 2;
    s.routed_scaling_factor = 2.5f;
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == 0);
    CHECK_MSG(ids[0] == 4 && ids[1] == 2, "ids %d %d", ids[0], ids[1]);
    double d = sig(2) + sig(1);
    CHECK_NEAR(w[0], sig(2) / d * 2.5);
    CHECK_NEAR(w[1], sig(1) / d * 2.5);
    /* without the group limit expert 0 wins */
    s.n_group = 1;
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == 0);
    CHECK(ids[0] == 0 && ids[1] == 4);
    /* renormalization off: s times the scaling factor */
    s.n_group = 4;
    s.renormalize = 0;
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == 0);
    CHECK_NEAR(w[0], sig(2) * 2.5);
    CHECK_NEAR(w[1], sig(1) * 2.5);
    /* the correction bias moves the choice (and the group scores), never the weight: +1 on
     * expert 7 makes G3 {.269+1, .269} = 1.538 the best group and 7 the best expert */
    const float b[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    s.renormalize = 1;
    CHECK(nvf_moe_route_ref(ids, w, l, b, 1, &s) == 0);
    CHECK_MSG(ids[0] == 7 && ids[1] == 2, "ids %d %d", ids[0], ids[1]);
    d = sig(-1) + sig(1);
    CHECK_NEAR(w[0], sig(-1) / d * 2.5);
    /* groups that do not divide the experts */
    s.n_group = 3;
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == NVF_E_INVALID);
}

static void test_topk_softmax(void) {
    int32_t ids[2];
    float w[2];
    const float l[4] = {3, 1, 2, 0};
    nvf_moe_spec s = spec_of(NVF_MOE_ROUTE_TOPK_SOFTMAX, 4, 2, 0);
    CHECK(nvf_moe_route_ref(ids, w, l, NULL, 1, &s) == 0);
    CHECK(ids[0] == 0 && ids[1] == 2);
    CHECK_NEAR(w[0], exp(1.0) / (exp(1.0) + 1));
    CHECK_NEAR(w[1], 1 / (exp(1.0) + 1));
    /* GPT-OSS's router bias is added to the logits before the choice */
    const float b[4] = {0, 3, 0, 0};
    CHECK(nvf_moe_route_ref(ids, w, l, b, 1, &s) == 0);
    CHECK(ids[0] == 1 && ids[1] == 0);
    CHECK_NEAR(w[0], exp(1.0) / (exp(1.0) + 1));
}

static void test_activations(void) {
    nvf_moe_spec s = spec_of(NVF_MOE_ROUTE_SOFTMAX_TOPK, 1, 1, 0);
    s.act = NVF_MOE_ACT_SILU;
    CHECK_NEAR(nvf_moe_act_ref(&s, 1, 2), 1 * sig(1) * 2);
    CHECK_NEAR(nvf_moe_act_ref(&s, -1, 1), -sig(-1));
    CHECK(nvf_moe_act_ref(&s, 0, 5) == 0.0f);
    /* GPT-OSS swiglu: g clamped above at 7 only, u to [-7, 7], u + 1 */
    s.act = NVF_MOE_ACT_SWIGLU;
    s.swiglu_alpha = 1.702f;
    s.swiglu_beta = 1.0f;
    s.swiglu_limit = 7.0f;
    CHECK_NEAR(nvf_moe_act_ref(&s, 1, 0.5f), sig(1.702) * 1.5);
    CHECK_NEAR(nvf_moe_act_ref(&s, 10, 10), 7 * sig(1.702 * 7) * 8);
    CHECK_NEAR(nvf_moe_act_ref(&s, -10, -10), -10 * sig(-17.02) * -6);
    s.swiglu_limit = INFINITY;
    CHECK_NEAR(nvf_moe_act_ref(&s, 10, 10), 10 * sig(17.02) * 11);
    /* situ: beta tanh(g / beta) sigmoid(g) times u, or beta_l tanh(u / beta_l) */
    s.act = NVF_MOE_ACT_SITU;
    s.situ_beta = 1.0f;
    s.situ_beta_l = 0.0f;
    CHECK_NEAR(nvf_moe_act_ref(&s, 1, 2), tanh(1.0) * sig(1) * 2);
    s.situ_beta = 2.0f;
    s.situ_beta_l = 2.0f;
    CHECK_NEAR(nvf_moe_act_ref(&s, 1, 2), 2 * tanh(0.5) * sig(1) * (2 * tanh(1.0)));
    CHECK_NEAR(nvf_moe_act_ref(&s, 8, 100), 2 * tanh(4.0) * sig(8) * (2 * tanh(50.0)));
    /* relu2 is not gated */
    s.act = NVF_MOE_ACT_RELU2;
    CHECK(nvf_moe_act_ref(&s, 123, 3) == 9.0f);
    CHECK(nvf_moe_act_ref(&s, 123, -3) == 0.0f);
    CHECK_EQ_STR(nvf_moe_act_name(NVF_MOE_ACT_SITU), "situ");
    CHECK_EQ_STR(nvf_moe_route_name(NVF_MOE_ROUTE_DEEPSEEK_V3), "deepseek_v3");
}

/* The four transformers-written families of tests/data/moe. */
static void test_spec_families(void) {
    const char *data = getenv("NVFP4_TESTDATA");
    if (!data)
        return;
    static const struct {
        const char *dir;
        nvf_moe_route route;
        int64_t n, k;
        int renorm, shared_gate;
        float rsf;
        int64_t n_group, topk_group;
    } cases[] = {
        {"qwen3_moe", NVF_MOE_ROUTE_SOFTMAX_TOPK, 8, 2, 1, 0, 1.0f, 1, 1},
        {"deepseek_v3", NVF_MOE_ROUTE_DEEPSEEK_V3, 16, 4, 1, 0, 2.5f, 4, 2},
        {"mixtral", NVF_MOE_ROUTE_SOFTMAX_TOPK, 8, 2, 1, 0, 1.0f, 1, 1},
        {"qwen2_moe", NVF_MOE_ROUTE_SOFTMAX_TOPK, 8, 2, 0, 1, 1.0f, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/moe/%s", data, cases[i].dir);
        nvf_ckpt *ck = NULL;
        CHECK_MSG(nvf_ckpt_open(&ck, p) == 0, "%s: %s", p, nvf_error_last());
        if (!ck)
            continue;
        nvf_moe_spec s;
        CHECK_MSG(nvf_moe_spec_from_ckpt(&s, ck) == 0, "%s", nvf_error_last());
        CHECK_MSG(s.route == cases[i].route, "%s: route %s", cases[i].dir,
                  nvf_moe_route_name(s.route));
        CHECK(s.n_experts == cases[i].n && s.top_k == cases[i].k);
        CHECK_MSG(s.renormalize == cases[i].renorm, "%s renormalize %d", cases[i].dir,
                  s.renormalize);
        CHECK(s.shared_gate == cases[i].shared_gate);
        CHECK(s.routed_scaling_factor == cases[i].rsf);
        CHECK(s.n_group == cases[i].n_group && s.topk_group == cases[i].topk_group);
        CHECK(s.act == NVF_MOE_ACT_SILU);
        nvf_ckpt_close(ck);
    }
}

/* A tiny checkpoint in `dir`: H = 2, two experts of I = 1, F32, with `config` as config.json.
 * x = [1, 0] goes to expert 0 (logit 1 vs 0), whose gate 20 gives sigmoid(20) = 1.0f and whose
 * up 1.0078125 makes FC1's output 20.15625, which BF16 rounds to 20.125 (a step of 0.125
 * there); down [1, 0] passes it on. Expert 1 is all NaN: it must never be read. The shared
 * expert (gate 20, up 1, down 2) gives 40, its gate weight [0, 0] sigmoid 0.5. */
static int write_tiny(const char *dir, const char *config, int shared) {
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    fputs(config, f);
    fclose(f);
    static const float router[4] = {1, 0, 0, 0};
    static const float g0[2] = {20, 0}, u0[2] = {1.0078125f, 0}, d0[2] = {1, 0};
    const float nan2[2] = {NAN, NAN};
    static const float sg[2] = {0, 0}, sgate[2] = {20, 0}, sup[2] = {1, 0}, sdown[2] = {2, 0};
    nvf_st_entry e[12] = {
        {"model.layers.0.mlp.gate.weight", NVF_DTYPE_F32, 2, {2, 2}},
        {"model.layers.0.mlp.experts.0.gate_proj.weight", NVF_DTYPE_F32, 2, {1, 2}},
        {"model.layers.0.mlp.experts.0.up_proj.weight", NVF_DTYPE_F32, 2, {1, 2}},
        {"model.layers.0.mlp.experts.0.down_proj.weight", NVF_DTYPE_F32, 2, {2, 1}},
        {"model.layers.0.mlp.experts.1.gate_proj.weight", NVF_DTYPE_F32, 2, {1, 2}},
        {"model.layers.0.mlp.experts.1.up_proj.weight", NVF_DTYPE_F32, 2, {1, 2}},
        {"model.layers.0.mlp.experts.1.down_proj.weight", NVF_DTYPE_F32, 2, {2, 1}},
        {"model.layers.0.mlp.shared_expert_gate.weight", NVF_DTYPE_F32, 2, {1, 2}},
        {"model.layers.0.mlp.shared_expert.gate_proj.weight", NVF_DTYPE_F32, 2, {1, 2}},
        {"model.layers.0.mlp.shared_expert.up_proj.weight", NVF_DTYPE_F32, 2, {1, 2}},
        {"model.layers.0.mlp.shared_expert.down_proj.weight", NVF_DTYPE_F32, 2, {2, 1}},
    };
    const void *data[12] = {router, g0, u0, d0, nan2, nan2, nan2, sg, sgate, sup, sdown};
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    return nvf_st_write_file(p, e, data, shared ? 11 : 7);
}

static void test_forward_tiny(void) {
    char dir[] = "/tmp/nvfp4_test_moe_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *cfg = "{\"model_type\": \"qwen3_moe\", \"num_experts\": 2, "
                      "\"num_experts_per_tok\": 1, \"norm_topk_prob\": true, "
                      "\"hidden_act\": \"silu\", \"hidden_size\": 2}";
    CHECK(write_tiny(dir, cfg, 0) == 0);
    nvf_ckpt *ck = NULL;
    CHECK_MSG(nvf_ckpt_open(&ck, dir) == 0, "%s", nvf_error_last());
    nvf_moe_spec s;
    nvf_moe_weights *w = NULL;
    nvf_moe_opts o;
    memset(&o, 0, sizeof o);
    CHECK(ck && nvf_moe_spec_from_ckpt(&s, ck) == 0);
    CHECK(ck && nvf_moe_weights_open(&w, ck, 0, NVF_MOE_PRECISION_BF16, &o.quant) == 0);
    const float x[2] = {1, 0};
    float y[2] = {-1, -1};
    if (w) {
        CHECK_MSG(nvf_moe_forward_ref(y, x, 1, 2, &s, w, &o) == 0, "%s", nvf_error_last());
        CHECK_MSG(y[0] == 20.125f && y[1] == 0.0f, "y = %.9g %.9g (f32 FC1 would give 20.15625)",
                  y[0], y[1]);
        /* hidden size mismatch */
        CHECK(nvf_moe_forward_ref(y, x, 1, 4, &s, w, &o) == NVF_E_SHAPE);
        /* x = [0, 1]: logits tie at 0, expert 0 (the lower id) takes it: g = u = 0 */
        const float x1[2] = {0, 1};
        CHECK_MSG(nvf_moe_forward_ref(y, x1, 1, 2, &s, w, &o) == 0, "%s", nvf_error_last());
        CHECK(y[0] == 0.0f && y[1] == 0.0f);
        /* the NaN expert is refused when it is read */
        nvf_moe_matrix m[3];
        CHECK(nvf_moe_weights_get(w, m, NVF_MOE_PART_EXPERT, 1) == NVF_E_NONFINITE);
        CHECK_CONTAINS(nvf_error_last(), "experts.1.gate_proj.weight");
    }
    nvf_moe_weights_close(w);
    w = NULL;
    /* no such layer, and the listing of MoE layers */
    CHECK(ck && nvf_moe_weights_open(&w, ck, 3, NVF_MOE_PRECISION_BF16, &o.quant) == NVF_E_INVALID);
    CHECK_CONTAINS(nvf_error_last(), "no layer 3; MoE layers: 0");
    nvf_ckpt_close(ck);
    ck = NULL;

    /* Qwen2-MoE's gated shared expert: 20.125 + sigmoid(0) * 40 */
    cfg = "{\"model_type\": \"qwen2_moe\", \"num_experts\": 2, \"num_experts_per_tok\": 1, "
          "\"norm_topk_prob\": false, \"shared_expert_intermediate_size\": 1}";
    CHECK(write_tiny(dir, cfg, 1) == 0);
    CHECK_MSG(nvf_ckpt_open(&ck, dir) == 0, "%s", nvf_error_last());
    CHECK(ck && ck->moe.config.shared_expert_intermediate_size == 1);
    CHECK(ck && nvf_moe_spec_from_ckpt(&s, ck) == 0 && s.shared_gate == 1 && !s.renormalize);
    CHECK(ck && nvf_moe_weights_open(&w, ck, 0, NVF_MOE_PRECISION_BF16, &o.quant) == 0);
    if (w) {
        CHECK_MSG(nvf_moe_forward_ref(y, x, 1, 2, &s, w, &o) == 0, "%s", nvf_error_last());
        /* softmax weight of expert 0 without renormalization: e / (e + 1) */
        float p = (float)(exp(1.0) / (exp(1.0) + 1.0));
        CHECK_NEAR(y[0], p * 20.125 + 0.5 * 40);
        CHECK(y[1] == 0.0f);
    }
    nvf_moe_weights_close(w);
    w = NULL;
    nvf_ckpt_close(ck);
    ck = NULL;

    /* GPT-OSS: its routing and activation by name; its fused layout is refused */
    cfg = "{\"model_type\": \"gpt_oss\", \"num_local_experts\": 2, \"num_experts_per_tok\": 1, "
          "\"swiglu_limit\": 7.0, \"hidden_act\": \"silu\"}";
    CHECK(write_tiny(dir, cfg, 0) == 0);
    CHECK_MSG(nvf_ckpt_open(&ck, dir) == 0, "%s", nvf_error_last());
    CHECK(ck && nvf_moe_spec_from_ckpt(&s, ck) == 0);
    CHECK(s.route == NVF_MOE_ROUTE_TOPK_SOFTMAX && s.act == NVF_MOE_ACT_SWIGLU);
    CHECK(s.swiglu_alpha == 1.702f && s.swiglu_beta == 1.0f && s.swiglu_limit == 7.0f);
    CHECK(ck &&
          nvf_moe_weights_open(&w, ck, 0, NVF_MOE_PRECISION_BF16, &o.quant) == NVF_E_UNSUPPORTED);
    CHECK_CONTAINS(nvf_error_last(), "GPT-OSS");
    nvf_ckpt_close(ck);
    ck = NULL;

    /* Kimi K2 and GLM-4.5 route as DeepSeek-V3 by their model_type */
    const char *v3[] = {"kimi_k2", "glm4_moe"};
    for (int i = 0; i < 2; i++) {
        char c[400];
        snprintf(c, sizeof c,
                 "{\"model_type\": \"%s\", \"n_routed_experts\": 2, \"num_experts_per_tok\": 1, "
                 "\"n_group\": 1, \"topk_group\": 1, \"routed_scaling_factor\": 2.827, "
                 "\"norm_topk_prob\": true}",
                 v3[i]);
        CHECK(write_tiny(dir, c, 0) == 0);
        CHECK_MSG(nvf_ckpt_open(&ck, dir) == 0, "%s", nvf_error_last());
        CHECK(ck && nvf_moe_spec_from_ckpt(&s, ck) == 0);
        CHECK_MSG(s.route == NVF_MOE_ROUTE_DEEPSEEK_V3, "%s: %s", v3[i],
                  nvf_moe_route_name(s.route));
        CHECK(s.routed_scaling_factor == 2.827f && s.renormalize == 1);
        nvf_ckpt_close(ck);
        ck = NULL;
    }
    /* an activation the reference does not compute */
    CHECK(write_tiny(dir,
                     "{\"num_experts\": 2, \"num_experts_per_tok\": 1, "
                     "\"hidden_act\": \"gelu\"}",
                     0) == 0);
    CHECK(nvf_ckpt_open(&ck, dir) == 0);
    CHECK(ck && nvf_moe_spec_from_ckpt(&s, ck) == NVF_E_UNSUPPORTED);
    CHECK_CONTAINS(nvf_error_last(), "gelu");
    nvf_ckpt_close(ck);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    rmdir(dir);
}

/* W4A4 on hand-worked numbers: H = I = 16, two experts, RTN with E = 448. Expert 0's gate
 * [0][0], up [0][1] and down [0][0] are 6 and every other weight 0, so its NVFP4 values are
 * exact (gs = 2688 / 6 = 448, block scale 448, code 6, alpha 1/448). x = [1, 0.3, 0, ...]:
 *   W4A16: g = 6, u = 1.8, silu(6) * 1.8 = 10.773 -> bf16 10.75, y0 = 10.75 * 6 = 64.5;
 *   W4A4: x's global scale 2688 / 1, block scale 448, 0.3 * 6 = 1.8 -> E2M1 2, so u = 6 * 2 *
 *   448 / 2688 = 2: silu(6) * 2 = 11.970 -> bf16 12, which FC2's own quantization keeps (the
 *   block maximum maps to 6 exactly), y0 = 72. Expert 1 is NaN and never chosen. */
static void test_w4a4(void) {
    char dir[] = "/tmp/nvfp4_test_moe4_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("{\"model_type\": \"qwen3_moe\", \"num_experts\": 2, \"num_experts_per_tok\": 1, "
          "\"norm_topk_prob\": true, \"hidden_act\": \"silu\"}",
          f);
    fclose(f);
    static float router[32], g0[256], u0[256], d0[256], nan256[256];
    router[0] = 1;
    g0[0] = 6;
    u0[1] = 6;
    d0[0] = 6;
    for (int i = 0; i < 256; i++)
        nan256[i] = NAN;
    nvf_st_entry e[7] = {
        {"model.layers.0.mlp.gate.weight", NVF_DTYPE_F32, 2, {2, 16}},
        {"model.layers.0.mlp.experts.0.gate_proj.weight", NVF_DTYPE_F32, 2, {16, 16}},
        {"model.layers.0.mlp.experts.0.up_proj.weight", NVF_DTYPE_F32, 2, {16, 16}},
        {"model.layers.0.mlp.experts.0.down_proj.weight", NVF_DTYPE_F32, 2, {16, 16}},
        {"model.layers.0.mlp.experts.1.gate_proj.weight", NVF_DTYPE_F32, 2, {16, 16}},
        {"model.layers.0.mlp.experts.1.up_proj.weight", NVF_DTYPE_F32, 2, {16, 16}},
        {"model.layers.0.mlp.experts.1.down_proj.weight", NVF_DTYPE_F32, 2, {16, 16}},
    };
    const void *data[7] = {router, g0, u0, d0, nan256, nan256, nan256};
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(nvf_st_write_file(p, e, data, 7) == 0);
    nvf_ckpt *ck = NULL;
    CHECK_MSG(nvf_ckpt_open(&ck, dir) == 0, "%s", nvf_error_last());
    nvf_moe_spec s;
    CHECK(ck && nvf_moe_spec_from_ckpt(&s, ck) == 0);
    nvf_moe_opts o = {NVF_MOE_PRECISION_W4A16,
                      {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448},
                      0};
    float x[16] = {1, 0.3f}, y[16];
    const float want[3] = {64.5f, 72.0f, 72.0f};
    for (int run = 0; run < 3 && ck; run++) {
        o.precision = run == 0 ? NVF_MOE_PRECISION_W4A16 : NVF_MOE_PRECISION_W4A4;
        o.per_token = run == 2;
        nvf_moe_weights *w = NULL;
        CHECK(nvf_moe_weights_open(&w, ck, 0, o.precision, &o.quant) == 0);
        if (!w)
            continue;
        CHECK_MSG(nvf_moe_forward_ref(y, x, 1, 16, &s, w, &o) == 0, "%s", nvf_error_last());
        CHECK_MSG(fabsf(y[0] - want[run]) < 1e-3f, "run %d: y0 = %.9g, expected %g", run, y[0],
                  want[run]);
        CHECK(y[1] == 0.0f && y[15] == 0.0f);
        nvf_moe_weights_close(w);
    }
    nvf_ckpt_close(ck);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

int main(void) {
    test_softmax_topk();
    test_sigmoid_topk();
    test_deepseek_v3();
    test_topk_softmax();
    test_activations();
    test_spec_families();
    test_forward_tiny();
    test_w4a4();
    return check_summary("test_moe");
}
