/*
 * The naming rules of lib/ckpt/ckpt_naming.c, one name at a time: every expected value is
 * read off the name by hand (SPEC section 3 "MoE expert naming", section 5 groups).
 */
#include "check.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/status.h"

#include <stdlib.h>
#include <string.h>

static void test_group_key(void) {
    char k1[256], k2[256], k3[256];
    CHECK(nvf_ckpt_group_key(k1, sizeof k1, "model.layers.3.mlp.experts.7.gate_proj.weight") == 1);
    CHECK(nvf_ckpt_group_key(k2, sizeof k2, "model.layers.3.mlp.experts.7.up_proj.weight") == 1);
    CHECK(nvf_ckpt_group_key(k3, sizeof k3, "model.layers.3.mlp.experts.8.up_proj.weight") == 1);
    CHECK_EQ_STR(k1, "model.layers.3.mlp.experts.7.{gate,up}.weight");
    CHECK(strcmp(k1, k2) == 0 && strcmp(k1, k3) != 0);
    CHECK(nvf_ckpt_group_key(k1, sizeof k1, "layers.0.block_sparse_moe.experts.1.w1.weight") == 1);
    CHECK(nvf_ckpt_group_key(k2, sizeof k2, "layers.0.block_sparse_moe.experts.1.w3.weight") == 1);
    CHECK(strcmp(k1, k2) == 0);
    CHECK(nvf_ckpt_group_key(k1, sizeof k1, "model.layers.0.self_attn.k_proj.weight") == 1);
    CHECK_EQ_STR(k1, "model.layers.0.self_attn.{q,k,v}.weight");
    CHECK(nvf_ckpt_group_key(k1, sizeof k1, "model.layers.3.mlp.experts.7.down_proj.weight") == 0);
    CHECK_EQ_STR(k1, "model.layers.3.mlp.experts.7.down_proj.weight");
    CHECK(nvf_ckpt_group_key(k1, sizeof k1, "model.layers.3.mlp.gate.weight") == 0);
    CHECK(nvf_ckpt_group_key(k1, 8, "model.layers.3.mlp.gate.weight") == NVF_E_INVALID);
}

static void check_name(const char *name, int32_t ndim, nvf_name_kind kind, nvf_proj proj,
                       int64_t expert, int w13, size_t experts_len) {
    nvf_ckpt_name n;
    nvf_ckpt_name_parse(&n, name, ndim);
    CHECK_MSG(n.kind == kind, "%s (%d-D): kind %d, expected %d", name, (int)ndim, (int)n.kind,
              (int)kind);
    CHECK_MSG(n.proj == proj, "%s: proj %d, expected %d", name, (int)n.proj, (int)proj);
    CHECK_MSG(n.expert == expert, "%s: expert %lld", name, (long long)n.expert);
    CHECK_MSG(n.w13 == w13, "%s: w13 %d", name, n.w13);
    CHECK_MSG(n.experts_len == experts_len, "%s: experts_len %zu, expected %zu", name,
              n.experts_len, experts_len);
}

