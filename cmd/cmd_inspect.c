/*
 * nvfp4tool inspect CKPT: the format, the files, the tensor table, the MoE structure and the
 * conversion plan of a checkpoint, as text or as one JSON object (schemas/inspect.schema.json).
 */
#include "cli.h"

#include "nvfp4/checkpoint.h"
#include "nvfp4/manifest.h"
#include "nvfp4/recipe.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cli_common g_common;
static cli_list g_include, g_exclude;
static int g_summary;

static const cli_opt k_opts[] = {
    {"include", "GLOB", CLI_LIST, &g_include,
     "tensors a conversion would quantize (default \"" NVF_CKPT_DEFAULT_SCOPE "\")"},
    {"exclude", "GLOB", CLI_LIST, &g_exclude, "tensors to leave out of the scope"},
    {"summary", NULL, CLI_FLAG, &g_summary,
     "leave out the per-tensor lines: the tensor table, and the skipped tensors (counted per\n"
     "                              reason instead; JSON: no \"tensors\", no \"plan.skip.list\")"},
};

static const cli_spec k_spec = {
    .name = "inspect",
    .usage = "CKPT [options]",
    .summary = "Detect the format, list tensors, summarize the MoE structure.",
    .details =
        "CKPT is a checkpoint directory (config.json, model.safetensors.index.json or every\n"
        "*.safetensors file) or a single .safetensors file. Every shard is validated and the\n"
        "index checked against the shards. Prints the format, the files, one line per tensor\n"
        "(name, dtype, shape, bytes, shard, role, what a conversion would do), the MoE layers\n"
        "(experts, hidden and intermediate sizes, router) and the conversion plan for the\n"
        "scope of --recipe (its scope.include/exclude), with --include/--exclude replacing the\n"
        "recipe's globs as in convert: the same plan convert follows (the tensors it would\n"
        "quantize, and those in scope it cannot, with the reason). A 3-D tensor under\n"
        "\".experts.\" that is not experts.gate_up_proj or experts.down_proj is reported as\n"
        "unknown and kept; an empty tensor (a zero dimension) is kept as it is. --summary leaves\n"
        "the per-tensor lines out. --json prints one JSON object\n"
        "(schemas/inspect.schema.json) instead.\n"
        "A CKPT that does not exist is exit 1 (it cannot be read); a malformed checkpoint\n"
        "(bad safetensors file, index and shards disagree, FP8 scale of the wrong size) is\n"
        "exit 3.\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

static void shape_str(char *buf, size_t len, const nvf_st_tensor *t) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int32_t i = 0; i < t->ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, i ? ", " : "", t->shape[i]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

static const nvf_moe_layer *first_moe_layer(const nvf_moe *m) {
    for (size_t i = 0; i < m->n_layers; i++) {
        if (m->layers[i].kind == NVF_LAYER_MOE)
            return &m->layers[i];
    }
    return NULL;
}

/* How many skipped tensors give each reason, in reason order. */
typedef struct reason_count {
    const char *reason;
    size_t n;
} reason_count;

static int cmp_reason(const void *a, const void *b) {
    return strcmp(((const reason_count *)a)->reason, ((const reason_count *)b)->reason);
}

/* @return the array (caller frees; NULL with *out_n 0 when nothing is skipped or no memory). */
static reason_count *count_reasons(const nvf_plan *p, size_t *out_n) {
    reason_count *r = p->n_skip ? malloc(p->n_skip * sizeof *r) : NULL;
    size_t n = 0, k = 0;
    *out_n = 0;
    if (!r)
        return NULL;
    for (size_t i = 0; i < p->n; i++) {
        if (p->entries[i].action == NVF_PLAN_SKIP)
            r[n++] = (reason_count){p->entries[i].reason, 1};
    }
    qsort(r, n, sizeof *r, cmp_reason);
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && strcmp(r[k - 1].reason, r[i].reason) == 0)
            r[k - 1].n++;
        else
            r[k++] = r[i];
    }
    *out_n = k;
    return r;
}

/* Text ---------------------------------------------------------------------------------------- */

