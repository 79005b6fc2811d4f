/*
 * Fuzz target of a checkpoint's config files as lib/ckpt reads them (nvf_ckpt_open): config.json
 * (quantization_config, the MoE fields, text_config) and hf_quant_config.json. An input is
 * config.json up to its first NUL byte and hf_quant_config.json after it (no NUL: no
 * hf_quant_config.json). Both go into a per-process checkpoint directory beside a fixed shard
 * (one MoE layer of two BF16 experts and a router, one FP8-block linear), so that the format
 * detection and the MoE discovery have tensors to hold the config against.
 * Invariants: nvf_ckpt_open returns NVF_OK or an error of the input (NVF_E_FORMAT, NVF_E_SHAPE:
 * the shard's FP8 scale does not fit the config's block size, NVF_E_UNSUPPORTED, NVF_E_VERIFY)
 * or NVF_E_NOMEM, with a message and no checkpoint (never crashes or leaks); an accepted checkpoint
 * holds only values the reader promises (a known format, FP8 block sizes 1..1e9, integer config
 * fields -1 or 0..2^53, the expert count at most CKPT_MAX_EXPERTS, the tensors of the shard), and
 * its quantization_config prints as JSON that parses again. abort() otherwise.
 */
#include "nvfp4/checkpoint.h"
#include "nvfp4/status.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#define N_SHARD_TENSORS 9

static char g_dir[64];

static void remove_dir(void) {
    static const char *const names[] = {"config.json", "hf_quant_config.json", "model.safetensors"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
        unlink(path);
    }
    rmdir(g_dir);
}

static int write_file(const char *name, const void *data, size_t len) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = len ? fwrite(data, 1, len, f) : 0;
    return fclose(f) == 0 && put == len ? 0 : -1;
}

/* The fixed shard: a safetensors header written here (offsets computed from the shapes), data
 * all zero. */
static int write_shard(void) {
    static const struct {
        const char *name, *dtype;
        int rows, cols, elem;
    } t[N_SHARD_TENSORS] = {
        {"model.layers.0.mlp.experts.0.down_proj.weight", "BF16", 4, 4, 2},
        {"model.layers.0.mlp.experts.0.gate_proj.weight", "BF16", 4, 4, 2},
        {"model.layers.0.mlp.experts.0.up_proj.weight", "BF16", 4, 4, 2},
        {"model.layers.0.mlp.experts.1.down_proj.weight", "BF16", 4, 4, 2},
        {"model.layers.0.mlp.experts.1.gate_proj.weight", "BF16", 4, 4, 2},
        {"model.layers.0.mlp.experts.1.up_proj.weight", "BF16", 4, 4, 2},
        {"model.layers.0.mlp.gate.weight", "BF16", 2, 4, 2},
        {"model.layers.1.self_attn.q_proj.weight", "F8_E4M3", 4, 4, 1},
        {"model.layers.1.self_attn.q_proj.weight_scale_inv", "F32", 1, 1, 4},
    };
    char hdr[4096];
    size_t n = (size_t)snprintf(hdr, sizeof hdr, "{");
    size_t off = 0;
    for (size_t i = 0; i < N_SHARD_TENSORS; i++) {
        size_t bytes = (size_t)t[i].rows * (size_t)t[i].cols * (size_t)t[i].elem;
        n += (size_t)snprintf(hdr + n, sizeof hdr - n,
                              "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%d,%d],"
                              "\"data_offsets\":[%zu,%zu]}",
                              i ? "," : "", t[i].name, t[i].dtype, t[i].rows, t[i].cols, off,
                              off + bytes);
        off += bytes;
    }
    n += (size_t)snprintf(hdr + n, sizeof hdr - n, "}");
    size_t total = 8 + n + off;
    uint8_t *buf = calloc(1, total);
    if (!buf)
        return -1;
    for (int b = 0; b < 8; b++)
        buf[b] = (uint8_t)((uint64_t)n >> (8 * b));
    memcpy(buf + 8, hdr, n);
    int rc = write_file("model.safetensors", buf, total);
    free(buf);
    return rc;
}

