/*
 * The MoE block on the GPU: its state and the orchestration of a run (kernels/moe_gemm.h):
 * the tile plan, split-K and grid sizes, then the steps in order: the permutation (step 1,
 * kernels/moe_perm.cu), W4A4 input quantization, the FC1 epilogue and the finalize (steps 2, 4
 * and 6, kernels/moe_steps.cu) around the grouped GEMMs (kernels/moe_gemm.cu); routing is
 * kernels/moe_route.cu. Everything is deterministic: the
 * permutation is an ordered compaction (no atomics decide an order), split-K partials are summed
 * in split order and the finalize sums a token's slots in selection order.
 */
#include "kernels/moe_gemm.h"

#include "cuda_ctx.h"
#include "moe_perm.h"
#include "moe_steps.h"

#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- launchers --------------------------------------------------------------------------- */

struct nvf_cuda_moe {
    nvf_cuda_moe_layer L;
    int64_t max_tokens, top_k, max_tiles16;
    int sms;
    int32_t *perm_scratch, *offsets, *tile_info, *perm, *row_of;
    uint16_t *xq, *h;
    float *ws;
    /* computed W4A4 scales (L.act_scales): per permuted row FC1's and FC2's global and decode
     * scales, and the amax scratch */
    float *gs1, *dec1, *gs2, *dec2;
    uint32_t *amax;
    int64_t ws_floats;
    /* NVFP4_MOE_STAGE_EVENTS: an event before the run and after each step (nvf_cuda_moe_stage_ms)
     */
    cudaEvent_t ev[NVF_CUDA_MOE_STAGES + 1];
    int stage_events;
};

/* Record stage event i when they are on. */
static void stage_mark(nvf_cuda_moe *m, int i, cudaStream_t stream) {
    if (m->stage_events)
        (void)cudaEventRecord(m->ev[i], stream);
}

extern "C" int nvf_cuda_moe_stage_ms(nvf_cuda_moe *m, float *ms) {
    if (!m->stage_events)
        return nvf_error_set(NVF_E_INVALID, "MoE stage events are off (NVFP4_MOE_STAGE_EVENTS)");
    int rc = 0;
    NVF_CUDA_TRY(cudaEventSynchronize(m->ev[NVF_CUDA_MOE_STAGES]));
    for (int i = 0; i < NVF_CUDA_MOE_STAGES; i++)
        NVF_CUDA_TRY(cudaEventElapsedTime(&ms[i], m->ev[i], m->ev[i + 1]));
done:
    return rc;
}

#define MAX_SPLITS  16
#define SPLIT_SLOTS 1024

extern "C" void nvf_cuda_moe_free(nvf_cuda_moe *m) {
    if (!m)
        return;
    nvf_cuda_free(m->perm_scratch);
    nvf_cuda_free(m->offsets);
    nvf_cuda_free(m->tile_info);
    nvf_cuda_free(m->perm);
    nvf_cuda_free(m->row_of);
    nvf_cuda_free(m->xq);
    nvf_cuda_free(m->h);
    nvf_cuda_free(m->ws);
    nvf_cuda_free(m->gs1);
    nvf_cuda_free(m->amax);
    for (int i = 0; m->stage_events && i <= NVF_CUDA_MOE_STAGES; i++)
        cudaEventDestroy(m->ev[i]);
    free(m);
}