static void print_int_or_dash(int64_t v, int width) {
    if (v < 0)
        printf("  %-*s", width, "-");
    else
        printf("  %-*" PRId64, width, v);
}

static void print_moe_text(const nvf_moe *m) {
    const nvf_moe_config *c = &m->config;
    printf("\nMoE: %zu MoE layer%s, %zu dense layer%s\n", m->n_moe, m->n_moe == 1 ? "" : "s",
           m->n_dense, m->n_dense == 1 ? "" : "s");
    if (m->n_moe > 0) {
        printf("  router: %s, top-k %" PRId64, nvf_router_kind_name(c->router), c->top_k);
        if (c->norm_topk_prob >= 0)
            printf(", norm_topk_prob %s", c->norm_topk_prob ? "true" : "false");
        if (c->routed_scaling_factor >= 0)
            printf(", routed_scaling_factor %g", c->routed_scaling_factor);
        if (c->n_group >= 0)
            printf(", n_group %" PRId64, c->n_group);
        if (c->topk_group >= 0)
            printf(", topk_group %" PRId64, c->topk_group);
        printf("\n");
        const nvf_moe_layer *l = first_moe_layer(m);
        printf("  experts: %" PRId64 " per layer", l->n_experts);
        if (c->n_experts_key)
            printf(" (config %s %" PRId64 ")", c->n_experts_key, c->n_experts);
        printf(", present %" PRId64 ", missing %" PRId64, m->experts_present, m->experts_missing);
        if (l->has_shared)
            printf(", shared experts yes");
        printf("\n");
        printf("  hidden %" PRId64 ", intermediate %" PRId64 ", %s", l->hidden, l->intermediate,
               l->fused ? "fused 3-D experts" : "per-expert tensors");
        if (c->hidden_act[0])
            printf(", hidden_act %s", c->hidden_act);
        if (c->first_k_dense_replace >= 0)
            printf(", first_k_dense_replace %" PRId64, c->first_k_dense_replace);
        printf("\n");
    }
    if (m->n_layers == 0)
        return;
    size_t w = strlen("LAYER");
    for (size_t i = 0; i < m->n_layers; i++) {
        size_t k = strlen(m->layers[i].prefix);
        w = k > w ? k : w;
    }
    printf("  %-*s  %-5s  %-7s  %-7s  %-6s  %-6s  %-10s  %-6s  %-4s  %-6s  %s\n", (int)w, "LAYER",
           "KIND", "EXPERTS", "PRESENT", "HIDDEN", "INTER", "LAYOUT", "ROUTER", "BIAS", "SHARED",
           "MISSING");
    for (size_t i = 0; i < m->n_layers; i++) {
        const nvf_moe_layer *l = &m->layers[i];
        int moe = l->kind == NVF_LAYER_MOE;
        printf("  %-*s  %-5s", (int)w, l->prefix, moe ? "moe" : "dense");
        print_int_or_dash(moe ? l->n_experts : -1, 7);
        print_int_or_dash(moe ? l->n_present : -1, 7);
        print_int_or_dash(l->hidden, 6);
        print_int_or_dash(l->intermediate, 6);
        printf("  %-10s  %-6s  %-4s  %-6s  ",
               !moe       ? "-"
               : l->fused ? "fused"
                          : "per-expert",
               l->has_router ? "yes" : "no", l->has_router_bias ? "yes" : "no",
               l->has_shared ? "yes" : "no");
        if (l->n_missing == 0)
            printf("-");
        for (size_t k = 0; k < l->n_missing && k < 16; k++)
            printf("%s%" PRId64, k ? "," : "", l->missing[k]);
        if (l->n_missing > 16)
            printf(",... (%zu)", l->n_missing);
        printf("\n");
    }
}

