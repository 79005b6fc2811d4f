/*
 * The warpgroup MMA instructions of the wgmma kernel (kernels/moe_gemm_wg.cu), sm_90a: wgmma
 * m64nNk16, f32 += bf16 x bf16, A (4 registers a thread: mma.sync's m16n8k16 A fragment per warp)
 * from registers, B from a shared-memory descriptor in the 128-byte swizzle layout. PTX names each
 * of an instruction's N / 2 accumulator registers, so every width N (32, 64, 96, 128) is its own
 * specialization; their asm text is built from WG_ACC<N> (the accumulators, operands 0 .. N/2 - 1)
 * and the operand numbers after them.
 */
#ifndef NVFP4_KERNELS_WGMMA_H
#define NVFP4_KERNELS_WGMMA_H

#include <stdint.h>

/* The asm operands: accumulators o .. o + 15 (read and written), and k16 step k's four A
 * registers. */
#define WG_D4(o)  "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3])
#define WG_D16(o) WG_D4(o), WG_D4(o + 4), WG_D4(o + 8), WG_D4(o + 12)
#define WG_A4(k)  "r"(a[k][0]), "r"(a[k][1]), "r"(a[k][2]), "r"(a[k][3])

/* The accumulator lists of each width. */
#define WG_ACC32                                                                                   \
    "{"                                                                                            \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"                                        \
    "}"
#define WG_ACC64                                                                                   \
    "{"                                                                                            \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                       \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"                              \
    "}"
#define WG_ACC96                                                                                   \
    "{"                                                                                            \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                       \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"                             \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47"                              \
    "}"
#define WG_ACC128                                                                                  \
    "{"                                                                                            \
    "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                       \
    "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"                             \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"                             \
    "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"                              \
    "}"

/* One wgmma line: SHAPE (m64nNk16), its accumulators, its A registers, its descriptor; scale-d
 * from the predicate p that WG_PRED sets (operand P: always 1, accumulate). */
#define WG_PRED(P) "{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"
#define WG_MMA(SHAPE, ACC, A, DESC)                                                                \
    "wgmma.mma_async.sync.aligned." SHAPE ".f32.bf16.bf16 " ACC ", " A ", " DESC ", p, 1, 1, 0;\n"
/* A chunk's four: k16 step k's A registers Ak and descriptor Dk. */
#define WG_MMA4(SHAPE, ACC, A0, D0, A1, D1, A2, D2, A3, D3)                                        \
    WG_MMA(SHAPE, ACC, A0, D0)                                                                     \
    WG_MMA(SHAPE, ACC, A1, D1) WG_MMA(SHAPE, ACC, A2, D2) WG_MMA(SHAPE, ACC, A3, D3)

/* One k16 step: accumulators d[0 .. N/2 - 1], A registers a[0 .. 3], B at desc (kernels v7 to
 * v16: a statement per step). */
template <int N> struct wgmma_bf16;

/* A chunk's four k16 steps in one asm statement, A registers a[k][0 .. 3] and descriptors d0 ..
 * d3 (kernel v25). */
