/*
 * The host side of the CUDA quantizer (quant_pipeline.h): the chunked path, which stages any
 * tensor through pinned buffers on two streams, and the device-resident group path, which
 * uploads a linear group's members once and runs amax, global scale and quantization on the
 * device. Kernels and launchers: quant.cu, dequant.cu (quant_launch.h); the context: cuda_ctx.h.
 */
#include "kernels/quant_pipeline.h"

#include "cuda_ctx.h"
#include "quant_launch.h"

#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/quant_block.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define N_SLOTS       NVF_CUDA_STREAMS
#define CHUNK_DEFAULT ((size_t)64 << 20)
#define ALIGN         256

enum { MODE_AMAX = 0, MODE_QUANT = 1, MODE_DEQUANT = 2 };

/* One staging slot: a stream and the staging buffers of one chunk. */
struct slot {
    cudaStream_t stream;
    nvf_cuda_stage in, out, scale;
};

struct nvf_cuda_quant {
    nvf_cuda_ctx *ctx;
    slot slots[N_SLOTS];
    unsigned int *d_amax;
    unsigned long long *d_bad; /* bad_cap entries: one per group member */
    size_t bad_cap;
    int cfg;            /* forced launch configuration, -1: defaults */
    size_t chunk;       /* forced chunk bytes, 0: CHUNK_DEFAULT */
    size_t budget_free; /* a quarter of the free device memory at open */
    void *arena;        /* the device-resident group's buffers */
    size_t arena_cap;
    float *h_scales; /* pinned f32 scales of a whole group */
    size_t h_scales_cap;
};

static size_t g_group_budget; /* nvf_cuda_quant_set_group_budget; 0: default */

static int64_t ceil_div64(int64_t a, int64_t b) {
    return a / b + (a % b != 0);
}