static void print_tensor_table(const nvf_ckpt *ck, const nvf_plan *p) {
    size_t wn = strlen("NAME"), ws = strlen("SHAPE"), wf = strlen("SHARD");
    char shape[160];
    for (size_t i = 0; i < ck->n_tensors; i++) {
        size_t k = strlen(ck->tensors[i].st->name);
        wn = k > wn ? k : wn;
        shape_str(shape, sizeof shape, ck->tensors[i].st);
        k = strlen(shape);
        ws = k > ws ? k : ws;
        k = strlen(ck->files[ck->tensors[i].file].name);
        wf = k > wf ? k : wf;
    }
    printf("\n  %-*s  %-11s  %-*s  %12s  %-*s  %-18s  %s\n", (int)wn, "NAME", "DTYPE", (int)ws,
           "SHAPE", "BYTES", (int)wf, "SHARD", "ROLE", "ACTION");
    for (size_t i = 0; i < ck->n_tensors; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        const nvf_plan_entry *e = &p->entries[i];
        shape_str(shape, sizeof shape, t->st);
        printf("  %-*s  %-11s  %-*s  %12" PRIu64 "  %-*s  %-18s  %s\n", (int)wn, t->st->name,
               nvf_dtype_name(t->st->dtype), (int)ws, shape, t->st->end - t->st->begin, (int)wf,
               ck->files[t->file].name, nvf_ckpt_role_name(t->role),
               nvf_plan_action_name(e->action));
    }
}

static void print_globs(const char *what, const char *const *g, size_t n) {
    printf("%s ", what);
    if (n == 0)
        printf("(none)");
    for (size_t i = 0; i < n; i++)
        printf("%s%s", i ? ", " : "", g[i]);
}

static void print_text(const nvf_ckpt *ck, const nvf_plan *p, const char *const *inc, size_t n_inc,
                       const char *const *exc, size_t n_exc, const reason_count *reasons,
                       size_t n_reasons) {
    const nvf_ckpt_quant *q = &ck->quant;
    printf("Checkpoint: %s\n", ck->path);
    printf("Format: %s", nvf_ckpt_format_name(q->format));
    if (q->source)
        printf(" (from %s", q->source);
    if (q->quant_method)
        printf("; quant_method %s", q->quant_method);
    if (q->quant_algo)
        printf(", quant_algo %s", q->quant_algo);
    if (q->block[0] > 0)
        printf(", blocks %" PRId64 "x%" PRId64, q->block[0], q->block[1]);
    if (q->scale_ue8m0)
        printf(", scale_fmt ue8m0");
    printf("%s\n", q->source ? ")" : "");
    if (q->format == NVF_CKPT_FORMAT_PREPARED) {
        printf("Prepared: target prepared-%s, layout %s, scale layout %s, precision %s\n",
               q->prep_precision, q->prep_layout, q->prep_scale_layout, q->prep_precision);
        printf("EP: rank %" PRId64 " of %" PRId64 ", experts %" PRId64 "..%" PRId64 " (%" PRId64
               ")\n",
               q->ep_rank, q->ep_size, q->expert_first, q->expert_first + q->expert_count - 1,
               q->expert_count);
    }
    inspect_print_made_with(ck);
    if (q->n_ignore > 0) {
        printf("Left in source precision:");
        for (size_t i = 0; i < q->n_ignore; i++)
            printf("%s %s", i ? "," : "", q->ignore[i]);
        printf("\n");
    }
    printf("Files: %zu", ck->n_files);
    if (ck->index_name)
        printf(" (index %s)", ck->index_name);
    printf("\n");
    for (size_t i = 0; i < ck->n_files; i++)
        printf("  %s  %" PRIu64 " bytes  %zu tensors\n", ck->files[i].name, ck->files[i].bytes,
               ck->files[i].st->n_tensors);
    printf("Tensors: %zu, %" PRIu64 " bytes\n", ck->n_tensors, ck->data_bytes);
    if (!g_summary)
        print_tensor_table(ck, p);
    print_moe_text(&ck->moe);
    printf("\nPlan: ");
    print_globs("include", inc, n_inc);
    print_globs("; exclude", exc, n_exc);
    printf("\n  quantize: %zu tensors, %" PRIu64 " bytes -> %" PRIu64 " bytes NVFP4\n",
           p->n_quantize, p->bytes_quantize, p->bytes_nvfp4);
    printf("  keep: %zu tensors, %" PRIu64 " bytes\n", p->n_keep, p->bytes_keep);
    printf("  drop: %zu source scales\n", p->n_drop);
    printf("  skip: %zu tensors in scope that cannot be quantized\n", p->n_skip);
    if (g_summary) {
        for (size_t i = 0; i < n_reasons; i++)
            printf("    %zu tensor%s: %s\n", reasons[i].n, reasons[i].n == 1 ? "" : "s",
                   reasons[i].reason);
    } else {
        for (size_t i = 0; i < p->n; i++) {
            if (p->entries[i].action == NVF_PLAN_SKIP)
                printf("    %s: %s\n", ck->tensors[i].st->name, p->entries[i].reason);
        }
    }
    if (ck->n_warnings > 0) {
        printf("\nWarnings: %zu\n", ck->n_warnings);
        for (size_t i = 0; i < ck->n_warnings; i++)
            printf("  %s\n", ck->warnings[i]);
    }
}