template <int N> struct wgmma_bf16x4;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
template <> struct wgmma_bf16<32> {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint64_t desc) {
        asm volatile(WG_PRED("%21") WG_MMA("m64n32k16", WG_ACC32, "{%16,%17,%18,%19}", "%20") "}\n"
                     : WG_D16(0)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

template <> struct wgmma_bf16<64> {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint64_t desc) {
        asm volatile(WG_PRED("%37") WG_MMA("m64n64k16", WG_ACC64, "{%32,%33,%34,%35}", "%36") "}\n"
                     : WG_D16(0), WG_D16(16)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

template <> struct wgmma_bf16<96> {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint64_t desc) {
        asm volatile(WG_PRED("%53") WG_MMA("m64n96k16", WG_ACC96, "{%48,%49,%50,%51}", "%52") "}\n"
                     : WG_D16(0), WG_D16(16), WG_D16(32)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

template <> struct wgmma_bf16<128> {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint64_t desc) {
        asm volatile(WG_PRED("%69")
                         WG_MMA("m64n128k16", WG_ACC128, "{%64,%65,%66,%67}", "%68") "}\n"
                     : WG_D16(0), WG_D16(16), WG_D16(32), WG_D16(48)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
    }
};

template <> struct wgmma_bf16x4<32> {
    static __device__ __forceinline__ void run(float *d, const uint32_t (*a)[4], uint64_t d0,
                                               uint64_t d1, uint64_t d2, uint64_t d3) {
        asm volatile(WG_PRED("%36") WG_MMA4("m64n32k16", WG_ACC32, "{%16,%17,%18,%19}", "%32",
                                            "{%20,%21,%22,%23}", "%33", "{%24,%25,%26,%27}", "%34",
                                            "{%28,%29,%30,%31}", "%35") "}\n"
                     : WG_D16(0)
                     : WG_A4(0), WG_A4(1), WG_A4(2), WG_A4(3), "l"(d0), "l"(d1), "l"(d2), "l"(d3),
                       "r"(1));
    }
};

template <> struct wgmma_bf16x4<64> {
    static __device__ __forceinline__ void run(float *d, const uint32_t (*a)[4], uint64_t d0,
                                               uint64_t d1, uint64_t d2, uint64_t d3) {
        asm volatile(WG_PRED("%52") WG_MMA4("m64n64k16", WG_ACC64, "{%32,%33,%34,%35}", "%48",
                                            "{%36,%37,%38,%39}", "%49", "{%40,%41,%42,%43}", "%50",
                                            "{%44,%45,%46,%47}", "%51") "}\n"
                     : WG_D16(0), WG_D16(16)
                     : WG_A4(0), WG_A4(1), WG_A4(2), WG_A4(3), "l"(d0), "l"(d1), "l"(d2), "l"(d3),
                       "r"(1));
    }
};

template <> struct wgmma_bf16x4<96> {
    static __device__ __forceinline__ void run(float *d, const uint32_t (*a)[4], uint64_t d0,
                                               uint64_t d1, uint64_t d2, uint64_t d3) {
        asm volatile(WG_PRED("%68") WG_MMA4("m64n96k16", WG_ACC96, "{%48,%49,%50,%51}", "%64",
                                            "{%52,%53,%54,%55}", "%65", "{%56,%57,%58,%59}", "%66",
                                            "{%60,%61,%62,%63}", "%67") "}\n"
                     : WG_D16(0), WG_D16(16), WG_D16(32)
                     : WG_A4(0), WG_A4(1), WG_A4(2), WG_A4(3), "l"(d0), "l"(d1), "l"(d2), "l"(d3),
                       "r"(1));
    }
};

template <> struct wgmma_bf16x4<128> {
    static __device__ __forceinline__ void run(float *d, const uint32_t (*a)[4], uint64_t d0,
                                               uint64_t d1, uint64_t d2, uint64_t d3) {
        asm volatile(WG_PRED("%84") WG_MMA4("m64n128k16", WG_ACC128, "{%64,%65,%66,%67}", "%80",
                                            "{%68,%69,%70,%71}", "%81", "{%72,%73,%74,%75}", "%82",
                                            "{%76,%77,%78,%79}", "%83") "}\n"
                     : WG_D16(0), WG_D16(16), WG_D16(32), WG_D16(48)
                     : WG_A4(0), WG_A4(1), WG_A4(2), WG_A4(3), "l"(d0), "l"(d1), "l"(d2), "l"(d3),
                       "r"(1));
    }
};
#endif

/* The descriptor of a K-major BF16 operand in the 128-byte swizzle layout: row n's 64 values
 * (128 bytes) at n * 128, its 16-byte piece j at piece j ^ (n % 8), 8-row groups 1024 bytes
 * apart (the tile 1024-byte aligned); a k16 step starts 32 bytes further. */
__device__ __forceinline__ uint64_t wg_desc_sw128(uint32_t saddr) {
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) |
           ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

/* The compiler must neither move accumulator reads across a wgmma wait nor keep them in other
 * registers while a wgmma is in flight. */
__device__ __forceinline__ void wg_fence_reg(float &x) {
    asm volatile("" : "+f"(x)::"memory");
}

#endif