static void test_name_parse(void) {
    /* "model.layers.1.mlp.experts." is 27 characters */
    check_name("model.layers.1.mlp.experts.12.gate_proj.weight", 2, NVF_NAME_EXPERT, NVF_PROJ_GATE,
               12, 0, 27);
    check_name("model.layers.1.mlp.experts.0.up_proj.weight_packed", 2, NVF_NAME_EXPERT,
               NVF_PROJ_UP, 0, 0, 27);
    check_name("model.layers.1.mlp.experts.3.down_proj.weight", 2, NVF_NAME_EXPERT, NVF_PROJ_DOWN,
               3, 0, 27);
    /* "layers.0.block_sparse_moe.experts." is 34 */
    check_name("layers.0.block_sparse_moe.experts.5.w3.weight", 2, NVF_NAME_EXPERT, NVF_PROJ_UP, 5,
               1, 34);
    check_name("model.layers.1.mlp.experts.gate_up_proj", 3, NVF_NAME_FUSED, NVF_PROJ_GATE_UP, -1,
               0, 27);
    check_name("model.layers.1.mlp.experts.down_proj.weight", 3, NVF_NAME_FUSED, NVF_PROJ_DOWN, -1,
               0, 27);
    /* issue #11 item 9: a per-expert name holding a 3-D tensor, and other 3-D names */
    check_name("model.layers.0.mlp.experts.0.gate_proj.weight", 3, NVF_NAME_EXPERT_UNKNOWN,
               NVF_PROJ_NONE, -1, 0, 0);
    check_name("model.layers.0.mlp.experts.gate_proj", 3, NVF_NAME_EXPERT_UNKNOWN, NVF_PROJ_NONE,
               -1, 0, 0);
    check_name("model.layers.0.mlp.experts.down_projection", 3, NVF_NAME_EXPERT_UNKNOWN,
               NVF_PROJ_NONE, -1, 0, 0);
    /* scales of fused tensors are 3-D too, and not unknown */
    check_name("model.layers.0.mlp.experts.gate_up_proj_scale_inv", 3, NVF_NAME_OTHER,
               NVF_PROJ_NONE, -1, 0, 0);
    check_name("model.layers.0.mlp.experts.0.gate_proj.weight_scale", 2, NVF_NAME_OTHER,
               NVF_PROJ_NONE, -1, 0, 0);
    check_name("model.layers.0.mlp.shared_experts.gate_proj.weight", 2, NVF_NAME_OTHER,
               NVF_PROJ_NONE, -1, 0, 0);
    check_name("model.layers.0.mlp.experts.0.gate_proj.bias", 1, NVF_NAME_OTHER, NVF_PROJ_NONE, -1,
               0, 0);
    check_name("model.layers.0.mlp.experts.0.gate.weight", 2, NVF_NAME_OTHER, NVF_PROJ_NONE, -1, 0,
               0);
}

static void test_fused_module(void) {
    char *m = nvf_ckpt_fused_module("model.layers.1.mlp.experts.gate_up_proj", 7, NVF_PROJ_UP);
    CHECK(m && strcmp(m, "model.layers.1.mlp.experts.7.up_proj") == 0);
    free(m);
    m = nvf_ckpt_fused_module("model.layers.1.mlp.experts.down_proj.weight", 0, NVF_PROJ_DOWN);
    CHECK(m && strcmp(m, "model.layers.1.mlp.experts.0.down_proj") == 0);
    free(m);
    CHECK(nvf_ckpt_fused_module("model.layers.1.mlp.experts.gate_proj", 0, NVF_PROJ_GATE) == NULL);
    m = nvf_ckpt_module_of("model.layers.0.self_attn.q_proj.weight");
    CHECK(m && strcmp(m, "model.layers.0.self_attn.q_proj") == 0);
    free(m);
    m = nvf_ckpt_module_of("model.layers.0.mlp.experts.gate_up_proj");
    CHECK(m && strcmp(m, "model.layers.0.mlp.experts.gate_up_proj") == 0);
    free(m);
}

static void check_companion(const char *name, int alt, nvf_companion slot, const char *weight) {
    char w[128];
    nvf_companion got = nvf_ckpt_companion(w, sizeof w, name, alt);
    CHECK_MSG(got == slot, "%s alt %d: slot %d, expected %d", name, alt, (int)got, (int)slot);
    CHECK_MSG(strcmp(w, weight) == 0, "%s alt %d: weight '%s', expected '%s'", name, alt, w,
              weight);
}

