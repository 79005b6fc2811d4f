/*
 * Tensor naming rules (SPEC section 3 "MoE expert naming", section 5 "groups"): what a name
 * says a tensor is. Pure functions of the name (and the number of dimensions); they read no
 * checkpoint, so every other module, inside lib/ckpt or not, can ask them.
 *
 * Names read:
 *   1. P.experts.{e}.{gate_proj,up_proj,down_proj}.weight, or w1/w3/w2 (Mixtral), with
 *      ".weight_packed" for compressed-tensors: one expert's 2-D linear weight.
 *   2. P.experts.gate_up_proj and P.experts.down_proj, with or without ".weight": fused 3-D
 *      [E, 2I, H] (gate rows first) and [E, H, I]. Decided by the exact name.
 *   3. Scale companions: W_scale_inv (FP8 block); M.weight_scale, M.weight_scale_2,
 *      M.input_scale (ModelOpt); M.weight_scale, M.weight_global_scale, M.input_global_scale,
 *      M.weight_zero_point of M.weight_packed (compressed-tensors; M.weight_scale is also the
 *      block scale of an FP8 M.weight in compressed-tensors' block strategy); k_scale, v_scale,
 *      output_scale (attention, no weight slot). Fused experts F = P.experts.gate_up_proj or
 *      P.experts.down_proj: F_weight_scale, F_weight_scale_2, F_input_scale (ModelOpt's export
 *      of fused experts, as in GPT-OSS and Kimi NVFP4 checkpoints), and F.weight_scale,
 *      F.weight_scale_2, F.input_scale of a fused tensor named F without ".weight".
 *   4. Groups sharing a global scale: {gate,up}_proj, {w1,w3}, {q,k,v}_proj.
 *   5. ModelOpt NVFP4 names to compressed-tensors' (for writing the latter): M.weight ->
 *      M.weight_packed, M.weight_scale_2 -> M.weight_global_scale, M.input_scale ->
 *      M.input_global_scale, M.weight_scale unchanged.
 */
#include "ckpt_internal.h"

#include "nvfp4/status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCALE_INV "_scale_inv"

/* The last name component of the scale, the weight's last component (NULL: no weight slot),
 * and the slot [ModelOpt export; compressed-tensors]. */
static const struct {
    const char *last, *weight;
    nvf_companion slot;
} k_companions[] = {
    {"weight_scale", "weight", NVF_COMPANION_SCALE},
    {"weight_scale_2", "weight", NVF_COMPANION_SCALE_2},
    {"input_scale", "weight", NVF_COMPANION_INPUT},
    {"weight_scale", "weight_packed", NVF_COMPANION_SCALE},
    {"weight_global_scale", "weight_packed", NVF_COMPANION_SCALE_2},
    {"input_global_scale", "weight_packed", NVF_COMPANION_INPUT},
    {"weight_zero_point", "weight_packed", NVF_COMPANION_OTHER},
    {"k_scale", NULL, NVF_COMPANION_OTHER},
    {"v_scale", NULL, NVF_COMPANION_OTHER},
    {"output_scale", NULL, NVF_COMPANION_OTHER},
};
#define N_COMPANIONS (sizeof k_companions / sizeof k_companions[0])

static const char *last_component(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

/* Copy prefix[0, n) + tail into out; "" when it does not fit. */
static void join(char *out, size_t cap, const char *prefix, size_t n, const char *tail) {
    size_t k = strlen(tail);
    if (cap == 0)
        return;
    out[0] = '\0';
    if (n + k + 1 > cap)
        return;
    memcpy(out, prefix, n);
    memcpy(out + n, tail, k + 1);
}

/* The fused expert parameters, as the last name component after ".experts.". */
static const char *const k_fused[] = {"gate_up_proj", "down_proj"};

/* Whether name[0, n) ends in ".experts." + a fused parameter. */
static int is_fused_module(const char *name, size_t n) {
    for (size_t i = 0; i < sizeof k_fused / sizeof k_fused[0]; i++) {
        size_t k = strlen(k_fused[i]), e = strlen(".experts.");
        if (n >= k + e && memcmp(name + n - k, k_fused[i], k) == 0 &&
            memcmp(name + n - k - e, ".experts.", e) == 0)
            return 1;
    }
    return 0;
}

/* ModelOpt's fused scale names: P.experts.F_SUFFIX -> the slot, weight P.experts.F. */
static nvf_companion fused_companion(char *weight, size_t cap, const char *name, int alt) {
    static const struct {
        const char *suffix;
        nvf_companion slot;
    } k[] = {{"_weight_scale_2", NVF_COMPANION_SCALE_2},
             {"_weight_scale", NVF_COMPANION_SCALE},
             {"_input_scale", NVF_COMPANION_INPUT}};
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t n = strlen(k[i].suffix);
        if (len <= n || !ckpt_ends_with(name, k[i].suffix) || !is_fused_module(name, len - n))
            continue;
        if (alt == 0)
            join(weight, cap, name, len - n, "");
        return k[i].slot;
    }
    return NVF_COMPANION_NONE;
}

