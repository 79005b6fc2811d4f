/*
 * NVFP4 quantization kernels (the amax pass and the quantizing pass) and their launchers,
 * byte-identical to nvf_quant_amax_ref / nvf_quant_source_ref (SPEC section 4). The block
 * arithmetic is the shared exact block (nvfp4/quant_block.h) with the fast path of
 * kernels/quant_math.h on top; this file holds the kernels (one thread per 16-value
 * block, 16-byte loads, a persistent grid-stride loop with several blocks in flight per thread)
 * and the launchers (launch configurations) over device pointers (quant_launch.h). The host
 * side is quant_pipeline.cu, the benchmark quant_bench.cu.
 *
 * Sources: BF16 (fast loader), F8_E4M3 with block scales whose block width is a multiple of 16
 * (fast loader: one scale per 16-value block), and every other checked source through a generic
 * per-value loader. FP8-block values are bf16(RN(f32(fp8) * scale)) in both passes.
 *
 * Where the time goes (bench/results/quant-cuda-h200*.json, measured with Nsight Compute): the
 * quantizing kernels are bound by instruction issue, not memory. Every binary32 operation of
 * the reference is rounded on its own (no FP4 conversion instruction on sm_90), so a BF16 value
 * costs ~14 instructions with RTN and ~29 with 4over6 (two candidates, each rounded, both
 * errors accumulated), against ~25 per value that one H200 can issue at copy speed.
 */
#include "quant_launch.h"
#include "quant_math.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <string.h>

enum { SRC_BF16 = 0, SRC_FP8B = 1, SRC_GENERIC = 2 };

/* Everything a kernel needs about one contiguous run of values (a chunk): `nblocks` blocks of
 * 16 starting at [row0, col0] of a tensor with `cols` columns, `w` values per chunk row. */
struct qargs {
    const uint8_t *src;
    int64_t nblocks;
    int64_t w, row0, col0, cols;
    int32_t dtype; /* nvf_dtype, generic loader */
    /* FP8-block scales as f32, rows srow0.. of ncb columns */
    const float *scale;
    int64_t srow0, ncb, br, bc;
    /* the fast FP8-block loader's 32-bit index math (fp8_index_setup): 16-value blocks per
     * chunk row (bpr; 2^31 - 1 for a piece of one row), first block column cb0, row0, and the
     * dividers by bpr, br and bc / 16; fp8_fast = 0 where the indices could exceed 31 bits */
    uint32_t bpr, cb0, row0_32, srow0_32, ncb_32;
    nvf_qm_div div_bpr, div_br, div_bc16;
    int32_t fp8_fast;
    /* quantize */
    uint8_t *packed, *scales;
    nvf_qm_consts k;
    const unsigned int *amax_in; /* when set, k is derived from this amax (groups, bench) */
    nvf_quant_params p;          /* the recipe, for the group scale of amax_in */
    float min_abs;               /* smallest nonzero |value| of the source (source_min_abs) */
    /* amax */
    unsigned int *amax;
    unsigned long long *bad; /* smallest linear index of a NaN/Inf */
    int32_t allow_nonfinite;
};

/* ---- kernels ----------------------------------------------------------------------------- */

/* f32 of FP8-block value b with multiplier m: bf16(RN(f32(b) * m)). */
__device__ static inline float fp8b_value(float v, float m) {
    return __bfloat162float(__float2bfloat16_rn(nvf_qb_mul(v, m)));
}

__device__ static float scale_at(const qargs &a, int64_t row, int64_t col) {
    return a.scale[(row / a.br - a.srow0) * a.ncb + col / a.bc];
}

/* Scale of FP8-block block b (fast loader): 32-bit indices, no divide instruction. */
__device__ static inline float fp8_block_scale(const qargs &a, int64_t b) {
    uint32_t b32 = (uint32_t)b;
    uint32_t r = nvf_qm_div_do(b32, a.div_bpr);
    uint32_t cb = b32 - r * a.bpr + a.cb0;
    uint32_t srow = nvf_qm_div_do(a.row0_32 + r, a.div_br) - a.srow0_32;
    return __ldg(a.scale + srow * a.ncb_32 + nvf_qm_div_do(cb, a.div_bc16));
}

/* Row and column of the chunk's value l: a chunk is whole rows (w == cols) or a piece of one
 * row. */