static size_t align_up(size_t n) {
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

static size_t dtype_size(nvf_dtype d) {
    return d == NVF_DTYPE_F32 ? 4 : (d == NVF_DTYPE_BF16 || d == NVF_DTYPE_F16) ? 2 : 1;
}

/* The message of a NaN/Inf at linear index `bad` of `s`: the value as the CPU row loader gives
 * it, so that CPU and GPU report the same text. */
static int nonfinite_error(const nvf_quant_source *s, const char *name, unsigned long long bad) {
    int64_t row = (int64_t)(bad / (unsigned long long)s->cols);
    int64_t col = (int64_t)(bad % (unsigned long long)s->cols);
    float v = nvf_quant_source_value(s, row, col);
    return nvf_error_set(NVF_E_NONFINITE,
                         "tensor '%s': non-finite value %g at index [%lld, %lld] (use "
                         "--allow-nonfinite to pass such values through)",
                         name, (double)v, (long long)row, (long long)col);
}

/* ---- state ------------------------------------------------------------------------------- */

static int bad_reserve(nvf_cuda_quant *q, size_t n) {
    if (n <= q->bad_cap)
        return 0;
    nvf_cuda_free(q->d_bad);
    q->d_bad = NULL;
    q->bad_cap = 0;
    int rc = nvf_cuda_alloc((void **)&q->d_bad, n * sizeof *q->d_bad, "NaN/Inf positions");
    if (rc == 0)
        q->bad_cap = n;
    return rc;
}

extern "C" int nvf_cuda_quant_open(nvf_cuda_quant **out, int device) {
    *out = NULL;
    nvf_cuda_quant *q = (nvf_cuda_quant *)calloc(1, sizeof *q);
    if (!q)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the CUDA quantizer of cuda:%d", device);
    q->cfg = -1;
    int rc = nvf_cuda_ctx_create(&q->ctx, device);
    if (rc == 0)
        rc = nvf_cuda_alloc((void **)&q->d_amax, sizeof *q->d_amax, "amax");
    if (rc == 0)
        rc = bad_reserve(q, 1);
    size_t free_b = 0;
    if (rc == 0)
        rc = nvf_cuda_mem_free(&free_b);
    if (rc < 0) {
        nvf_cuda_quant_close(q);
        return rc;
    }
    q->budget_free = free_b / 4;
    for (int i = 0; i < N_SLOTS; i++)
        q->slots[i].stream = q->ctx->streams[i];
    *out = q;
    return 0;
}

extern "C" int nvf_cuda_quant_host_alloc(nvf_cuda_quant *q, void **out, size_t bytes) {
    *out = NULL;
    int rc = nvf_cuda_ctx_activate(q->ctx);
    return rc < 0 ? rc : nvf_cuda_host_alloc(out, bytes, "a host buffer");
}

extern "C" void nvf_cuda_quant_host_free(nvf_cuda_quant *q, void *p) {
    (void)nvf_cuda_ctx_activate(q->ctx); /* freed whichever device is current otherwise */
    nvf_cuda_host_free(p);
}

extern "C" void nvf_cuda_quant_close(nvf_cuda_quant *q) {
    if (!q)
        return;
    if (q->ctx && nvf_cuda_ctx_activate(q->ctx) == 0) {
        for (int i = 0; i < N_SLOTS; i++) {
            nvf_cuda_stage_release(&q->slots[i].in);
            nvf_cuda_stage_release(&q->slots[i].out);
            nvf_cuda_stage_release(&q->slots[i].scale);
        }
        nvf_cuda_free(q->d_amax);
        nvf_cuda_free(q->d_bad);
        nvf_cuda_free(q->arena);
        nvf_cuda_host_free(q->h_scales);
    }
    nvf_cuda_ctx_free(q->ctx);
    free(q);
}

extern "C" struct nvf_cuda_ctx *nvf_cuda_quant_ctx(nvf_cuda_quant *q) {
    return q->ctx;
}

extern "C" int nvf_cuda_quant_cfg(const nvf_cuda_quant *q) {
    return q->cfg;
}

extern "C" int nvf_cuda_quant_config_count(void) {
    return quant_cfg_count();
}

extern "C" int nvf_cuda_quant_set_config(nvf_cuda_quant *q, int config, size_t chunk_bytes) {
    if (config < -1 || config >= quant_cfg_count())
        return nvf_error_set(NVF_E_INVALID, "launch configuration %d out of range (0..%d)", config,
                             quant_cfg_count() - 1);
    q->cfg = config;
    q->chunk = chunk_bytes;
    return 0;
}

extern "C" void nvf_cuda_quant_set_group_budget(size_t bytes) {
    g_group_budget = bytes;
}

/* The group budget now: the hook's, else NVFP4_CUDA_GROUP_BUDGET (bytes), else a quarter of the
 * free memory at open. */
static size_t group_budget(const nvf_cuda_quant *q) {
    if (g_group_budget)
        return g_group_budget;
    const char *env = getenv("NVFP4_CUDA_GROUP_BUDGET");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        if (errno == 0 && *end == '\0' && env[0] != '-')
            return (size_t)v;
        nvf_log(NVF_LOG_WARN, "NVFP4_CUDA_GROUP_BUDGET='%s' is not a byte count; ignored", env);
    }
    return q->budget_free;
}

/* ---- the chunked path -------------------------------------------------------------------- */

/* One chunk: rows [r0, r1) when whole rows fit, else columns [c0, c1) of row r0. */
struct chunk {
    int64_t r0, r1, c0, c1;
};

static int64_t chunk_count(const nvf_quant_source *s, size_t cap, int64_t *rows_per,
                           int64_t *cols_per) {
    size_t row_bytes = (size_t)s->cols * dtype_size(s->dtype);
    if (row_bytes <= cap) {
        *rows_per = (int64_t)(cap / row_bytes);
        *cols_per = s->cols;
        return ceil_div64(s->rows, *rows_per);
    }
    *rows_per = 1;
    *cols_per = (int64_t)(cap / dtype_size(s->dtype)) / NVF_BLOCK * NVF_BLOCK;
    if (*cols_per < NVF_BLOCK)
        *cols_per = NVF_BLOCK;
    return s->rows * ceil_div64(s->cols, *cols_per);
}

static chunk chunk_at(const nvf_quant_source *s, int64_t i, int64_t rows_per, int64_t cols_per) {
    chunk c;
    if (cols_per == s->cols) {
        c.r0 = i * rows_per;
        c.r1 = c.r0 + rows_per < s->rows ? c.r0 + rows_per : s->rows;
        c.c0 = 0;
        c.c1 = s->cols;
    } else {
        int64_t per_row = ceil_div64(s->cols, cols_per);
        c.r0 = i / per_row;
        c.r1 = c.r0 + 1;
        c.c0 = (i % per_row) * cols_per;
        c.c1 = c.c0 + cols_per < s->cols ? c.c0 + cols_per : s->cols;
    }
    return c;
}