extern "C" int nvf_cuda_moe_create(nvf_cuda_moe **out, const nvf_cuda_moe_layer *layer,
                                   int64_t max_tokens, int64_t top_k) {
    *out = NULL;
    int64_t H = layer->hidden, I = layer->inter, E = layer->n_experts;
    if (H <= 0 || I <= 0 || E <= 0 || E >= 2048 || H % 16 || I % 16 ||
        (layer->gated && I % NVF_W13_GROUP) || top_k <= 0 || max_tokens <= 0 ||
        max_tokens * top_k >= (1 << 20) || layer->act_scales < 0 || layer->act_scales > 2 ||
        (layer->act_scales && layer->w13_input_scale))
        return nvf_error_set(NVF_E_INVALID,
                             "MoE kernels: hidden %" PRId64 ", intermediate %" PRId64 ", %" PRId64
                             " experts, top-%" PRId64 ", %" PRId64
                             " tokens, activation scales %d is not a shape they take (H and I "
                             "multiples of 16, I of 64 when gated, fewer than 2048 experts and "
                             "2^20 slots; activation scales 0 to 2, computed ones without input "
                             "scales)",
                             H, I, E, top_k, max_tokens, (int)layer->act_scales);
    nvf_cuda_moe *m = (nvf_cuda_moe *)calloc(1, sizeof *m);
    if (!m)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the MoE state");
    m->L = *layer;
    m->max_tokens = max_tokens;
    m->top_k = top_k;
    int64_t slots = max_tokens * top_k, n1 = layer->gated ? 2 * I : I;
    m->max_tiles16 = (slots + 15) / 16 + E;
    int64_t wide = n1 > H ? n1 : H;
    /* the workspace holds max(slots, MAX_SPLITS * min(slots, SPLIT_SLOTS)) rows: up to
     * MAX_SPLITS splits below SPLIT_SLOTS slots, beyond as many as fit (splits_for) */
    int64_t split_rows = MAX_SPLITS * (slots < SPLIT_SLOTS ? slots : SPLIT_SLOTS);
    m->ws_floats = (slots > split_rows ? slots : split_rows) * wide;
    int rc = 0, dev = 0;
    NVF_CUDA_TRY(cudaGetDevice(&dev));
    NVF_CUDA_TRY(cudaDeviceGetAttribute(&m->sms, cudaDevAttrMultiProcessorCount, dev));
    if ((rc = nvf_cuda_alloc((void **)&m->perm_scratch, (size_t)moe_perm_scratch(slots, E) * 4,
                             "MoE permutation counts")) ||
        (rc = nvf_cuda_alloc((void **)&m->offsets, (size_t)(E + 1) * 4, "MoE offsets")) ||
        (rc = nvf_cuda_alloc((void **)&m->tile_info, (size_t)m->max_tiles16 * 4, "MoE tiles")) ||
        (rc = nvf_cuda_alloc((void **)&m->perm, (size_t)slots * 4, "MoE permutation")) ||
        (rc = nvf_cuda_alloc((void **)&m->row_of, (size_t)slots * 4, "MoE rows")) ||
        (rc = nvf_cuda_alloc((void **)&m->h, (size_t)(slots * I) * 2, "MoE FC1 output")) ||
        (rc = nvf_cuda_alloc((void **)&m->ws, (size_t)m->ws_floats * 4, "MoE workspace")))
        goto done;
    if ((layer->w13_input_scale || layer->act_scales) &&
        (rc = nvf_cuda_alloc((void **)&m->xq, (size_t)(slots * H) * 2, "MoE FC1 input")))
        goto done;
    if (layer->act_scales) {
        int64_t words = max_tokens > slots ? max_tokens : slots;
        words = words > E ? words : E;
        if ((rc = nvf_cuda_alloc((void **)&m->gs1, (size_t)(4 * slots) * 4,
                                 "MoE activation scales")) ||
            (rc = nvf_cuda_alloc((void **)&m->amax, (size_t)words * 4, "MoE activation amax")))
            goto done;
        m->dec1 = m->gs1 + slots;
        m->gs2 = m->gs1 + 2 * slots;
        m->dec2 = m->gs1 + 3 * slots;
    }
    if (rc == 0 && getenv("NVFP4_MOE_STAGE_EVENTS")) {
        for (int i = 0; i <= NVF_CUDA_MOE_STAGES; i++)
            NVF_CUDA_TRY(cudaEventCreate(&m->ev[i]));
        m->stage_events = 1;
    }
done:
    if (rc != 0)
        nvf_cuda_moe_free(m);
    else
        *out = m;
    return rc;
}

/* Rows per expert (on average) from which tiles of `rows` rows are used: 64-row tiles from 32
 * (bench moe at e6cdf1b: at 32 rows 64-row tiles beat 16-row ones by 1.16x on DeepSeek-V3, at 16
 * rows they lose), 32-row tiles from 16 (DeepSeek-V3 with balanced routing on the H200, kernel
 * v6: at 8 rows per expert, 256 tokens, 16-row tiles take 0.554 ms and 32-row ones 0.59-0.61; at
 * 16 rows, 512 tokens, 32-row tiles 0.62 and 16-row ones 0.85; bench/results/gemm-h200-v6/c3-cap).
 * With the warpgroup-MMA kernel (tall 128), 64-row tiles from 24 and 128-row ones from 48: at
 * 2048 tokens 0.77 ms against 0.99 with 128-row tiles from 96 (bench/results/wg-h200-v7/).
 * Where the 32-row register kernel (v12) takes both GEMMs (reg32), 64-row tiles from 40: at 32
 * rows per expert its 32-row tiles beat the wgmma kernel's 64-row ones (Qwen3-30B-A3B at 512
 * tokens 0.342 ms against 0.377, DeepSeek-V3 at 1024 0.639-0.642 against 0.653; stop 28's call
 * 2, bench/results/final-h200-afc547e/ab.txt; 40 and 48 alike there).
 * NVFP4_MOE_TILE{32,64,128}_ROWS change them (for `bench moe` sweeps). Read once. */