__device__ static inline int64_t value_row(const qargs &a, int64_t l) {
    return a.w != a.cols ? a.row0 : a.row0 + l / a.w;
}

__device__ static inline int64_t value_col(const qargs &a, int64_t l) {
    return a.w != a.cols ? a.col0 + l : l % a.w;
}

/* Value i of block b, any source (slow path and generic loader). */
__device__ static float load_value(const qargs &a, int64_t b, int i) {
    int64_t l = b * NVF_BLOCK + i;
    switch (a.dtype) {
    case NVF_DTYPE_BF16:
        return nvf_bf16_to_f32(((const uint16_t *)a.src)[l]);
    case NVF_DTYPE_F16:
        return nvf_f16_to_f32(((const uint16_t *)a.src)[l]);
    case NVF_DTYPE_F32:
        return ((const float *)a.src)[l];
    case NVF_DTYPE_F8_E5M2:
        return nvf_e5m2_to_f32(a.src[l]);
    default: {
        float v = nvf_e4m3_to_f32(a.src[l]);
        if (!a.scale)
            return v;
        return fp8b_value(v, scale_at(a, value_row(a, l), value_col(a, l)));
    }
    }
}

/* The 8 words of BF16 pairs of block b (value 2j in the low half of word j), from registers
 * already loaded (`raw`): the BF16 words themselves, or FP8-block values converted. */
template <int SRC>
__device__ static inline void block_words(uint32_t *w, const uint4 *raw, const qargs &a,
                                          int64_t b) {
    if (SRC == SRC_BF16) {
        const uint32_t *r = (const uint32_t *)raw;
        NVF_QM_UNROLL
        for (int j = 0; j < 8; j++)
            w[j] = r[j];
    } else {
        float m = fp8_block_scale(a, b);
        const uint16_t *h = (const uint16_t *)raw;
        NVF_QM_UNROLL
        for (int j = 0; j < 8; j++) {
            /* exact E4M3 -> f16 -> f32, then both products rounded to BF16 by one cvt */
            __half2_raw p = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)h[j], __NV_E4M3);
            float2 f = __half22float2(__half2(p));
            __nv_bfloat162 v = __floats2bfloat162_rn(nvf_qb_mul(f.x, m), nvf_qb_mul(f.y, m));
            w[j] = *(const uint32_t *)&v;
        }
    }
}

/* The 16 values of block b as binary32 bits, from registers already loaded (`raw`). */
template <int SRC>
__device__ static inline void block_bits(uint32_t *xb, const uint4 *raw, const qargs &a,
                                         int64_t b) {
    if (SRC == SRC_BF16 || SRC == SRC_FP8B) {
        uint32_t w[8];
        block_words<SRC>(w, raw, a, b);
        NVF_QM_UNROLL
        for (int j = 0; j < 8; j++) {
            xb[2 * j] = w[j] << 16;
            xb[2 * j + 1] = w[j] & 0xFFFF0000u;
        }
    } else {
        NVF_QM_UNROLL
        for (int i = 0; i < NVF_BLOCK; i++)
            xb[i] = nvf_f32_bits(load_value(a, b, i));
    }
}

/* Raw 16-byte loads of block b into `raw` (two for BF16, one for FP8). */
template <int SRC> __device__ static inline void block_load(uint4 *raw, const qargs &a, int64_t b) {
    if (SRC == SRC_BF16) {
        const uint4 *p = (const uint4 *)(a.src + b * 32);
        raw[0] = __ldg(p);
        raw[1] = __ldg(p + 1);
    } else if (SRC == SRC_FP8B) {
        raw[0] = __ldg((const uint4 *)(a.src + b * 16));
    }
}

__device__ static inline uint32_t prmt(uint32_t x, uint32_t y, uint32_t sel) {
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(sel));
    return r;
}

/* Sign word of 8 BF16 values in 4 pair words (value 2j low in w[j]): bit 4i+3 set where value i
 * has its sign bit set. Two byte permutes with sign replication gather the signs of values
 * (0, 2, 1, 3) and (4, 6, 5, 7) as 0x00/0xFF bytes; two more split them into even values (byte
 * k = value 2k, whose nibble bit is bit 3 of byte k) and odd values (bit 7 of byte k). */