static size_t out_bytes_of(int mode, int64_t n) {
    if (mode == MODE_QUANT)
        return (size_t)n / 2 + (size_t)n / 16;
    return mode == MODE_DEQUANT ? (size_t)n * 2 : 0;
}

/* Stage chunk `c` of `s` into slot `sl` (host copy, scale conversion) and queue its upload,
 * kernel and (quantize, dequantize) download. `flag`: allow_nonfinite (amax) or check_finite
 * (dequantize). */
static int chunk_launch(nvf_cuda_quant *q, slot *sl, const nvf_quant_source *s, const chunk &c,
                        int mode, const nvf_quant_params *p, float gs, int flag) {
    size_t es = dtype_size(s->dtype);
    int64_t w = c.c1 - c.c0, n = (c.r1 - c.r0) * w;
    size_t in_bytes = (size_t)n * es, out_bytes = out_bytes_of(mode, n);
    int64_t ncb = 0, sr0 = 0, sr1 = 0;
    if (s->scale) {
        ncb = ceil_div64(s->cols, s->block_cols);
        sr0 = c.r0 / s->block_rows;
        sr1 = (c.r1 - 1) / s->block_rows + 1;
    }
    size_t scale_n = (size_t)((sr1 - sr0) * ncb);
    int rc = nvf_cuda_stage_reserve(&sl->in, in_bytes, "a staged chunk");
    if (rc == 0)
        rc = nvf_cuda_stage_reserve(&sl->out, out_bytes, "a chunk's output");
    if (rc == 0)
        rc = nvf_cuda_stage_reserve(&sl->scale, scale_n * sizeof(float), "a chunk's scales");
    if (rc < 0)
        return rc;
    const uint8_t *src =
        (const uint8_t *)s->data + ((uint64_t)c.r0 * (uint64_t)s->cols + (uint64_t)c.c0) * es;
    memcpy(sl->in.host, src, in_bytes);
    float *h_scale = (float *)sl->scale.host;
    for (size_t i = 0; i < scale_n; i++)
        h_scale[i] = nvf_quant_source_scale(s, (uint64_t)sr0 * (uint64_t)ncb + i);
    quant_job j;
    memset(&j, 0, sizeof j);
    j.src = (const uint8_t *)sl->in.dev;
    j.nblocks = n / NVF_BLOCK;
    j.w = w;
    j.row0 = c.r0;
    j.col0 = c.c0;
    j.cols = s->cols;
    j.scale = (const float *)sl->scale.dev;
    j.srow0 = sr0;
    j.ncb = ncb;
    j.amax = q->d_amax;
    j.bad = q->d_bad;
    j.allow_nonfinite = flag;
    const launch_cfg &cfg = quant_cfg_for(s, q->cfg);
    uint8_t *d_out = (uint8_t *)sl->out.dev;
    rc = nvf_cuda_upload(sl->in.dev, sl->in.host, in_bytes, sl->stream);
    if (rc == 0)
        rc = nvf_cuda_upload(sl->scale.dev, sl->scale.host, scale_n * sizeof(float), sl->stream);
    if (rc < 0)
        return rc;
    if (mode == MODE_QUANT)
        quant_launch_quant(j, s, d_out, d_out + n / 2, gs, NULL, p, cfg, q->ctx->sms, sl->stream);
    else if (mode == MODE_DEQUANT)
        quant_launch_dequant(j, s, (uint16_t *)d_out, flag, q->ctx->sms, sl->stream);
    else
        quant_launch_amax(j, s, cfg, q->ctx->sms, sl->stream);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return nvf_cuda_error(e, "kernel launch", __FILE__, __LINE__);
    return nvf_cuda_download(sl->out.host, sl->out.dev, out_bytes, sl->stream);
}