static int64_t tile_rows_from(int32_t rows, int32_t tall, int reg32) {
    static int64_t v128 = -1, v64 = -1, v32 = -1;
    if (v64 < 0) {
        const char *e64 = getenv("NVFP4_MOE_TILE64_ROWS"), *e32 = getenv("NVFP4_MOE_TILE32_ROWS");
        const char *e128 = getenv("NVFP4_MOE_TILE128_ROWS");
        long long x64 = e64 ? atoll(e64) : 0, x32 = e32 ? atoll(e32) : 0;
        long long x128 = e128 ? atoll(e128) : 0;
        v32 = x32 > 0 ? (int64_t)x32 : 16;
        v64 = x64 > 0 ? (int64_t)x64 : 0;
        v128 = x128 > 0 ? (int64_t)x128 : 48;
    }
    return rows == 128 ? v128 : rows == 64 ? (v64 ? v64 : reg32 ? 40 : tall == 128 ? 24 : 32) : v32;
}

/* The expected number of tiles of `rows` rows for `local` slots spread at random over E experts:
 * E x the sum over j of P(X > j rows), X ~ Poisson(local / E) the rows of one expert; *sd, the
 * standard deviation of that number (the experts taken as independent: E x Var ceil(X / rows),
 * with E[ceil(X / rows)^2] the sum over j of (2j + 1) P(X > j rows)). */
static int64_t expected_tiles(int64_t local, int64_t E, int32_t rows, double *sd) {
    double lam = (double)local / (double)E, p = exp(-lam), cdf = 0.0, tiles = 0.0, sq = 0.0;
    if (lam > 500.0) { /* exp underflows long before; ceil(X / rows) is X / rows + 1/2 there */
        tiles = lam / rows + 0.5;
        sq = tiles * tiles + lam / ((double)rows * rows) + 1.0 / 12.0;
    } else {
        int64_t top = (int64_t)(lam + 12.0 * sqrt(lam) + 24.0);
        for (int64_t x = 0; x <= top; x++) {
            cdf += p; /* P(X <= x) */
            if (x % rows == 0) {
                /* ceil(X / rows) = the number of j >= 0 with X > j rows */
                tiles += 1.0 - cdf;
                sq += (double)(2 * (x / rows) + 1) * (1.0 - cdf);
            }
            p = p * lam / (double)(x + 1);
        }
    }
    double var = sq - tiles * tiles;
    *sd = sqrt((var > 0.0 ? var : 0.0) * (double)E);
    int64_t t = (int64_t)ceil(tiles * (double)E);
    return t > 0 ? t : 1;
}

/* The K chunks a CTA's fixed work is worth in splits_for's estimate (the tables, the tile's
 * pointers, the partials the epilogue and finalize read back per split). */
#define SPLIT_CTA_CHUNKS 2

/* K splits for a GEMM of n weight rows and k values, a function of the token count only (so
 * runs are repeatable). With fewer CTAs than four per SM, enough splits for that (at most
 * SPLIT_SLOTS slots). With 16-row tiles (or v12's 32-row register kernel, step 2) and more
 * CTAs than the SMs hold at once, they run in
 * waves, and a grid that is not a whole number of them leaves SMs idle in the last: there the
 * splits (up to what the workspace holds) that minimize waves x (chunks per CTA +
 * SPLIT_CTA_CHUNKS), if 5% below unsplit. On the H200 (bench moe, DeepSeek-V3 balanced routing;
 * bench/results/gemm-h200-v6/c7-waves/ and final-h200-11f66b6/) 32 and 64 tokens took 0.365 and
 * 0.455 ms with the first rule only, 0.341 and 0.426 with this one (FC1's 645 CTAs, 1.2 waves of
 * 528, in 3 splits). Without the CTA term the rule also split 32- and 64-row tiles and short K
 * loops, which lost up to 30% (GPT-OSS-120B at 1024 tokens). NVFP4_MOE_SPLITS=fill keeps the
 * first rule only (for sweeps). The K chunks (64 values) are dealt in ranges of *cps; the return
 * value is the number of ranges, which is what the GEMM launches and the epilogue sums. */