__device__ static inline uint32_t bf16_sign_word(const uint32_t *w) {
    uint32_t x01 = prmt(w[0], w[1], 0xFBD9u), x23 = prmt(w[2], w[3], 0xFBD9u);
    uint32_t even = prmt(x01, x23, 0x5410u), odd = prmt(x01, x23, 0x7632u);
    return (even & 0x08080808u) | (odd & 0x80808080u);
}

/* The exact path for block b (a NaN, or an enc below min_enc): values loaded again, codes and
 * scale stored here, so that the fast path's registers never need an address. The arguments
 * are taken by value: a reference would make the kernel keep its parameters in local memory. */
template <int SRC>
__device__ static __noinline__ void block_store_exact(const qargs a, const nvf_qm_consts k,
                                                      int64_t b) {
    uint4 again[SRC == SRC_BF16 ? 2 : 1];
    block_load<SRC>(again, a, b);
    uint32_t xb[NVF_BLOCK];
    block_bits<SRC>(xb, again, a, b);
    float x[NVF_BLOCK];
    for (int i = 0; i < NVF_BLOCK; i++)
        x[i] = nvf_f32_from_bits(xb[i]);
    uint32_t w[2];
    a.scales[b] = nvf_qb_quantize_words(w, x, &k.b);
    *(uint2 *)(a.packed + b * NVF_BLOCK_BYTES) = make_uint2(w[0], w[1]);
}

/* Quantize block b whose raw loads are `raw`. BF16 pairs (BF16 and FP8-block sources): the
 * largest magnitude and the smallest one by 16-bit SIMD max/min over the pair words, the sign
 * words by byte permutes (bf16_sign_word) unless a magnitude is zero (a -0 must not get a sign
 * bit), the values themselves as the words' halves. */
template <int SRC, nvf_quant_method METHOD, nvf_quant_error ERR, nvf_quant_domain DOM>
__device__ static inline void block_store(const qargs &a, const nvf_qm_consts &k,
                                          const nvf_qm_scale *tab, int64_t b, const uint4 *raw) {
    uint32_t xb[NVF_BLOCK], m = 0, s0 = 0, s1 = 0;
    if (SRC == SRC_BF16 || SRC == SRC_FP8B) {
        uint32_t w[8], mx = 0, mn = 0xFFFFFFFFu;
        block_words<SRC>(w, raw, a, b);
        NVF_QM_UNROLL
        for (int j = 0; j < 8; j++) {
            uint32_t mw = w[j] & 0x7FFF7FFFu;
            mx = __vmaxu2(mx, mw);
            mn = __vminu2(mn, mw);
            xb[2 * j] = w[j] << 16;
            xb[2 * j + 1] = w[j] & 0xFFFF0000u;
        }
        m = max(mx << 16, mx & 0xFFFF0000u);
        if ((mn & 0xFFFFu) != 0 && (mn >> 16) != 0) {
            s0 = bf16_sign_word(w);
            s1 = bf16_sign_word(w + 4);
        } else {
            NVF_QM_UNROLL
            for (int i = 0; i < NVF_BLOCK; i++) {
                if (i < 8)
                    s0 |= nvf_qm_sign_bit(xb[i], i);
                else
                    s1 |= nvf_qm_sign_bit(xb[i], i);
            }
        }
    } else {
        block_bits<SRC>(xb, raw, a, b);
        NVF_QM_UNROLL
        for (int i = 0; i < NVF_BLOCK; i++) {
            m = max(m, xb[i] & 0x7FFFFFFFu);
            if (i < 8)
                s0 |= nvf_qm_sign_bit(xb[i], i);
            else
                s1 |= nvf_qm_sign_bit(xb[i], i);
        }
    }
    uint32_t w0, w1;
    uint8_t sf;
    if (!nvf_qm_block_fast(&w0, &w1, &sf, xb, m, s0, s1, &k, tab, SRC != SRC_GENERIC, METHOD, ERR,
                           DOM)) {
        block_store_exact<SRC>(a, k, b);
        return;
    }
    *(uint2 *)(a.packed + b * NVF_BLOCK_BYTES) = make_uint2(w0, w1);
    a.scales[b] = sf;
}

/* U blocks per thread and loop step; PF: the next step's loads are issued before this step's
 * arithmetic, so that they stay in flight while it runs. The block scales' table (enc, sff per
 * E4M3 byte) is built in shared memory first. */