/* JSON ---------------------------------------------------------------------------------------- */

/* -1 (not known) becomes null. */
static cJSON *int_or_null(int64_t v) {
    return v < 0 ? cJSON_CreateNull() : cJSON_CreateNumber((double)v);
}

static cJSON *string_array(const char *const *s, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(s[i]));
    return a;
}

static cJSON *quant_json(const nvf_ckpt *ck) {
    const nvf_ckpt_quant *q = &ck->quant;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", nvf_ckpt_format_name(q->format));
    if (q->format == NVF_CKPT_FORMAT_PREPARED) {
        cJSON *pr = cJSON_AddObjectToObject(o, "prepared");
        cJSON_AddStringToObject(pr, "precision", q->prep_precision);
        cJSON_AddStringToObject(pr, "layout", q->prep_layout);
        cJSON_AddStringToObject(pr, "scale_layout", q->prep_scale_layout);
        cJSON_AddItemToObject(pr, "ep_size", int_or_null(q->ep_size));
        cJSON_AddItemToObject(pr, "ep_rank", int_or_null(q->ep_rank));
        cJSON *r = cJSON_AddArrayToObject(pr, "expert_range");
        cJSON_AddItemToArray(r, int_or_null(q->expert_first));
        cJSON_AddItemToArray(r, int_or_null(q->expert_count));
    }
    cJSON_AddItemToObject(o, "source",
                          q->source ? cJSON_CreateString(q->source) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "quant_method",
                          q->quant_method ? cJSON_CreateString(q->quant_method)
                                          : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "quant_algo",
                          q->quant_algo ? cJSON_CreateString(q->quant_algo) : cJSON_CreateNull());
    if (q->block[0] > 0) {
        cJSON *b = cJSON_CreateArray();
        cJSON_AddItemToArray(b, cJSON_CreateNumber((double)q->block[0]));
        cJSON_AddItemToArray(b, cJSON_CreateNumber((double)q->block[1]));
        cJSON_AddItemToObject(o, "block_size", b);
    } else {
        cJSON_AddNullToObject(o, "block_size");
    }
    cJSON_AddBoolToObject(o, "scale_ue8m0", q->scale_ue8m0);
    cJSON *mw = inspect_made_with(ck);
    cJSON_AddItemToObject(o, "made_with", mw ? mw : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "ignore", string_array((const char *const *)q->ignore, q->n_ignore));
    char *qc = NULL;
    if (nvf_ckpt_config_json(&qc, ck, "quantization_config") == NVF_OK)
        cJSON_AddItemToObject(o, "config", qc ? cJSON_Parse(qc) : cJSON_CreateNull());
    free(qc);
    return o;
}