/* Copy a finished chunk's output from its slot to the caller's arrays. */
static void chunk_finish(const slot *sl, const nvf_quant_source *s, const chunk &c, int mode,
                         uint8_t *out_a, uint8_t *out_b) {
    int64_t w = c.c1 - c.c0, n = (c.r1 - c.r0) * w;
    uint64_t first = (uint64_t)c.r0 * (uint64_t)s->cols + (uint64_t)c.c0;
    const uint8_t *h = (const uint8_t *)sl->out.host;
    if (mode == MODE_DEQUANT) {
        memcpy(out_a + first * 2, h, (size_t)n * 2);
    } else if (mode == MODE_QUANT) {
        memcpy(out_a + first / 2, h, (size_t)n / 2);
        memcpy(out_b + first / NVF_BLOCK, h + n / 2, (size_t)n / NVF_BLOCK);
    }
}

/* Run every chunk of `s` through the slots, two in flight. */
static int run_chunks(nvf_cuda_quant *q, const nvf_quant_source *s, int mode, uint8_t *out_a,
                      uint8_t *out_b, const nvf_quant_params *p, float gs, int flag) {
    int rc = 0;
    int64_t rows_per = 0, cols_per = 0;
    size_t cap = q->chunk ? q->chunk : CHUNK_DEFAULT;
    int64_t n = s->rows > 0 ? chunk_count(s, cap, &rows_per, &cols_per) : 0;
    int64_t pending[N_SLOTS];
    for (int j = 0; j < N_SLOTS; j++)
        pending[j] = -1;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        slot *sl = &q->slots[i % N_SLOTS];
        int64_t *pend = &pending[i % N_SLOTS];
        if (*pend >= 0) {
            rc = nvf_cuda_sync(sl->stream);
            if (rc < 0)
                break;
            chunk_finish(sl, s, chunk_at(s, *pend, rows_per, cols_per), mode, out_a, out_b);
            *pend = -1;
        }
        rc = chunk_launch(q, sl, s, chunk_at(s, i, rows_per, cols_per), mode, p, gs, flag);
        if (rc == 0)
            *pend = i;
    }
    for (int j = 0; j < N_SLOTS; j++) {
        slot *sl = &q->slots[j];
        int e = nvf_cuda_sync(sl->stream);
        if (rc == 0)
            rc = e;
        if (rc == 0 && pending[j] >= 0)
            chunk_finish(sl, s, chunk_at(s, pending[j], rows_per, cols_per), mode, out_a, out_b);
    }
    return rc;
}

/* Reset the amax accumulator and the first `n` NaN/Inf positions on stream `st`. */
static int reset_amax(nvf_cuda_quant *q, size_t n, cudaStream_t st) {
    int rc = bad_reserve(q, n);
    if (rc < 0)
        return rc;
    NVF_CUDA_TRY(cudaMemsetAsync(q->d_amax, 0, sizeof *q->d_amax, st));
    NVF_CUDA_TRY(cudaMemsetAsync(q->d_bad, 0xFF, n * sizeof *q->d_bad, st));
done:
    return rc;
}

extern "C" int nvf_cuda_quant_amax(nvf_cuda_quant *q, float *out, const nvf_quant_source *s,
                                   int allow_nonfinite, const char *name) {
    unsigned int amax = 0;
    unsigned long long bad = ~0ull;
    cudaStream_t s0 = q->slots[0].stream;
    int rc = nvf_cuda_ctx_activate(q->ctx);
    if (rc == 0)
        rc = reset_amax(q, 1, s0);
    if (rc == 0)
        rc = nvf_cuda_sync(s0);
    if (rc == 0)
        rc = run_chunks(q, s, MODE_AMAX, NULL, NULL, NULL, 0.0f, allow_nonfinite);
    if (rc < 0)
        return rc;
    NVF_CUDA_TRY(cudaMemcpy(&amax, q->d_amax, sizeof amax, cudaMemcpyDeviceToHost));
    NVF_CUDA_TRY(cudaMemcpy(&bad, q->d_bad, sizeof bad, cudaMemcpyDeviceToHost));
    if (bad != ~0ull)
        return nonfinite_error(s, name, bad);
    *out = nvf_f32_from_bits(amax);
done:
    return rc;
}

extern "C" int nvf_cuda_quant_source(nvf_cuda_quant *q, uint8_t *packed, uint8_t *scales,
                                     const nvf_quant_source *s, float gs,
                                     const nvf_quant_params *p) {
    int rc = nvf_cuda_ctx_activate(q->ctx);
    if (rc < 0)
        return rc;
    return run_chunks(q, s, MODE_QUANT, packed, scales, p, gs, 0);
}