template <int SRC, nvf_quant_method METHOD, nvf_quant_error ERR, nvf_quant_domain DOM, int U,
          int PF>
__global__ void __launch_bounds__(512) quant_kernel(qargs a) {
    __shared__ nvf_qm_scale tab[NVF_QM_TAB_N];
    nvf_qm_consts k = a.k;
    if (a.amax_in) {
        float gs = nvf_qb_group_scale(nvf_f32_from_bits(*a.amax_in), &a.p);
        k = nvf_qm_consts_make(gs, a.p.method, a.p.error, a.p.domain, a.min_abs);
    }
    asm("" : "+r"(k.c_keep)); /* an unknown value to the compiler: see nvf_qm_consts */
    for (int i = threadIdx.x; i < NVF_QM_TAB_N; i += blockDim.x)
        tab[i] = nvf_qm_scale_of((uint8_t)i, k.b.rcp_gs);
    __syncthreads();
    const int R = SRC == SRC_BF16 ? 2 : 1;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 next[U][R] = {};
    if (PF) {
        NVF_QM_UNROLL
        for (int u = 0; u < U; u++)
            if (u * stride + t < a.nblocks)
                block_load<SRC>(next[u], a, u * stride + t);
    }
    for (int64_t base = 0; base < a.nblocks; base += stride * U) {
        uint4 raw[U][R];
        NVF_QM_UNROLL
        for (int u = 0; u < U; u++) {
            int64_t b = base + u * stride + t;
            if (PF) {
                NVF_QM_UNROLL
                for (int r = 0; r < R; r++)
                    raw[u][r] = next[u][r];
                if (b + stride * U < a.nblocks)
                    block_load<SRC>(next[u], a, b + stride * U);
            } else if (b < a.nblocks) {
                block_load<SRC>(raw[u], a, b);
            }
        }
        NVF_QM_UNROLL
        for (int u = 0; u < U; u++) {
            int64_t b = base + u * stride + t;
            if (b < a.nblocks)
                block_store<SRC, METHOD, ERR, DOM>(a, k, tab, b, raw[u]);
        }
    }
}

/* ModelOpt's arithmetic (NVF_QUANT_METHOD_RTN_MODELOPT): the shared exact block as it is, one
 * thread per 16-value block in a grid-stride loop. No fast path: its two true divisions per value
 * (__fdiv_rn) have no table or product form that keeps the bytes. */
template <int SRC> __global__ void __launch_bounds__(512) quant_exact_kernel(qargs a) {
    nvf_qm_consts k = a.k;
    if (a.amax_in)
        k.b = nvf_qb_consts_make(nvf_qb_group_scale(nvf_f32_from_bits(*a.amax_in), &a.p),
                                 a.p.method, a.p.error, a.p.domain);
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < a.nblocks; b += stride)
        block_store_exact<SRC>(a, k, b);
}

/* Amax of block b with NaN skipped; a NaN/Inf is recorded in *a.bad (smallest linear index). */
__device__ static uint32_t block_amax_slow(const qargs &a, int64_t b, const uint32_t *xb) {
    uint32_t m = 0;
    for (int i = 0; i < NVF_BLOCK; i++) {
        uint32_t v = xb[i] & 0x7FFFFFFFu;
        if (v >= 0x7F800000u && !a.allow_nonfinite) {
            unsigned long long idx =
                (unsigned long long)(a.row0 * a.cols + a.col0 + b * NVF_BLOCK + i);
            atomicMin(a.bad, idx);
            break;
        }
        v = v > 0x7F800000u ? 0u : v;
        m = max(m, v);
    }
    return m;
}