static void test_companions(void) {
    check_companion("a.q_proj.weight_scale_inv", 0, NVF_COMPANION_SCALE, "a.q_proj.weight");
    check_companion("a.q_proj.weight_scale_inv", 1, NVF_COMPANION_SCALE, "");
    check_companion("m.experts.gate_up_proj_scale_inv", 0, NVF_COMPANION_SCALE,
                    "m.experts.gate_up_proj");
    check_companion("a.q_proj.weight_scale", 0, NVF_COMPANION_SCALE, "a.q_proj.weight");
    check_companion("a.q_proj.weight_scale", 1, NVF_COMPANION_SCALE, "a.q_proj.weight_packed");
    check_companion("a.q_proj.weight_scale_2", 0, NVF_COMPANION_SCALE_2, "a.q_proj.weight");
    check_companion("a.q_proj.input_scale", 0, NVF_COMPANION_INPUT, "a.q_proj.weight");
    check_companion("a.q_proj.weight_global_scale", 0, NVF_COMPANION_SCALE_2,
                    "a.q_proj.weight_packed");
    check_companion("a.q_proj.input_global_scale", 0, NVF_COMPANION_INPUT,
                    "a.q_proj.weight_packed");
    check_companion("a.q_proj.weight_zero_point", 0, NVF_COMPANION_OTHER, "a.q_proj.weight_packed");
    check_companion("a.attn.k_scale", 0, NVF_COMPANION_OTHER, "");
    check_companion("a.q_proj.weight", 0, NVF_COMPANION_NONE, "");
    check_companion("a.norm.scale", 0, NVF_COMPANION_NONE, "");
    /* ModelOpt's fused expert scales: F_weight_scale, F_weight_scale_2, F_input_scale of F */
    check_companion("m.experts.gate_up_proj_weight_scale", 0, NVF_COMPANION_SCALE,
                    "m.experts.gate_up_proj");
    check_companion("m.experts.gate_up_proj_weight_scale", 1, NVF_COMPANION_SCALE, "");
    check_companion("m.experts.gate_up_proj_weight_scale_2", 0, NVF_COMPANION_SCALE_2,
                    "m.experts.gate_up_proj");
    check_companion("m.experts.down_proj_input_scale", 0, NVF_COMPANION_INPUT,
                    "m.experts.down_proj");
    check_companion("m.experts.down_proj_weight_scale_2", 0, NVF_COMPANION_SCALE_2,
                    "m.experts.down_proj");
    /* only fused expert tensors: a suffix elsewhere is no scale */
    check_companion("m.mlp.gate_up_proj_weight_scale", 0, NVF_COMPANION_NONE, "");
    check_companion("m.experts.up_proj_weight_scale", 0, NVF_COMPANION_NONE, "");
    /* F.weight_scale of a fused F named without ".weight": F.weight, F.weight_packed, then F */
    check_companion("m.experts.gate_up_proj.weight_scale", 0, NVF_COMPANION_SCALE,
                    "m.experts.gate_up_proj.weight");
    check_companion("m.experts.gate_up_proj.weight_scale", 2, NVF_COMPANION_SCALE,
                    "m.experts.gate_up_proj");
    check_companion("m.experts.gate_up_proj.weight_scale", 3, NVF_COMPANION_SCALE, "");
    check_companion("m.experts.down_proj.weight_scale_2", 1, NVF_COMPANION_SCALE_2,
                    "m.experts.down_proj");
    check_companion("m.experts.down_proj.input_scale", 1, NVF_COMPANION_INPUT,
                    "m.experts.down_proj");
    check_companion("a.q_proj.weight_scale_2", 1, NVF_COMPANION_SCALE_2, "");
    check_companion("m.experts.down_proj.weight_zero_point", 1, NVF_COMPANION_OTHER, "");
    CHECK(nvf_ckpt_is_scale_inv("a.weight_scale_inv") && !nvf_ckpt_is_scale_inv("a.weight_scale"));
    char out[32];
    CHECK(nvf_ckpt_fp8_scale_name(out, sizeof out, "x.w1.weight") == 0);
    CHECK_EQ_STR(out, "x.w1.weight_scale_inv");
    CHECK(nvf_ckpt_fp8_scale_name(out, 21, "x.w1.weight") == NVF_E_INVALID);
}