nvf_companion nvf_ckpt_companion(char *weight, size_t cap, const char *name, int alt) {
    size_t len = strlen(name);
    if (cap > 0)
        weight[0] = '\0';
    if (ckpt_ends_with(name, SCALE_INV)) {
        if (alt == 0)
            join(weight, cap, name, len - strlen(SCALE_INV), "");
        return NVF_COMPANION_SCALE;
    }
    nvf_companion fused = fused_companion(weight, cap, name, alt);
    if (fused != NVF_COMPANION_NONE)
        return fused;
    const char *last = last_component(name);
    nvf_companion slot = NVF_COMPANION_NONE;
    int seen = 0;
    for (size_t i = 0; i < N_COMPANIONS; i++) {
        if (strcmp(last, k_companions[i].last) != 0)
            continue;
        if (slot == NVF_COMPANION_NONE)
            slot = k_companions[i].slot;
        if (k_companions[i].weight && seen++ == alt) {
            join(weight, cap, name, (size_t)(last - name), k_companions[i].weight);
            return k_companions[i].slot;
        }
    }
    /* Last candidate: the module itself when it is a fused tensor named without ".weight". */
    size_t module = (size_t)(last - name);
    if (slot != NVF_COMPANION_NONE && slot != NVF_COMPANION_OTHER && seen == alt && module > 0 &&
        is_fused_module(name, module - 1))
        join(weight, cap, name, module - 1, "");
    return slot;
}

int nvf_ckpt_is_scale_inv(const char *name) {
    return ckpt_ends_with(name, SCALE_INV);
}

int nvf_ckpt_fp8_scale_name(char *out, size_t cap, const char *weight) {
    join(out, cap, weight, strlen(weight), SCALE_INV);
    if (cap == 0 || out[0] == '\0')
        return nvf_error_set(NVF_E_INVALID, "tensor name '%.64s...' is too long", weight);
    return NVF_OK;
}

/* "gate_proj" (n bytes at s) -> projection; *w13 set for w1/w3/w2. */
static nvf_proj proj_of(const char *s, size_t n, int *w13) {
    static const struct {
        const char *name;
        nvf_proj proj;
        int w13;
    } k[] = {{"gate_proj", NVF_PROJ_GATE, 0}, {"up_proj", NVF_PROJ_UP, 0},
             {"down_proj", NVF_PROJ_DOWN, 0}, {"w1", NVF_PROJ_GATE, 1},
             {"w3", NVF_PROJ_UP, 1},          {"w2", NVF_PROJ_DOWN, 1}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (strlen(k[i].name) == n && memcmp(k[i].name, s, n) == 0) {
            *w13 = k[i].w13;
            return k[i].proj;
        }
    }
    return NVF_PROJ_NONE;
}

nvf_proj ckpt_proj_weight(const char *rest, int *w13) {
    const char *dot = strchr(rest, '.');
    if (!dot || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".weight_packed") != 0))
        return NVF_PROJ_NONE;
    return proj_of(rest, (size_t)(dot - rest), w13);
}