template <int SRC, int U> __global__ void __launch_bounds__(512) amax_kernel(qargs a) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t m = 0;
    for (int64_t base = 0; base < a.nblocks; base += stride * U) {
        uint4 raw[U][SRC == SRC_BF16 ? 2 : 1];
        NVF_QM_UNROLL
        for (int u = 0; u < U; u++) {
            int64_t b = base + u * stride + t;
            if (b < a.nblocks)
                block_load<SRC>(raw[u], a, b);
        }
        NVF_QM_UNROLL
        for (int u = 0; u < U; u++) {
            int64_t b = base + u * stride + t;
            if (b >= a.nblocks)
                continue;
            uint32_t bm;
            if (SRC == SRC_BF16) {
                /* Magnitudes straight from the halves: max over the low and the high ones. */
                const uint32_t *w = (const uint32_t *)raw[u];
                uint32_t lo = 0, hi = 0;
                NVF_QM_UNROLL
                for (int j = 0; j < 8; j++) {
                    lo = max(lo, w[j] & 0x7FFFu);
                    hi = max(hi, w[j] & 0x7FFF0000u);
                }
                bm = max(lo << 16, hi);
            } else if (SRC == SRC_FP8B) {
                /* The values' magnitudes are bf16(RN(|f32(byte)| * |scale|)), nondecreasing in
                 * the E4M3 magnitude byte: the largest byte (bytewise SIMD max), decoded once.
                 * NaN bytes (0x7F) and a nonfinite scale take the per-value path below. */
                const uint32_t *w = (const uint32_t *)raw[u];
                uint32_t mx = __vmaxu4(__vmaxu4(w[0] & 0x7F7F7F7Fu, w[1] & 0x7F7F7F7Fu),
                                       __vmaxu4(w[2] & 0x7F7F7F7Fu, w[3] & 0x7F7F7F7Fu));
                mx = __vmaxu4(mx, mx >> 16);
                mx = __vmaxu4(mx, mx >> 8) & 0xFFu;
                float sc = fabsf(fp8_block_scale(a, b));
                bm = 0x7F800000u;
                if (mx != 0x7Fu && sc <= FLT_MAX)
                    bm = nvf_f32_bits(fp8b_value(nvf_qb_e4m3_to_f32((uint8_t)mx), sc));
            } else {
                uint32_t xb[NVF_BLOCK];
                block_bits<SRC>(xb, raw[u], a, b);
                bm = 0;
                NVF_QM_UNROLL
                for (int i = 0; i < NVF_BLOCK; i++)
                    bm = max(bm, xb[i] & 0x7FFFFFFFu);
            }
            if (bm >= 0x7F800000u) {
                uint32_t xb[NVF_BLOCK];
                block_bits<SRC>(xb, raw[u], a, b);
                bm = block_amax_slow(a, b, xb);
            }
            m = max(m, bm);
        }
    }
    m = __reduce_max_sync(0xFFFFFFFFu, m);
    if ((threadIdx.x & 31) == 0)
        atomicMax(a.amax, m);
}

/* ---- launchers --------------------------------------------------------------------------- */

/* The launch configurations (launch_cfg in quant_launch.h). */
static const launch_cfg k_cfgs[] = {
    {256, 4, 2, 0}, {128, 8, 1, 0},  {512, 2, 2, 0},
    {256, 0, 1, 0}, {256, -1, 1, 1}, {256, -1, 2, 0},
};
#define N_CFGS ((int)(sizeof k_cfgs / sizeof k_cfgs[0]))
/* The fastest on the H200 (bench quant --config, bench/results/quant-cuda-h200-configs.jsonl):
 * 4 for BF16 and the generic loader, 2 for FP8-block sources (cfg_for). */
#define CFG_DEFAULT      4
#define CFG_DEFAULT_FP8B 2

/* The source kind of a checked source (`bc` the block width for FP8-block sources). */
static int src_kind(const nvf_quant_source *s) {
    if (s->dtype == NVF_DTYPE_BF16)
        return SRC_BF16;
    if (s->dtype == NVF_DTYPE_F8_E4M3 && s->scale && s->block_cols % NVF_BLOCK == 0)
        return SRC_FP8B;
    return SRC_GENERIC;
}

int quant_cfg_count(void) {
    return N_CFGS;
}

const launch_cfg &quant_cfg_for(const nvf_quant_source *s, int forced) {
    if (forced >= 0 && forced < N_CFGS)
        return k_cfgs[forced];
    return k_cfgs[src_kind(s) == SRC_FP8B ? CFG_DEFAULT_FP8B : CFG_DEFAULT];
}

/* The fast FP8-block loader's index fields of `a` (src, nblocks, w, row0, col0, cols, srow0,
 * ncb, br, bc set): fp8_fast stays 0 (generic loader) where an index could pass 2^31 - 1. */
