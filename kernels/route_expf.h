/*
 * expf as glibc (>= 2.28) and musl compute it (ARM optimized-routines' e_expf.c: a 32-entry
 * table of 2^(i/32) and a degree-3 polynomial, in double), so that GPU routing (kernels/
 * moe_route.cu) makes its choices on the same f32 values as lib/moe's reference, which calls
 * the C library's expf. CUDA's own expf has up to 2 ulp error, and a correctly rounded expf
 * differs from glibc's on about 1 input in 11,000: either could move a selection at a rounding
 * tie. Every double operation is written out (no contraction: the kernels build with
 * -fmad=false, C with -ffp-contract=off; with or without FMA glibc's two builds give the same
 * bits, which tests/unit/test_moe_route.c checks against this machine's expf).
 *
 * Device code under nvcc, plain C elsewhere: the unit test compiles it on the host.
 */
#ifndef NVFP4_KERNELS_ROUTE_EXPF_H
#define NVFP4_KERNELS_ROUTE_EXPF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define NVF_EXPF_FN    static __device__ __forceinline__
#define NVF_EXPF_TABLE static __constant__ const
#else
#define NVF_EXPF_FN    static inline
#define NVF_EXPF_TABLE static const
#endif

/* bits(2^(i/32)) - (i << 47): the exponent of k is added back as k << 47 */
NVF_EXPF_TABLE uint64_t nvf_expf_tab[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

NVF_EXPF_FN uint32_t nvf_expf_f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

NVF_EXPF_FN double nvf_expf_u2d(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

NVF_EXPF_FN uint64_t nvf_expf_d2u(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

/* e^x, bit for bit glibc's expf (round to nearest). */
NVF_EXPF_FN float nvf_route_expf(float x) {
    const double shift = 0x1.8p+52, invln2_32 = 0x1.71547652b82fep+5;
    const double c0 = 0x1.c6af84b912394p-20, c1 = 0x1.ebfce50fac4f3p-13, c2 = 0x1.62e42ff0c52d6p-6;
    uint32_t ux = nvf_expf_f2u(x), abstop = (ux >> 20) & 0x7ffu;
    if (abstop >= 0x42bu) { /* |x| >= 88, infinite or NaN */
        if (ux == 0xff800000u)
            return 0.0f;
        if (abstop >= 0x7f8u)
            return x + x;
        if (x > 0x1.62e42ep6f)
            return (float)nvf_expf_u2d(0x7ff0000000000000ull); /* +inf */
        if (x < -0x1.9fe368p6f)
            return 0.0f;
    }
    double z = invln2_32 * (double)x;
    double kd = z + shift;
    uint64_t ki = nvf_expf_d2u(kd);
    kd = kd - shift;
    double r = z - kd;
    double s = nvf_expf_u2d(nvf_expf_tab[ki % 32] + (ki << 47));
    double p = c0 * r;
    p = p + c1;
    double r2 = r * r;
    double y = c2 * r;
    y = y + 1.0;
    double pr2 = p * r2;
    y = pr2 + y;
    y = y * s;
    return (float)y;
}

#endif