static cJSON *tensors_json(const nvf_ckpt *ck, const nvf_plan *p) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < ck->n_tensors; i++) {
        const nvf_ckpt_tensor *t = &ck->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->st->name);
        cJSON_AddStringToObject(o, "dtype", nvf_dtype_name(t->st->dtype));
        cJSON *shape = cJSON_CreateArray();
        for (int32_t d = 0; d < t->st->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->st->shape[d]));
        cJSON_AddItemToObject(o, "shape", shape);
        cJSON_AddNumberToObject(o, "bytes", (double)(t->st->end - t->st->begin));
        cJSON_AddStringToObject(o, "shard", ck->files[t->file].name);
        cJSON_AddStringToObject(o, "role", nvf_ckpt_role_name(t->role));
        cJSON_AddStringToObject(o, "action", nvf_plan_action_name(p->entries[i].action));
        if (p->entries[i].reason[0])
            cJSON_AddStringToObject(o, "reason", p->entries[i].reason);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *moe_json(const nvf_moe *m) {
    const nvf_moe_config *c = &m->config;
    cJSON *o = cJSON_CreateObject();
    cJSON *cfg = cJSON_AddObjectToObject(o, "config");
    cJSON_AddStringToObject(cfg, "router", nvf_router_kind_name(c->router));
    cJSON_AddItemToObject(cfg, "n_experts", int_or_null(c->n_experts));
    cJSON_AddItemToObject(cfg, "n_experts_key",
                          c->n_experts_key ? cJSON_CreateString(c->n_experts_key)
                                           : cJSON_CreateNull());
    cJSON_AddItemToObject(cfg, "top_k", int_or_null(c->top_k));
    cJSON_AddItemToObject(cfg, "norm_topk_prob",
                          c->norm_topk_prob < 0 ? cJSON_CreateNull()
                                                : cJSON_CreateBool(c->norm_topk_prob));
    cJSON_AddItemToObject(cfg, "routed_scaling_factor",
                          c->routed_scaling_factor < 0
                              ? cJSON_CreateNull()
                              : cJSON_CreateNumber(c->routed_scaling_factor));
    cJSON_AddItemToObject(cfg, "n_group", int_or_null(c->n_group));
    cJSON_AddItemToObject(cfg, "topk_group", int_or_null(c->topk_group));
    cJSON_AddItemToObject(cfg, "first_k_dense_replace", int_or_null(c->first_k_dense_replace));
    cJSON_AddItemToObject(cfg, "hidden_size", int_or_null(c->hidden_size));
    cJSON_AddItemToObject(cfg, "moe_intermediate_size", int_or_null(c->moe_intermediate_size));
    cJSON_AddItemToObject(cfg, "intermediate_size", int_or_null(c->intermediate_size));
    cJSON_AddItemToObject(cfg, "n_shared_experts", int_or_null(c->n_shared_experts));
    cJSON_AddItemToObject(cfg, "hidden_act",
                          c->hidden_act[0] ? cJSON_CreateString(c->hidden_act)
                                           : cJSON_CreateNull());
    cJSON_AddItemToObject(cfg, "scoring_func",
                          c->scoring_func[0] ? cJSON_CreateString(c->scoring_func)
                                             : cJSON_CreateNull());
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (size_t i = 0; i < m->n_layers; i++) {
        const nvf_moe_layer *l = &m->layers[i];
        int moe = l->kind == NVF_LAYER_MOE;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "prefix", l->prefix);
        cJSON_AddNumberToObject(x, "index", (double)l->index);
        cJSON_AddStringToObject(x, "kind", moe ? "moe" : "dense");
        cJSON_AddItemToObject(x, "hidden", int_or_null(l->hidden));
        cJSON_AddItemToObject(x, "intermediate", int_or_null(l->intermediate));
        if (moe) {
            cJSON_AddStringToObject(x, "layout", l->fused ? "fused" : "per-expert");
            cJSON_AddStringToObject(x, "naming", l->w13_naming ? "w1_w3_w2" : "gate_up_down");
            cJSON_AddNumberToObject(x, "n_experts", (double)l->n_experts);
            cJSON_AddNumberToObject(x, "n_present", (double)l->n_present);
            cJSON *miss = cJSON_AddArrayToObject(x, "missing");
            for (size_t k = 0; k < l->n_missing; k++)
                cJSON_AddItemToArray(miss, cJSON_CreateNumber((double)l->missing[k]));
            cJSON_AddBoolToObject(x, "router", l->has_router);
            cJSON_AddBoolToObject(x, "router_bias", l->has_router_bias);
            cJSON_AddBoolToObject(x, "shared_experts", l->has_shared);
            cJSON_AddBoolToObject(x, "shared_expert_gate", l->has_shared_gate);
            cJSON_AddItemToObject(x, "shared_intermediate", int_or_null(l->shared_intermediate));
        }
        cJSON_AddItemToArray(layers, x);
    }
    const nvf_moe_layer *f = first_moe_layer(m);
    cJSON *s = cJSON_AddObjectToObject(o, "summary");
    cJSON_AddNumberToObject(s, "n_layers", (double)m->n_layers);
    cJSON_AddNumberToObject(s, "n_moe", (double)m->n_moe);
    cJSON_AddNumberToObject(s, "n_dense", (double)m->n_dense);
    cJSON_AddNumberToObject(s, "experts_present", (double)m->experts_present);
    cJSON_AddNumberToObject(s, "experts_missing", (double)m->experts_missing);
    cJSON_AddStringToObject(s, "router", nvf_router_kind_name(c->router));
    cJSON_AddItemToObject(s, "top_k", int_or_null(f ? c->top_k : -1));
    cJSON_AddItemToObject(s, "n_experts", int_or_null(f ? f->n_experts : -1));
    cJSON_AddItemToObject(s, "hidden", int_or_null(f ? f->hidden : -1));
    cJSON_AddItemToObject(s, "intermediate", int_or_null(f ? f->intermediate : -1));
    cJSON_AddItemToObject(s, "layout",
                          f ? cJSON_CreateString(f->fused ? "fused" : "per-expert")
                            : cJSON_CreateNull());
    return o;
}