static int setup(void) {
    static int done;
    if (done)
        return done > 0 ? 0 : -1;
    snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_ckpt_config.%ld", (long)getpid());
    done = -1;
    if (mkdir(g_dir, 0700) != 0)
        return -1;
    atexit(remove_dir);
    if (write_shard() != 0)
        return -1;
    done = 1;
    return 0;
}

static void check_int(int64_t v, int64_t max) {
    if (v < -1 || v > max)
        abort();
}

static void check_str(const char *s, size_t cap) {
    if (strnlen(s, cap) == cap)
        abort();
}

static void check_invariants(const nvf_ckpt *ck) {
    const nvf_ckpt_quant *q = &ck->quant;
    if ((int)q->format < NVF_CKPT_FORMAT_UNKNOWN || q->format > NVF_CKPT_FORMAT_PREPARED)
        abort();
    if (q->format == NVF_CKPT_FORMAT_FP8_BLOCK &&
        (q->block[0] < 1 || q->block[1] < 1 || q->block[0] > 1000000000 ||
         q->block[1] > 1000000000))
        abort();
    for (size_t i = 0; i < q->n_ignore; i++)
        if (!q->ignore[i])
            abort();
    check_str(q->prep_layout, sizeof q->prep_layout);
    check_str(q->prep_precision, sizeof q->prep_precision);
    check_str(q->prep_scale_layout, sizeof q->prep_scale_layout);
    const nvf_moe_config *c = &ck->moe.config;
    const int64_t max53 = (int64_t)1 << 53;
    check_int(c->n_experts, 1000000);
    if ((c->n_experts >= 0) != (c->n_experts_key != NULL))
        abort();
    const int64_t ints[] = {c->top_k,
                            c->n_group,
                            c->topk_group,
                            c->first_k_dense_replace,
                            c->hidden_size,
                            c->moe_intermediate_size,
                            c->intermediate_size,
                            c->n_shared_experts,
                            c->shared_expert_intermediate_size};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        check_int(ints[i], max53);
    if (c->norm_topk_prob < -1 || c->norm_topk_prob > 1)
        abort();
    check_str(c->hidden_act, sizeof c->hidden_act);
    check_str(c->scoring_func, sizeof c->scoring_func);
    check_str(c->topk_method, sizeof c->topk_method);
    check_str(c->model_type, sizeof c->model_type);
    if (ck->n_files != 1 || ck->n_tensors != N_SHARD_TENSORS)
        abort();
    for (size_t i = 0; i < ck->n_warnings; i++)
        if (!ck->warnings[i] || ck->warnings[i][0] == '\0')
            abort();
    char *qc = NULL;
    int rc = nvf_ckpt_config_json(&qc, ck, "quantization_config");
    if (rc == NVF_OK && qc) {
        cJSON *again = cJSON_Parse(qc);
        if (!again)
            abort();
        cJSON_Delete(again);
    } else if (rc != NVF_OK && rc != NVF_E_NOMEM) {
        abort();
    }
    free(qc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (setup() != 0)
        return 0;
    const uint8_t *nul = memchr(data, '\0', size);
    size_t cfg_len = nul ? (size_t)(nul - data) : size;
    char path[128];
    snprintf(path, sizeof path, "%s/hf_quant_config.json", g_dir);
    unlink(path);
    if (write_file("config.json", data, cfg_len) != 0 ||
        (nul && write_file("hf_quant_config.json", nul + 1, size - cfg_len - 1) != 0))
        return 0;
    nvf_ckpt *ck = NULL;
    int rc = nvf_ckpt_open(&ck, g_dir);
    if (rc == NVF_OK) {
        check_invariants(ck);
    } else if ((rc != NVF_E_FORMAT && rc != NVF_E_SHAPE && rc != NVF_E_UNSUPPORTED &&
                rc != NVF_E_VERIFY && rc != NVF_E_NOMEM) ||
               ck != NULL || nvf_error_last()[0] == '\0') {
        abort();
    }
    nvf_ckpt_close(ck);
    return 0;
}