static int splits_for(int *cps, const nvf_cuda_moe *m, int64_t slots, int64_t tiles_est, int64_t n,
                      int64_t k, int32_t tile_rows) {
    static int fill_only = -1;
    if (fill_only < 0) {
        const char *env = getenv("NVFP4_MOE_SPLITS");
        fill_only = env && strcmp(env, "fill") == 0;
    }
    int step = nvf_cuda_moe_gemm_step(k, tile_rows), bn = nvf_cuda_moe_gemm_cta_rows(k, tile_rows);
    int64_t nchunks = (k + 63) / 64, s = 1;
    int64_t ctas = tiles_est * ((n + bn - 1) / bn), want = 4 * (int64_t)m->sms;
    int64_t hold = (int64_t)nvf_cuda_moe_gemm_ctas_per_sm(k, tile_rows) * m->sms;
    int64_t cap = nchunks / 4 > 0 ? nchunks / 4 : 1;
    cap = cap > MAX_SPLITS ? MAX_SPLITS : cap;
    if (ctas < want) {
        if (slots <= SPLIT_SLOTS) {
            s = (want + ctas - 1) / ctas;
            s = s > cap ? cap : s;
        }
    } else if (!fill_only && (tile_rows == 16 || step == 2) && ctas >= hold) {
        int64_t room = m->ws_floats / (slots * n); /* splits the workspace holds */
        cap = cap > room ? room : cap;
        double best = 0;
        for (int64_t x = 1; x <= cap; x++) {
            int64_t per = ((nchunks + x - 1) / x + step - 1) / step * step;
            int64_t ranges = (nchunks + per - 1) / per;
            double cost =
                (double)((ctas * ranges + hold - 1) / hold) * (double)(per + SPLIT_CTA_CHUNKS);
            if (x == 1 || cost < 0.95 * best) {
                best = cost;
                s = x;
            }
        }
    }
    *cps = (int)((nchunks + s - 1) / s);
    *cps = (*cps + step - 1) / step * step; /* ranges start on the GEMM's K step */
    return (int)((nchunks + *cps - 1) / *cps);
}