static cJSON *plan_json(const nvf_ckpt *ck, const nvf_plan *p, const char *const *inc, size_t n_inc,
                        const char *const *exc, size_t n_exc, const reason_count *reasons,
                        size_t n_reasons) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "include", string_array(inc, n_inc));
    cJSON_AddItemToObject(o, "exclude", string_array(exc, n_exc));
    cJSON *q = cJSON_AddObjectToObject(o, "quantize");
    cJSON_AddNumberToObject(q, "tensors", (double)p->n_quantize);
    cJSON_AddNumberToObject(q, "bytes", (double)p->bytes_quantize);
    cJSON_AddNumberToObject(q, "nvfp4_bytes", (double)p->bytes_nvfp4);
    cJSON *k = cJSON_AddObjectToObject(o, "keep");
    cJSON_AddNumberToObject(k, "tensors", (double)p->n_keep);
    cJSON_AddNumberToObject(k, "bytes", (double)p->bytes_keep);
    cJSON *d = cJSON_AddObjectToObject(o, "drop");
    cJSON_AddNumberToObject(d, "tensors", (double)p->n_drop);
    cJSON *s = cJSON_AddObjectToObject(o, "skip");
    cJSON_AddNumberToObject(s, "tensors", (double)p->n_skip);
    cJSON *by = cJSON_AddArrayToObject(s, "reasons");
    for (size_t i = 0; i < n_reasons; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "reason", reasons[i].reason);
        cJSON_AddNumberToObject(e, "tensors", (double)reasons[i].n);
        cJSON_AddItemToArray(by, e);
    }
    if (g_summary)
        return o;
    cJSON *list = cJSON_AddArrayToObject(s, "list");
    for (size_t i = 0; i < p->n; i++) {
        if (p->entries[i].action != NVF_PLAN_SKIP)
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", ck->tensors[i].st->name);
        cJSON_AddStringToObject(e, "reason", p->entries[i].reason);
        cJSON_AddItemToArray(list, e);
    }
    return o;
}