static void test_roles(void) {
    static const struct {
        const char *name;
        nvf_ckpt_role role;
        int is_weight;
    } k[] = {
        {"model.layers.0.mlp.experts.0.gate_proj.weight", NVF_ROLE_EXPERT_WEIGHT, 1},
        {"model.layers.0.mlp.experts.gate_up_proj", NVF_ROLE_EXPERT_WEIGHT, 1},
        {"model.layers.0.mlp.experts.down_proj_scale_inv", NVF_ROLE_SCALE, 0},
        {"model.layers.0.mlp.experts.gate_up_proj_weight_scale", NVF_ROLE_SCALE, 0},
        {"model.layers.0.mlp.experts.down_proj_weight_scale_2", NVF_ROLE_SCALE, 0},
        {"model.layers.0.mlp.gate.weight", NVF_ROLE_ROUTER, 1},
        {"model.layers.0.mlp.gate.e_score_correction_bias", NVF_ROLE_ROUTER_BIAS, 0},
        {"model.layers.0.mlp.shared_experts.up_proj.weight", NVF_ROLE_SHARED_EXPERT, 1},
        {"model.layers.0.mlp.shared_expert_gate.weight", NVF_ROLE_SHARED_EXPERT_GATE, 1},
        {"model.layers.0.mlp.down_proj.weight", NVF_ROLE_DENSE_MLP, 1},
        {"model.layers.0.self_attn.o_proj.weight", NVF_ROLE_ATTENTION, 1},
        {"model.layers.0.input_layernorm.weight", NVF_ROLE_NORM, 0},
        {"model.embed_tokens.weight", NVF_ROLE_EMBEDDING, 1},
        {"lm_head.weight", NVF_ROLE_LM_HEAD, 1},
        {"model.layers.0.self_attn.q_proj.bias", NVF_ROLE_BIAS, 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        int w = -1;
        nvf_ckpt_role r = nvf_ckpt_role_of(k[i].name, &w);
        CHECK_MSG(r == k[i].role && w == k[i].is_weight, "%s: role %s weight %d", k[i].name,
                  nvf_ckpt_role_name(r), w);
    }
}

static void test_ct_name(void) {
    char out[64];
    CHECK(nvf_ckpt_ct_name(out, sizeof out, "a.up_proj.weight") == 1);
    CHECK_EQ_STR(out, "a.up_proj.weight_packed");
    CHECK(nvf_ckpt_ct_name(out, sizeof out, "a.up_proj.weight_scale_2") == 1);
    CHECK_EQ_STR(out, "a.up_proj.weight_global_scale");
    CHECK(nvf_ckpt_ct_name(out, sizeof out, "a.up_proj.input_scale") == 1);
    CHECK_EQ_STR(out, "a.up_proj.input_global_scale");
    CHECK(nvf_ckpt_ct_name(out, sizeof out, "a.up_proj.weight_scale") == 0);
    CHECK_EQ_STR(out, "a.up_proj.weight_scale");
    CHECK(nvf_ckpt_ct_name(out, 20, "a.up_proj.weight") == NVF_E_INVALID);
    CHECK(nvf_ckpt_ct_name(out, 5, "a.norm") == NVF_E_INVALID);
    /* a fused scale parses as no expert weight (no "unknown 3-D tensor") */
    nvf_ckpt_name n;
    nvf_ckpt_name_parse(&n, "model.layers.0.mlp.experts.gate_up_proj_weight_scale", 3);
    CHECK(n.kind == NVF_NAME_OTHER);
}

int main(void) {
    test_group_key();
    test_ct_name();
    test_name_parse();
    test_fused_module();
    test_companions();
    test_roles();
    CHECK_EQ_STR(nvf_plan_default_include[0], NVF_CKPT_DEFAULT_SCOPE);
    CHECK_EQ_STR(NVF_CKPT_DEFAULT_SCOPE, "*.mlp.experts.*");
    return check_summary("test_ckpt_naming");
}