extern "C" int nvf_cuda_moe_run(nvf_cuda_moe *m, float *y, const uint16_t *x, int64_t t,
                                const int32_t *ids, const float *weights, int64_t expert0,
                                const nvf_cuda_moe_act *act, const nvf_quant_params *q,
                                struct CUstream_st *stream) {
    int rc = 0;
    const nvf_cuda_moe_layer *L = &m->L;
    int64_t E = L->n_experts, H = L->hidden, I = L->inter, k = m->top_k, slots = t * k;
    int64_t n1 = L->gated ? 2 * I : I;
    nvf_quant_params qp = q ? *q : nvf_quant_params{};
    if (t <= 0 || t > m->max_tokens)
        return nvf_error_set(NVF_E_INVALID,
                             "MoE run of %" PRId64 " tokens: the state takes 1..%" PRId64, t,
                             m->max_tokens);
    {
        /* 16-row tiles while experts get few rows each (the weight stream bounds the time);
         * 32-row tiles from tile_rows_from(32) rows per expert, so that an expert's rows fit
         * one tile and its weights are read once (with 16-row tiles at 16 rows on average,
         * about half the experts need a second tile: ncu at 00142a7, DeepSeek-V3 512 tokens);
         * 64- and 128-row tiles beyond, where a kernel takes them (nvf_cuda_moe_gemm_tall). */
        int64_t et = L->n_experts_total > E ? L->n_experts_total : E;
        int64_t local = slots * E / et > 0 ? slots * E / et : 1; /* expected local rows */
        int32_t tile_rows = 16, tall_h = nvf_cuda_moe_gemm_tall(H),
                tall_i = nvf_cuda_moe_gemm_tall(I);
        int32_t tall = tall_h < tall_i ? tall_h : tall_i;
        int reg32 = nvf_cuda_moe_gemm_step(H, 32) == 2 && nvf_cuda_moe_gemm_step(I, 32) == 2;
        for (int32_t rows = tall; rows >= 32 && tile_rows == 16; rows /= 2)
            if (local / E >= tile_rows_from(rows, tall, reg32))
                tile_rows = rows;
        /* an expert with c > 0 rows has ceil(c / R) <= c / R + (R - 1) / R tiles, and at most
         * min(E, slots) experts have rows */
        int32_t max_tiles =
            (int32_t)((slots + tile_rows - 1) / tile_rows + (E < slots ? E : slots));
        double tiles_sd;
        int64_t tiles_est = expected_tiles(local, E, tile_rows, &tiles_sd);
        int cps1, cps2;
        int s1 = splits_for(&cps1, m, slots, tiles_est, n1, H, tile_rows);
        int s2 = splits_for(&cps2, m, slots, tiles_est, H, I, tile_rows);
        int64_t stride1 = slots * n1, stride2 = slots * H;
        /* the GEMM grid spans the expected tiles with a margin (a CTA takes a further tile
         * where the routing needs more): CTAs that would only find an unused tile cost a
         * launch slot each (at 4096 tokens the map's worst case is 7x the usual count). The
         * margin: a quarter, plus four standard deviations of the tile count and 2, at most E
         * (E alone until stop 28, when at 1 token DeepSeek-V3's FC1 launched 14,784 CTAs, 448
         * of them with a tile) */
        int64_t sd_margin = (int64_t)ceil(4.0 * tiles_sd) + 2;
        int64_t grid_tiles = tiles_est + tiles_est / 4 + (sd_margin < E ? sd_margin : E);
        nvf_cuda_moe_plan plan = {m->offsets,
                                  m->tile_info,
                                  m->perm,
                                  max_tiles,
                                  tile_rows,
                                  (int32_t)k,
                                  grid_tiles < max_tiles ? (int32_t)grid_tiles : max_tiles};
        int w4a4 = L->w13_input_scale || L->act_scales, per_row = L->act_scales == 2;
        const uint16_t *a1 = w4a4 ? m->xq : x;

        stage_mark(m, 0, stream);
        if ((rc = moe_perm_launch(m->offsets, m->perm, m->row_of, m->tile_info, m->perm_scratch,
                                  ids, slots, expert0, E, tile_rows, max_tiles, stream)))
            goto done;
        stage_mark(m, 1, stream);
        /* computed W4A4 scales: each row's FC1 global scale from the amax of its token's x row
         * or of all of x first */
        if (L->act_scales &&
            (rc = moe_act_scales(m->gs1, m->dec1, m->amax, x, t, H, per_row, m->perm, k, m->offsets,
                                 E, qp, slots, m->sms, stream)))
            goto done;
        if (w4a4) {
            if ((rc = moe_gather_quant(m->xq, x, m->perm, m->offsets, E, k, H, L->w13_input_scale,
                                       L->act_scales ? m->gs1 : NULL, qp, slots, local, m->sms,
                                       stream)))
                goto done;
        }
        stage_mark(m, 2, stream);
        /* W4A16 FC1 in one K range on the wgmma kernel: the activation fused into its store
         * (the same bytes as the epilogue's); else the f32 sums and the FC1 epilogue */
        int fused = !w4a4 && L->gated && s1 == 1 && nvf_cuda_moe_gemm_wg_fc1_ok(H, tile_rows);
        if (fused)
            rc = nvf_cuda_moe_gemm_wg_fc1(m->h, I, L->w13_alpha, act, a1, 1, L->w13, L->w13_sf, H,
                                          &plan, stream);
        else
            rc = nvf_cuda_moe_gemm(m->ws, stride1, a1, w4a4 ? 0 : 1, L->w13, L->w13_sf, n1, H, cps1,
                                   &plan, stream);
        if (rc)
            goto done;
        stage_mark(m, 3, stream);
        /* computed scales: the epilogue's BF16 rows first, then their amax (of each row or each
         * expert's rows) gives FC2's global scales, and the rows are quantized in place */
        if (!fused && (rc = moe_fc1_epilogue(m->h, m->ws, stride1, s1, m->offsets, E, I, L->gated,
                                             L->w13_alpha, L->act_scales ? m->dec1 : NULL, act,
                                             L->fc2_input_scale, qp, slots, local, m->sms, stream)))
            goto done;
        if (L->act_scales &&
            ((rc = moe_act_scales(m->gs2, m->dec2, m->amax, m->h, 0, I, per_row, NULL, k,
                                  m->offsets, E, qp, slots, m->sms, stream)) ||
             (rc = moe_quant_rows(m->h, m->offsets, E, I, m->gs2, qp, slots, local, m->sms,
                                  stream))))
            goto done;
        stage_mark(m, 4, stream);
        rc = nvf_cuda_moe_gemm(m->ws, stride2, m->h, 0, L->w2, L->w2_sf, H, I, cps2, &plan, stream);
        if (rc)
            goto done;
        stage_mark(m, 5, stream);
        if ((rc = moe_finalize(y, m->ws, stride2, s2, m->row_of, ids, weights, t, k, H, expert0,
                               L->w2_alpha, L->act_scales ? m->dec2 : NULL, m->sms, stream)))
            goto done;
        stage_mark(m, 6, stream);
    }
done:
    return rc;
}