static int print_json(const nvf_ckpt *ck, const nvf_plan *p, const char *const *inc, size_t n_inc,
                      const char *const *exc, size_t n_exc, const reason_count *reasons,
                      size_t n_reasons) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "tool", "nvfp4tool");
    cJSON_AddStringToObject(o, "version", nvf_version());
    cJSON_AddStringToObject(o, "path", ck->path);
    cJSON_AddStringToObject(o, "format", nvf_ckpt_format_name(ck->quant.format));
    cJSON_AddItemToObject(o, "quantization", quant_json(ck));
    cJSON_AddItemToObject(o, "index",
                          ck->index_name ? cJSON_CreateString(ck->index_name) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "index_total_size",
                          ck->index_name ? cJSON_CreateNumber((double)ck->index_total_size)
                                         : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "data_bytes", (double)ck->data_bytes);
    cJSON_AddNumberToObject(o, "n_tensors", (double)ck->n_tensors);
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    for (size_t i = 0; i < ck->n_files; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "name", ck->files[i].name);
        cJSON_AddNumberToObject(f, "bytes", (double)ck->files[i].bytes);
        cJSON_AddNumberToObject(f, "tensors", (double)ck->files[i].st->n_tensors);
        cJSON_AddItemToArray(files, f);
    }
    if (!g_summary)
        cJSON_AddItemToObject(o, "tensors", tensors_json(ck, p));
    cJSON_AddItemToObject(o, "moe", moe_json(&ck->moe));
    cJSON_AddItemToObject(o, "plan", plan_json(ck, p, inc, n_inc, exc, n_exc, reasons, n_reasons));
    cJSON_AddItemToObject(o, "warnings",
                          string_array((const char *const *)ck->warnings, ck->n_warnings));
    int rc = cli_print_json("inspect", o);
    cJSON_Delete(o);
    return rc;
}

/* The scope as convert builds it: the recipe's globs, replaced by --include / --exclude. */
static int build_recipe(nvf_recipe *r) {
    int rc = nvf_recipe_init(r);
    if (rc == NVF_OK && g_common.recipe)
        rc = nvf_recipe_load(r, g_common.recipe);
    if (rc == NVF_OK && g_include.n)
        rc = nvf_recipe_set_globs(r, 0, g_include.items, g_include.n);
    if (rc == NVF_OK && g_exclude.n)
        rc = nvf_recipe_set_globs(r, 1, g_exclude.items, g_exclude.n);
    return rc;
}

int cmd_inspect(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    nvf_ckpt *ck = NULL;
    nvf_plan *plan = NULL;
    reason_count *reasons = NULL;
    size_t n_reasons = 0;
    nvf_recipe r;
    int have_recipe = 0;
    g_summary = 0;
    int rc = cli_parse(&k_spec, argc, argv, pos, &np);
    if (rc == CLI_HELP_SHOWN) {
        rc = EXIT_OK;
        goto done;
    }
    if (rc != EXIT_OK)
        goto done;
    int handled = 0;
    rc = inspect_ranks(pos[0], g_common.json, &handled);
    if (handled)
        goto done;
    int st = build_recipe(&r);
    have_recipe = 1;
    if (st == NVF_OK)
        st = nvf_ckpt_open(&ck, pos[0]);
    if (st == NVF_OK)
        st = nvf_ckpt_plan_recipe(&plan, ck, &r);
    if (st == NVF_OK && plan->n_skip > 0 && !(reasons = count_reasons(plan, &n_reasons)))
        st = nvf_error_set(NVF_E_NOMEM, "no memory for the skip reasons");
    if (st != NVF_OK) {
        rc = cli_fail("inspect", st);
        goto done;
    }
    const char *const *inc = (const char *const *)r.include, *const *exc =
                                                                 (const char *const *)r.exclude;
    if (g_common.json) {
        rc = print_json(ck, plan, inc, r.n_include, exc, r.n_exclude, reasons, n_reasons);
    } else {
        print_text(ck, plan, inc, r.n_include, exc, r.n_exclude, reasons, n_reasons);
        rc = EXIT_OK;
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "nvfp4tool inspect: error: cannot write to stdout\n");
        rc = EXIT_RUNTIME;
    }
done:
    free(reasons);
    nvf_plan_free(plan);
    nvf_ckpt_close(ck);
    if (have_recipe)
        nvf_recipe_free(&r);
    cli_free_lists(&k_spec);
    return rc;
}