static void fp8_index_setup(qargs &a) {
    const int64_t lim = 0x7FFFFFFF;
    int whole = a.w == a.cols;
    int64_t bpr = whole ? a.w / NVF_BLOCK : lim;
    int64_t rows = whole ? a.nblocks / bpr + 1 : 1;
    int64_t cb_end = (whole ? 0 : a.col0 / NVF_BLOCK) + (whole ? bpr : a.nblocks);
    a.fp8_fast = 0;
    if (a.nblocks >= lim || a.row0 + rows >= lim || cb_end >= lim || a.br < 1 || a.br >= lim ||
        a.bc < NVF_BLOCK || a.bc / NVF_BLOCK >= lim || a.ncb >= lim ||
        ((a.row0 + rows) / a.br - a.srow0 + 1) * a.ncb >= lim)
        return;
    a.bpr = (uint32_t)bpr;
    a.cb0 = whole ? 0u : (uint32_t)(a.col0 / NVF_BLOCK);
    a.row0_32 = (uint32_t)a.row0;
    a.srow0_32 = (uint32_t)a.srow0;
    a.ncb_32 = (uint32_t)a.ncb;
    a.div_bpr = nvf_qm_div_make(a.bpr);
    a.div_br = nvf_qm_div_make((uint32_t)a.br);
    a.div_bc16 = nvf_qm_div_make((uint32_t)(a.bc / NVF_BLOCK));
    a.fp8_fast = 1;
}

static int grid_for(const launch_cfg &c, int64_t nblocks, int sms, const void *kernel) {
    int64_t need = (nblocks + (int64_t)c.threads * c.unroll - 1) / ((int64_t)c.threads * c.unroll);
    int per_sm = c.per_sm;
    if (per_sm < 0 &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, c.threads, 0) != cudaSuccess)
        per_sm = 1;
    if (per_sm < 0)
        per_sm = 1;
    int64_t g = c.per_sm != 0 ? (int64_t)sms * (per_sm > 0 ? per_sm : 1) : need;
    if (g > need)
        g = need;
    if (g < 1)
        g = 1;
    if (g > 0x7FFFFFFF)
        g = 0x7FFFFFFF;
    return (int)g;
}

template <int SRC, int U, int PF>
static void launch_quant_u(const qargs &a, const nvf_quant_params *p, const launch_cfg &c, int sms,
                           cudaStream_t st) {
    void (*kern)(qargs);
    constexpr nvf_quant_method RTN = NVF_QUANT_METHOD_RTN, M46 = NVF_QUANT_METHOD_4OVER6;
    constexpr nvf_quant_error MSE = NVF_QUANT_ERROR_MSE, MAE = NVF_QUANT_ERROR_MAE;
    constexpr nvf_quant_domain SCALED = NVF_QUANT_DOMAIN_SCALED, ORIG = NVF_QUANT_DOMAIN_ORIGINAL;
    if (p->method == NVF_QUANT_METHOD_RTN)
        kern = quant_kernel<SRC, RTN, MSE, SCALED, U, PF>;
    else if (p->error == NVF_QUANT_ERROR_MSE && p->domain == NVF_QUANT_DOMAIN_SCALED)
        kern = quant_kernel<SRC, M46, MSE, SCALED, U, PF>;
    else if (p->error == NVF_QUANT_ERROR_MSE)
        kern = quant_kernel<SRC, M46, MSE, ORIG, U, PF>;
    else if (p->domain == NVF_QUANT_DOMAIN_SCALED)
        kern = quant_kernel<SRC, M46, MAE, SCALED, U, PF>;
    else
        kern = quant_kernel<SRC, M46, MAE, ORIG, U, PF>;
    kern<<<grid_for(c, a.nblocks, sms, (const void *)kern), c.threads, 0, st>>>(a);
}

template <int SRC>
static void launch_quant_src(const qargs &a, const nvf_quant_params *p, const launch_cfg &c,
                             int sms, cudaStream_t st) {
    if (p->method == NVF_QUANT_METHOD_RTN_MODELOPT) {
        void (*kern)(qargs) = quant_exact_kernel<SRC>;
        launch_cfg one = c;
        one.unroll = 1;
        kern<<<grid_for(one, a.nblocks, sms, (const void *)kern), c.threads, 0, st>>>(a);
        return;
    }
    if (c.unroll == 2)
        launch_quant_u<SRC, 2, 0>(a, p, c, sms, st);
    else if (c.prefetch)
        launch_quant_u<SRC, 1, 1>(a, p, c, sms, st);
    else
        launch_quant_u<SRC, 1, 0>(a, p, c, sms, st);
}