extern "C" int nvf_cuda_quant_dequant_bf16(nvf_cuda_quant *q, uint8_t *out,
                                           const nvf_quant_source *s, int check_finite,
                                           const char *name) {
    unsigned long long bad = ~0ull;
    cudaStream_t s0 = q->slots[0].stream;
    int rc = nvf_cuda_ctx_activate(q->ctx);
    if (rc == 0)
        rc = reset_amax(q, 1, s0);
    if (rc == 0)
        rc = nvf_cuda_sync(s0);
    if (rc == 0)
        rc = run_chunks(q, s, MODE_DEQUANT, out, NULL, NULL, 0.0f, check_finite);
    if (rc < 0)
        return rc;
    NVF_CUDA_TRY(cudaMemcpy(&bad, q->d_bad, sizeof bad, cudaMemcpyDeviceToHost));
    if (bad != ~0ull)
        return nonfinite_error(s, name, bad);
done:
    return rc;
}

/* ---- the device-resident group ----------------------------------------------------------- */

/* Device bytes of member `s` (input, f32 scales, output), each part aligned. */
static size_t member_bytes(const nvf_quant_source *s, size_t *in, size_t *sc, size_t *out) {
    size_t n = (size_t)s->rows * (size_t)s->cols;
    *in = align_up(n * dtype_size(s->dtype));
    *sc = 0;
    if (s->scale)
        *sc = align_up(
            (size_t)(ceil_div64(s->rows, s->block_rows) * ceil_div64(s->cols, s->block_cols)) *
            sizeof(float));
    *out = align_up(n / 2 + n / 16);
    return *in + *sc + *out;
}

/* The chunked group: each member's amax (the largest wins), the group scale on the host, each
 * member. */
static int group_chunked(nvf_cuda_quant *q, float *out_gs, uint8_t *const *packed,
                         uint8_t *const *scales, const nvf_quant_source *srcs,
                         const char *const *names, size_t n, const nvf_quant_params *p,
                         int allow_nonfinite) {
    float amax = 0.0f;
    for (size_t k = 0; k < n; k++) {
        float a = 0.0f;
        int rc = nvf_cuda_quant_amax(q, &a, &srcs[k], allow_nonfinite, names[k]);
        if (rc < 0)
            return rc;
        if (a > amax)
            amax = a;
    }
    float gs = nvf_qb_group_scale(amax, p);
    for (size_t k = 0; k < n; k++) {
        int rc = nvf_cuda_quant_source(q, packed[k], scales[k], &srcs[k], gs, p);
        if (rc < 0)
            return rc;
    }
    *out_gs = gs;
    return 0;
}

/* Upload member `s` (values, then its scales converted to f32 into `h_sc`) to `d_in`/`d_sc`. */
static int member_upload(const nvf_quant_source *s, uint8_t *d_in, float *d_sc, float *h_sc,
                         cudaStream_t st) {
    size_t n = (size_t)s->rows * (size_t)s->cols;
    int rc = nvf_cuda_upload(d_in, s->data, n * dtype_size(s->dtype), st);
    if (rc < 0 || !s->scale)
        return rc;
    size_t ns = (size_t)(ceil_div64(s->rows, s->block_rows) * ceil_div64(s->cols, s->block_cols));
    for (size_t i = 0; i < ns; i++)
        h_sc[i] = nvf_quant_source_scale(s, i);
    return nvf_cuda_upload(d_sc, h_sc, ns * sizeof(float), st);
}

/* The whole-tensor job of member `s` at `d_in`/`d_sc`. */
static quant_job member_job(nvf_cuda_quant *q, const nvf_quant_source *s, const uint8_t *d_in,
                            const float *d_sc, size_t k, int allow_nonfinite) {
    quant_job j;
    memset(&j, 0, sizeof j);
    j.src = d_in;
    j.nblocks = s->rows * s->cols / NVF_BLOCK;
    j.w = s->cols;
    j.cols = s->cols;
    j.scale = d_sc;
    j.ncb = s->scale ? ceil_div64(s->cols, s->block_cols) : 0;
    j.amax = q->d_amax;
    j.bad = q->d_bad + k;
    j.allow_nonfinite = allow_nonfinite;
    return j;
}