/* Split NAME = PREFIX ".mlp." REST where PREFIX ends in "layers.{digits}". */
int ckpt_split_mlp(const char *name, size_t *prefix_len, int64_t *index, const char **rest) {
    static const char *const markers[] = {".mlp.", ".block_sparse_moe."};
    for (size_t m = 0; m < 2; m++) {
        const char *p = strstr(name, markers[m]);
        if (!p)
            continue;
        const char *d = p;
        while (d > name && d[-1] >= '0' && d[-1] <= '9')
            d--;
        size_t digits = (size_t)(p - d);
        if (digits == 0 || digits > 9 || d - name < 7 || strncmp(d - 7, "layers.", 7) != 0)
            continue;
        int64_t v = 0;
        for (const char *c = d; c < p; c++)
            v = v * 10 + (*c - '0');
        *index = v;
        *prefix_len = (size_t)(p - name);
        *rest = p + strlen(markers[m]);
        return 1;
    }
    return 0;
}

/* The fused projection of `r` (the name after "experts."), by the exact name. */
static nvf_proj fused_proj(const char *r) {
    if (strcmp(r, "gate_up_proj") == 0 || strcmp(r, "gate_up_proj.weight") == 0)
        return NVF_PROJ_GATE_UP;
    if (strcmp(r, "down_proj") == 0 || strcmp(r, "down_proj.weight") == 0)
        return NVF_PROJ_DOWN;
    return NVF_PROJ_NONE;
}

void nvf_ckpt_name_parse(nvf_ckpt_name *out, const char *name, int32_t ndim) {
    memset(out, 0, sizeof *out);
    out->kind = NVF_NAME_OTHER;
    out->proj = NVF_PROJ_NONE;
    out->expert = -1;
    char tmp[1];
    const char *at = strstr(name, ".experts.");
    if (!at || nvf_ckpt_companion(tmp, 0, name, 0) != NVF_COMPANION_NONE)
        return;
    /* The last ".experts.": one further left would be part of the prefix. */
    for (const char *p = strstr(at + 1, ".experts."); p; p = strstr(p + 1, ".experts."))
        at = p;
    const char *r = at + strlen(".experts.");
    size_t experts_len = (size_t)(r - name);
    if (r[0] >= '0' && r[0] <= '9' && ndim == 2) {
        int64_t id = 0;
        int digits = 0;
        while (*r >= '0' && *r <= '9' && digits < 10) {
            id = id * 10 + (*r++ - '0');
            digits++;
        }
        int w13 = 0;
        nvf_proj proj = *r == '.' ? ckpt_proj_weight(r + 1, &w13) : NVF_PROJ_NONE;
        if (proj != NVF_PROJ_NONE) {
            out->kind = NVF_NAME_EXPERT;
            out->proj = proj;
            out->expert = id;
            out->w13 = w13;
            out->experts_len = experts_len;
        }
        return;
    }
    if (ndim != 3)
        return;
    out->proj = fused_proj(r);
    if (out->proj != NVF_PROJ_NONE) {
        out->kind = NVF_NAME_FUSED;
        out->experts_len = experts_len;
    } else {
        out->kind = NVF_NAME_EXPERT_UNKNOWN;
    }
}

/* The component before the last one, copied into buf ("" when none). */
static void module_leaf(char *buf, size_t len, const char *name) {
    const char *last = strrchr(name, '.');
    buf[0] = '\0';
    if (!last)
        return;
    const char *start = last;
    while (start > name && start[-1] != '.')
        start--;
    size_t n = (size_t)(last - start);
    if (n >= len)
        n = len - 1;
    memcpy(buf, start, n);
    buf[n] = '\0';
}