static void launch_quant(int kind, const qargs &a, const nvf_quant_params *p, const launch_cfg &c,
                         int sms, cudaStream_t st) {
    if (kind == SRC_FP8B && !a.fp8_fast)
        kind = SRC_GENERIC;
    if (kind == SRC_BF16)
        launch_quant_src<SRC_BF16>(a, p, c, sms, st);
    else if (kind == SRC_FP8B)
        launch_quant_src<SRC_FP8B>(a, p, c, sms, st);
    else
        launch_quant_src<SRC_GENERIC>(a, p, c, sms, st);
}

template <int SRC>
static void launch_amax_src(const qargs &a, const launch_cfg &c, int sms, cudaStream_t st) {
    void (*kern)(qargs) = c.unroll == 2 ? amax_kernel<SRC, 2> : amax_kernel<SRC, 1>;
    kern<<<grid_for(c, a.nblocks, sms, (const void *)kern), c.threads, 0, st>>>(a);
}

static void launch_amax(int kind, const qargs &a, const launch_cfg &c, int sms, cudaStream_t st) {
    if (kind == SRC_FP8B && !a.fp8_fast)
        kind = SRC_GENERIC;
    if (kind == SRC_BF16)
        launch_amax_src<SRC_BF16>(a, c, sms, st);
    else if (kind == SRC_FP8B)
        launch_amax_src<SRC_FP8B>(a, c, sms, st);
    else
        launch_amax_src<SRC_GENERIC>(a, c, sms, st);
}

/* Smallest nonzero magnitude of a source's values (the fast path's sign rule, quant_math.h):
 * FP8-block values are BF16. */
static float source_min_abs(const nvf_quant_source *s) {
    switch (s->dtype) {
    case NVF_DTYPE_BF16:
        return 9.18354962e-41f; /* 2^-133 */
    case NVF_DTYPE_F16:
        return 5.96046448e-08f; /* 2^-24 */
    case NVF_DTYPE_F8_E5M2:
        return 1.52587891e-05f; /* 2^-16 */
    case NVF_DTYPE_F8_E4M3:
        return s->scale ? 9.18354962e-41f : 1.953125e-03f; /* 2^-133, 2^-9 */
    default:
        return 1.40129846e-45f; /* 2^-149 */
    }
}

static nvf_qm_consts consts_for(float gs, const nvf_quant_params *p, const nvf_quant_source *s) {
    return nvf_qm_consts_make(gs, p->method, p->error, p->domain, source_min_abs(s));
}

/* The kernel arguments of job `j` of source `s`. */
static qargs job_args(const quant_job &j, const nvf_quant_source *s) {
    qargs a;
    memset(&a, 0, sizeof a);
    a.src = j.src;
    a.nblocks = j.nblocks;
    a.w = j.w;
    a.row0 = j.row0;
    a.col0 = j.col0;
    a.cols = j.cols;
    a.dtype = (int32_t)s->dtype;
    a.scale = s->scale ? j.scale : NULL;
    a.srow0 = j.srow0;
    a.ncb = j.ncb;
    a.br = s->block_rows;
    a.bc = s->block_cols;
    a.amax = j.amax;
    a.bad = j.bad;
    a.allow_nonfinite = j.allow_nonfinite;
    if (a.scale)
        fp8_index_setup(a);
    return a;
}

void quant_launch_amax(const quant_job &j, const nvf_quant_source *s, const launch_cfg &c, int sms,
                       cudaStream_t st) {
    launch_amax(src_kind(s), job_args(j, s), c, sms, st);
}

void quant_launch_quant(const quant_job &j, const nvf_quant_source *s, uint8_t *packed,
                        uint8_t *scales, float gs, const unsigned int *amax_in,
                        const nvf_quant_params *p, const launch_cfg &c, int sms, cudaStream_t st) {
    qargs a = job_args(j, s);
    a.packed = packed;
    a.scales = scales;
    a.k = consts_for(gs, p, s);
    a.amax_in = amax_in;
    a.p = *p;
    a.min_abs = source_min_abs(s);
    launch_quant(src_kind(s), a, p, c, sms, st);
}