extern "C" int nvf_cuda_quant_group(nvf_cuda_quant *q, float *out_gs, uint8_t *const *packed,
                                    uint8_t *const *scales, const nvf_quant_source *srcs,
                                    const char *const *names, size_t n, const nvf_quant_params *p,
                                    int allow_nonfinite) {
    size_t total = 0, total_sc = 0, in, sc, out;
    for (size_t k = 0; k < n; k++) {
        total += member_bytes(&srcs[k], &in, &sc, &out);
        total_sc += sc;
    }
    int rc = nvf_cuda_ctx_activate(q->ctx);
    if (rc < 0)
        return rc;
    if (n == 0 || total > group_budget(q))
        return group_chunked(q, out_gs, packed, scales, srcs, names, n, p, allow_nonfinite);
    cudaStream_t st = q->slots[0].stream;
    unsigned int amax = 0;
    unsigned long long *bad = (unsigned long long *)malloc(n * sizeof *bad);
    if (!bad)
        return nvf_error_set(NVF_E_NOMEM, "no memory for a group of %zu tensors", n);
    if (total > q->arena_cap) {
        nvf_cuda_free(q->arena);
        q->arena = NULL;
        q->arena_cap = 0;
        rc = nvf_cuda_alloc(&q->arena, total, "a device-resident group");
        if (rc < 0)
            goto done;
        q->arena_cap = total;
    }
    if (total_sc > q->h_scales_cap) {
        nvf_cuda_host_free(q->h_scales);
        q->h_scales = NULL;
        q->h_scales_cap = 0;
        rc = nvf_cuda_host_alloc((void **)&q->h_scales, total_sc, "a group's scales");
        if (rc < 0)
            goto done;
        q->h_scales_cap = total_sc;
    }
    rc = reset_amax(q, n, st);
    if (rc < 0)
        goto done;
    {
        /* Every member uploaded and its amax queued; then every member quantized with the
         * group scale of the group's amax, computed by the kernels from the device copy. */
        uint8_t *base = (uint8_t *)q->arena;
        size_t off = 0, off_sc = 0;
        for (size_t k = 0; k < n && rc == 0; k++) {
            const nvf_quant_source *s = &srcs[k];
            member_bytes(s, &in, &sc, &out);
            float *d_sc = (float *)(base + off + in);
            rc = member_upload(s, base + off, d_sc, (float *)((uint8_t *)q->h_scales + off_sc), st);
            if (rc == 0 && s->rows > 0)
                quant_launch_amax(member_job(q, s, base + off, d_sc, k, allow_nonfinite), s,
                                  quant_cfg_for(s, q->cfg), q->ctx->sms, st);
            off += in + sc + out;
            off_sc += sc;
        }
        off = 0;
        for (size_t k = 0; k < n && rc == 0; k++) {
            const nvf_quant_source *s = &srcs[k];
            member_bytes(s, &in, &sc, &out);
            size_t nv = (size_t)s->rows * (size_t)s->cols;
            uint8_t *d_out = base + off + in + sc;
            if (s->rows > 0) {
                quant_launch_quant(
                    member_job(q, s, base + off, (const float *)(base + off + in), k, 0), s, d_out,
                    d_out + nv / 2, 1.0f, q->d_amax, p, quant_cfg_for(s, q->cfg), q->ctx->sms, st);
                cudaError_t e = cudaGetLastError();
                if (e != cudaSuccess)
                    rc = nvf_cuda_error(e, "kernel launch", __FILE__, __LINE__);
            }
            if (rc == 0)
                rc = nvf_cuda_download(packed[k], d_out, nv / 2, st);
            if (rc == 0)
                rc = nvf_cuda_download(scales[k], d_out + nv / 2, nv / 16, st);
            off += in + sc + out;
        }
    }
    if (rc == 0)
        rc = nvf_cuda_download(&amax, q->d_amax, sizeof amax, st);
    if (rc == 0)
        rc = nvf_cuda_download(bad, q->d_bad, n * sizeof *bad, st);
    if (rc == 0)
        rc = nvf_cuda_sync(st);
    for (size_t k = 0; k < n && rc == 0; k++)
        if (bad[k] != ~0ull)
            rc = nonfinite_error(&srcs[k], names[k], bad[k]);
    if (rc == 0)
        *out_gs = nvf_qb_group_scale(nvf_f32_from_bits(amax), p);
done:
    if (rc < 0)
        (void)nvf_cuda_sync(st);
    free(bad);
    return rc;
}