nvf_ckpt_role nvf_ckpt_role_of(const char *name, int *is_weight) {
    const char *last = last_component(name);
    char leaf[128];
    module_leaf(leaf, sizeof leaf, name);
    *is_weight = 0;
    char tmp[1];
    if (nvf_ckpt_companion(tmp, 0, name, 0) != NVF_COMPANION_NONE)
        return NVF_ROLE_SCALE;
    if (strcmp(last, "e_score_correction_bias") == 0)
        return NVF_ROLE_ROUTER_BIAS;
    if (strcmp(last, "bias") == 0 || ckpt_ends_with(last, "_bias"))
        return NVF_ROLE_BIAS;
    nvf_ckpt_name parsed;
    nvf_ckpt_name_parse(&parsed, name, 3);
    int fused = parsed.kind == NVF_NAME_FUSED;
    int weight_like = fused || strcmp(last, "weight") == 0 || strcmp(last, "weight_packed") == 0;
    if (strstr(leaf, "norm") && !fused)
        return NVF_ROLE_NORM;
    *is_weight = weight_like;
    if (strstr(name, ".experts.") && !strstr(name, "shared_expert"))
        return NVF_ROLE_EXPERT_WEIGHT;
    if (strstr(name, ".mlp.gate.") || strstr(name, ".block_sparse_moe.gate."))
        return NVF_ROLE_ROUTER;
    if (strstr(name, ".shared_expert_gate."))
        return NVF_ROLE_SHARED_EXPERT_GATE;
    if (strstr(name, ".shared_experts.") || strstr(name, ".shared_expert."))
        return NVF_ROLE_SHARED_EXPERT;
    if (strstr(name, ".mlp.") || strstr(name, ".block_sparse_moe."))
        return NVF_ROLE_DENSE_MLP;
    if (strstr(name, ".self_attn.") || strstr(name, ".attn.") || strstr(name, ".attention."))
        return NVF_ROLE_ATTENTION;
    if (strstr(name, "embed"))
        return NVF_ROLE_EMBEDDING;
    if (strncmp(name, "lm_head", 7) == 0 || strstr(name, ".lm_head"))
        return NVF_ROLE_LM_HEAD;
    return NVF_ROLE_OTHER;
}

char *nvf_ckpt_fused_module(const char *fused_name, int64_t expert, nvf_proj proj) {
    static const char *const leaf[] = {"gate_proj", "up_proj", "down_proj"};
    nvf_ckpt_name n;
    nvf_ckpt_name_parse(&n, fused_name, 3);
    if (n.kind != NVF_NAME_FUSED || proj < NVF_PROJ_GATE || proj > NVF_PROJ_DOWN || expert < 0)
        return NULL;
    int len = snprintf(NULL, 0, "%.*s%lld.%s", (int)n.experts_len, fused_name, (long long)expert,
                       leaf[proj]);
    char *s = len > 0 ? malloc((size_t)len + 1) : NULL;
    if (s)
        snprintf(s, (size_t)len + 1, "%.*s%lld.%s", (int)n.experts_len, fused_name,
                 (long long)expert, leaf[proj]);
    return s;
}

char *nvf_ckpt_module_of(const char *name) {
    size_t n = strlen(name);
    if (ckpt_ends_with(name, ".weight"))
        n -= strlen(".weight");
    else if (ckpt_ends_with(name, ".weight_packed")) /* compressed-tensors NVFP4 */
        n -= strlen(".weight_packed");
    char *m = malloc(n + 1);
    if (m) {
        memcpy(m, name, n);
        m[n] = '\0';
    }
    return m;
}

int nvf_ckpt_group_key(char *out, size_t cap, const char *name) {
    static const struct {
        const char *part, *group;
    } k_parts[] = {
        {".gate_proj.", ".{gate,up}."}, {".up_proj.", ".{gate,up}."}, {".w1.", ".{w1,w3}."},
        {".w3.", ".{w1,w3}."},          {".q_proj.", ".{q,k,v}."},    {".k_proj.", ".{q,k,v}."},
        {".v_proj.", ".{q,k,v}."},
    };
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof k_parts / sizeof k_parts[0]; i++) {
        /* The last occurrence: a projection name further left would be part of the prefix. */
        const char *hit = NULL;
        for (const char *p = strstr(name, k_parts[i].part); p; p = strstr(p + 1, k_parts[i].part))
            hit = p;
        if (!hit || hit == name)
            continue;
        size_t pre = (size_t)(hit - name), plen = strlen(k_parts[i].part);
        size_t glen = strlen(k_parts[i].group), post = len - pre - plen;
        if (pre + glen + post + 1 > cap)
            return nvf_error_set(NVF_E_INVALID, "tensor name '%s' is too long", name);
        memcpy(out, name, pre);
        memcpy(out + pre, k_parts[i].group, glen);
        memcpy(out + pre + glen, hit + plen, post + 1);
        return 1;
    }
    if (len + 1 > cap)
        return nvf_error_set(NVF_E_INVALID, "tensor name '%s' is too long", name);
    memcpy(out, name, len + 1);
    return 0;
}

