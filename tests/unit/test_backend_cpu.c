/*
 * lib/backend without a GPU: the CPU backend's ops against hand-computed values and the
 * reference functions, the generic group, the bench call (its errors, its stop flag), launch
 * configurations (none on the CPU), and, without a GPU, that a CUDA backend cannot be opened.
 */
#include "check.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"
#include "nvfp4/format.h"
#include "nvfp4/quant.h"
#include "nvfp4/status.h"

#include <math.h>
#include <stdlib.h>

static void put_bf16(uint8_t *p, size_t i, float f) {
    uint16_t h = nvf_f32_to_bf16_rn(f);
    p[2 * i] = (uint8_t)h;
    p[2 * i + 1] = (uint8_t)(h >> 8);
}

int main(void) {
    nvf_device cpu;
    CHECK(nvf_device_select(&cpu, "cpu") == 0);
    nvf_backend *b = NULL;
    CHECK(nvf_backend_open(&b, &cpu, 2) == 0);
    if (!b)
        return check_summary("test_backend_cpu");
    CHECK(nvf_backend_device(b)->kind == NVF_DEVICE_CPU);

    /* Two BF16 members [1, 16] and [2, 16]: amax 3 (gate) and 12 (up, -12 at [1, 5]). */
    uint8_t gate[32], up[64];
    for (size_t i = 0; i < 16; i++)
        put_bf16(gate, i, i == 7 ? -3.0f : 0.5f);
    for (size_t i = 0; i < 32; i++)
        put_bf16(up, i, i == 21 ? -12.0f : 1.0f);
    nvf_quant_source srcs[2] = {
        {.dtype = NVF_DTYPE_BF16, .data = gate, .rows = 1, .cols = 16},
        {.dtype = NVF_DTYPE_BF16, .data = up, .rows = 2, .cols = 16},
    };
    float amax = 0.0f;
    CHECK(nvf_backend_amax(b, &amax, &srcs[1], 0, "up") == 0);
    CHECK(amax == 12.0f);
    /* The group: gs = 256 * 6 / 12 = 128 for both members (SPEC section 4). */
    nvf_quant_params p = nvf_quant_params_default();
    uint8_t pk0[8], sc0[1], pk1[16], sc1[2], pr[16], sr[2];
    uint8_t *packed[2] = {pk0, pk1}, *scales[2] = {sc0, sc1};
    const char *names[2] = {"m.gate_proj.weight", "m.up_proj.weight"};
    float gs = 0.0f;
    CHECK(nvf_backend_quantize_group(b, &gs, packed, scales, srcs, names, 2, &p, 0) == 0);
    CHECK(gs == 128.0f);
    CHECK(nvf_quant_source_ref(pr, sr, &srcs[1], 128.0f, &p, 1) == 0);
    CHECK(memcmp(pr, pk1, 16) == 0 && memcmp(sr, sc1, 2) == 0);
    CHECK(nvf_quant_source_ref(pr, sr, &srcs[0], 128.0f, &p, 1) == 0);
    CHECK(memcmp(pr, pk0, 8) == 0 && sr[0] == sc0[0]);
    /* A NaN in the second member: refused, naming it and [1, 2]. */
    put_bf16(up, 18, NAN);
    CHECK(nvf_backend_quantize_group(b, &gs, packed, scales, srcs, names, 2, &p, 0) ==
          NVF_E_NONFINITE);
    CHECK_CONTAINS(nvf_error_last(), "tensor 'm.up_proj.weight': non-finite value nan at index "
                                     "[1, 2]");
    CHECK(nvf_backend_quantize_group(b, &gs, packed, scales, srcs, names, 2, &p, 1) == 0);
    CHECK(gs == 128.0f);

    /* dequant_bf16 of the BF16 member is its own bytes; check_finite refuses the NaN. */
    uint8_t bf[64];
    CHECK(nvf_backend_dequant_bf16(b, bf, &srcs[1], 0, "up") == 0);
    CHECK(memcmp(bf, up, 64) == 0);
    CHECK(nvf_backend_dequant_bf16(b, bf, &srcs[1], 1, "up") == NVF_E_NONFINITE);
    CHECK_CONTAINS(nvf_error_last(), "[1, 2]");

    /* No launch configurations on the CPU. */
    CHECK(nvf_backend_config_count(b) == 0);
    CHECK(nvf_backend_set_config(b, 0, 0) == NVF_E_UNSUPPORTED);

    /* bench: BF16 quantization only; bad shapes refused; a set stop flag interrupts. */
    double t = -1.0;
    CHECK(nvf_backend_bench_quant(b, &t, NVF_DTYPE_BF16, 64, 256, &p,
                                  NVF_BACKEND_BENCH_AMAX_QUANTIZE, 3, NULL) == 0);
    CHECK(t > 0.0);
    CHECK(nvf_backend_bench_quant(b, &t, NVF_DTYPE_BF16, 64, 256, &p, NVF_BACKEND_BENCH_QUANTIZE, 2,
                                  NULL) == 0);
    CHECK(nvf_backend_bench_quant(b, &t, NVF_DTYPE_BF16, 64, 256, &p, NVF_BACKEND_BENCH_COPY, 1,
                                  NULL) == NVF_E_UNSUPPORTED);
    CHECK(nvf_backend_bench_quant(b, &t, NVF_DTYPE_F8_E4M3, 64, 256, &p, NVF_BACKEND_BENCH_QUANTIZE,
                                  1, NULL) == NVF_E_UNSUPPORTED);
    CHECK(nvf_backend_bench_quant(b, &t, NVF_DTYPE_BF16, 64, 24, &p, NVF_BACKEND_BENCH_QUANTIZE, 1,
                                  NULL) == NVF_E_INVALID);
    CHECK(nvf_backend_bench_quant(b, &t, NVF_DTYPE_BF16, 64, 256, &p, NVF_BACKEND_BENCH_QUANTIZE, 0,
                                  NULL) == NVF_E_INVALID);
    volatile sig_atomic_t stop = 1;
    CHECK(nvf_backend_bench_quant(b, &t, NVF_DTYPE_BF16, 64, 256, &p, NVF_BACKEND_BENCH_QUANTIZE, 5,
                                  &stop) == NVF_E_INTERRUPTED);
    nvf_backend_close(b);
    nvf_backend_close(NULL);

    if (nvf_cuda_device_count() == 0) {
        /* no CUDA in this build, or no GPU on this machine: no CUDA backend, a clear error */
        nvf_device gpu = {.kind = NVF_DEVICE_CUDA, .index = 0};
        b = NULL;
        CHECK(nvf_backend_open(&b, &gpu, 0) == NVF_E_DEVICE);
        CHECK(b == NULL);
        CHECK_CONTAINS(nvf_error_last(), "cuda:0");
        if (!nvf_cuda_compiled())
            CHECK_CONTAINS(nvf_error_last(), "no CUDA support");
        nvf_backend_set_group_budget(1);
        nvf_backend_set_group_budget(0);
    }
    return check_summary("test_backend_cpu");
}