int nvf_ckpt_ct_name(char *out, size_t cap, const char *modelopt_name) {
    static const struct {
        const char *from, *to;
    } k[] = {{".weight", ".weight_packed"},
             {".weight_scale_2", ".weight_global_scale"},
             {".input_scale", ".input_global_scale"}};
    size_t len = strlen(modelopt_name);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (!ckpt_ends_with(modelopt_name, k[i].from))
            continue;
        join(out, cap, modelopt_name, len - strlen(k[i].from), k[i].to);
        if (cap == 0 || out[0] == '\0')
            return nvf_error_set(NVF_E_INVALID, "tensor name '%.64s...' is too long",
                                 modelopt_name);
        return 1;
    }
    join(out, cap, modelopt_name, len, "");
    if (cap == 0 || out[0] == '\0')
        return nvf_error_set(NVF_E_INVALID, "tensor name '%.64s...' is too long", modelopt_name);
    return 0;
}

int nvf_ckpt_group_of(char *out, size_t cap, const char *name) {
    int rc = nvf_ckpt_group_key(out, cap, name);
    if (rc <= 0)
        return rc < 0 ? rc : NVF_GROUP_NONE;
    return strstr(out, ".{q,k,v}.") ? NVF_GROUP_QKV : NVF_GROUP_GATE_UP;
}

/* "rank-%05d-of-%05d", as convert names them (SPEC section 5, --ep N). */
int nvf_ckpt_rank_dir_parse(const char *name, int64_t *rank, int64_t *n_ranks) {
    static const char k_shape[] = "rank-#####-of-#####";
    if (strlen(name) != sizeof k_shape - 1)
        return 0;
    int64_t v[2] = {0, 0};
    int which = 0;
    for (size_t i = 0; k_shape[i]; i++) {
        if (k_shape[i] != '#') {
            if (name[i] != k_shape[i])
                return 0;
            which = i > 5;
            continue;
        }
        if (name[i] < '0' || name[i] > '9')
            return 0;
        v[which] = v[which] * 10 + (name[i] - '0');
    }
    if (v[1] < 1 || v[0] >= v[1])
        return 0;
    *rank = v[0];
    *n_ranks = v[1];
    return 1;
}

int nvf_ckpt_companion_name(char *out, size_t cap, const char *weight, nvf_companion slot, int ct) {
    static const char *const k_modelopt[] = {".weight_scale", ".weight_scale_2", ".input_scale"};
    static const char *const k_ct[] = {".weight_scale", ".weight_global_scale",
                                       ".input_global_scale"};
    if (slot < NVF_COMPANION_SCALE || slot > NVF_COMPANION_INPUT)
        return nvf_error_set(NVF_E_INVALID, "companion slot %d has no NVFP4 name", (int)slot);
    const char *last = last_component(weight);
    size_t module = last > weight ? (size_t)(last - weight) - 1 : strlen(weight);
    const char *suffix = (ct ? k_ct : k_modelopt)[slot - NVF_COMPANION_SCALE];
    if (module + strlen(suffix) + 1 > cap)
        return nvf_error_set(NVF_E_INVALID, "tensor name '%s' is too long", weight);
    memcpy(out, weight, module);
    memcpy(out + module, suffix, strlen(suffix) + 1);
    return NVF_OK;
}

int nvf_ckpt_prepared_name(char *out, size_t cap, const char *layer_prefix, nvf_prep_part part) {
    static const char *const k_parts[NVF_PREP_COUNT] = {
        "w13_weight",      "w13_weight_scale", "w13_alpha",       "w2_weight",
        "w2_weight_scale", "w2_alpha",         "w13_input_scale", "fc2_input_scale"};
    if ((int)part < 0 || part >= NVF_PREP_COUNT)
        return nvf_error_set(NVF_E_INVALID, "no prepared tensor part %d", (int)part);
    int n = snprintf(out, cap, "%s.mlp.experts.%s", layer_prefix, k_parts[part]);
    if (n < 0 || (size_t)n >= cap)
        return nvf_error_set(NVF_E_INVALID, "tensor name '%s...' is too long", layer_prefix);
    return NVF_OK;
}

int nvf_ckpt_rank_dir_name(char *out, size_t cap, int64_t rank, int64_t n_ranks) {
    int n = snprintf(out, cap, "rank-%05" PRId64 "-of-%05" PRId64, rank, n_ranks);
    if (n < 0 || (size_t)n >= cap)
        return nvf_error_set(NVF_E_INVALID, "rank directory name of rank %" PRId64 " does not fit",
                             rank);
    return NVF_OK;
}
