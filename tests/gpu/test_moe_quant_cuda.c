/*
 * W4A4's activation quantize-dequantize in the CUDA MoE steps (kernels/moe_steps.cu: the FC1
 * input gather and the FC1 epilogue quantize each 16-value block with the shared exact block,
 * by one thread or spread over a quad of lanes) against the CPU: nvf_qb_quantize of
 * nvfp4/quant_block.h compiled as C, its codes and scale decoded and rounded to BF16 here. Bytes
 * compared, both ways of the kernels (nvf_cuda_moe_qdq with 1 and 4 lanes), for RTN (E4M3 max
 * 448 and 256), the four 4over6 variants (MSE/MAE x scaled/original domain) and ModelOpt's RTN,
 * each with global scales 1, FLT_MAX, 1e-30, random powers of two and the batch's own (ModelOpt:
 * its sf2, and 0). Blocks: E2M1 grid points and ties at power-of-two scales, subnormals, zeros of
 * both signs, huge and tiny values, NaN and infinities, blocks of similar magnitudes (4over6's
 * close calls), BF16-rounded values (what the kernels quantize), all-zero blocks. Seed fixed and
 * printed. Exit 77 (skip) without a GPU.
 */
#include "check.h"

#define GPU_GEN_SEED 0xD1B54A32D192ED03ull
#include "gpu_gen.h"

#include "nvfp4/device.h"
#include "nvfp4/format.h"
#include "nvfp4/quant_block.h"
#include "nvfp4/status.h"

#ifdef NVFP4_HAVE_CUDA
#include "kernels/moe_gemm.h"
#endif

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_BLOCKS 6000

#ifdef NVFP4_HAVE_CUDA
/* Block b of the batch (16 values at x). */
static void make_block(float *x, int b) {
    int kind = b % 8;
    if (kind == 0) { /* the E2M1 grid and its ties at a power-of-two scale, max 6 */
        int sh = (int)(rnd32() % 13) - 6;
        for (int i = 0; i < NVF_BLOCK; i++)
            x[i] = ldexpf((float)((i + b) % 16) * 0.25f * ((i & 1) ? -1.0f : 1.0f), sh);
        x[b % NVF_BLOCK] = ldexpf(6.0f, sh);
    } else if (kind == 1) { /* similar magnitudes: 4over6's choice is close */
        float base = ldexpf(1.0f, (int)(rnd32() % 40) - 20);
        for (int i = 0; i < NVF_BLOCK; i++)
            x[i] = base * (float)((int)(rnd32() % 4097) - 2048) / 256.0f;
    } else if (kind == 2) {
        for (int i = 0; i < NVF_BLOCK; i++)
            x[i] = (b & 8) ? -0.0f : 0.0f;
    } else {
        for (int i = 0; i < NVF_BLOCK; i++)
            x[i] = hard_value(kind == 3);
    }
    if (kind == 1 || kind == 4 || kind == 5) /* BF16 values, as the kernels' inputs are */
        for (int i = 0; i < NVF_BLOCK; i++)
            x[i] = nvf_bf16_to_f32(nvf_f32_to_bf16_rn(x[i]));
}

/* The CPU's bytes: each block quantized by nvf_qb_quantize, decoded, rounded to BF16. */
static void qdq_ref(uint16_t *out, const float *in, int64_t n, float gs,
                    const nvf_quant_params *q) {
    nvf_qb_consts k = nvf_qb_consts_make(gs, q->method, q->error, q->domain);
    for (int64_t b = 0; b < n; b++) {
        uint8_t packed[NVF_BLOCK_BYTES], sf;
        nvf_qb_quantize(packed, &sf, in + b * NVF_BLOCK, &k);
        float s = nvf_e4m3_to_f32(sf);
        for (int j = 0; j < NVF_BLOCK; j++)
            out[b * NVF_BLOCK + j] =
                nvf_f32_to_bf16_rn(nvf_e2m1_to_f32(nvf_e2m1_unpack(packed, j)) * s);
    }
}

static const char *method_name(const nvf_quant_params *q) {
    if (q->method == NVF_QUANT_METHOD_RTN)
        return q->e4m3_max == 448 ? "rtn/448" : "rtn/256";
    if (q->method == NVF_QUANT_METHOD_RTN_MODELOPT)
        return "rtn-modelopt";
    return q->error == NVF_QUANT_ERROR_MSE
               ? (q->domain == NVF_QUANT_DOMAIN_SCALED ? "4over6 mse scaled"
                                                       : "4over6 mse original")
               : (q->domain == NVF_QUANT_DOMAIN_SCALED ? "4over6 mae scaled"
                                                       : "4over6 mae original");
}

static int g_batches;

/* One batch: the kernels with 1 and with 4 lanes against qdq_ref, bytes compared. */
static void check_batch(const float *in, int64_t n, float gs, const nvf_quant_params *q,
                        uint16_t *want, uint16_t *got) {
    qdq_ref(want, in, n, gs, q);
    for (int lanes = 1; lanes <= 4; lanes += 3) {
        int rc = nvf_cuda_moe_qdq(got, in, n, gs, q, lanes);
        CHECK_MSG(rc == 0, "%s gs %a lanes %d: %s", method_name(q), gs, lanes, nvf_error_last());
        if (rc != 0)
            return;
        int bad = 0;
        for (int64_t i = 0; i < n * NVF_BLOCK; i++) {
            if (got[i] == want[i])
                continue;
            if (bad++ < 4) {
                int64_t b = i / NVF_BLOCK;
                printf("  %s gs %a lanes %d: block %lld value %lld (%a): gpu %04x cpu %04x\n",
                       method_name(q), gs, lanes, (long long)b, (long long)(i % NVF_BLOCK), in[i],
                       got[i], want[i]);
            }
        }
        CHECK_MSG(bad == 0, "%s gs %a lanes %d: %d of %lld values differ", method_name(q), gs,
                  lanes, bad, (long long)(n * NVF_BLOCK));
    }
    g_batches++;
}
#endif

int main(void) {
    if (nvf_cuda_device_count() == 0) {
        printf("test_moe_quant_cuda: no CUDA device, skipped\n");
        return 77;
    }
#ifdef NVFP4_HAVE_CUDA
    nvf_device gpu;
    CHECK(nvf_device_select(&gpu, "cuda:0") == 0);
    printf("test_moe_quant_cuda: seed 0x%016llx\n", (unsigned long long)GPU_GEN_SEED);
    const nvf_quant_params variants[] = {
        {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448},
        {NVF_QUANT_METHOD_RTN, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 256},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 256},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_ORIGINAL, 256},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_SCALED, 448},
        {NVF_QUANT_METHOD_4OVER6, NVF_QUANT_ERROR_MAE, NVF_QUANT_DOMAIN_ORIGINAL, 448},
        {NVF_QUANT_METHOD_RTN_MODELOPT, NVF_QUANT_ERROR_MSE, NVF_QUANT_DOMAIN_SCALED, 448},
    };
    const size_t n_var = sizeof variants / sizeof variants[0];
    float *in = malloc((size_t)N_BLOCKS * NVF_BLOCK * sizeof *in);
    uint16_t *want = malloc((size_t)N_BLOCKS * NVF_BLOCK * sizeof *want);
    uint16_t *got = malloc((size_t)N_BLOCKS * NVF_BLOCK * sizeof *got);
    CHECK(in && want && got);
    for (size_t v = 0; in && want && got && v < n_var; v++) {
        const nvf_quant_params *q = &variants[v];
        for (int g = 0; g < 6; g++) {
            for (int b = 0; b < N_BLOCKS; b++)
                make_block(in + (int64_t)b * NVF_BLOCK, b);
            /* the batch's finite amax gives the group scale the recipe would take */
            uint32_t m = 0;
            for (int64_t i = 0; i < (int64_t)N_BLOCKS * NVF_BLOCK; i++) {
                uint32_t bits = nvf_f32_bits(in[i]) & 0x7FFFFFFFu;
                m = bits < 0x7F800000u && bits > m ? bits : m;
            }
            float gs = g == 0   ? 1.0f
                       : g == 1 ? FLT_MAX
                       : g == 2 ? 1e-30f
                       : g == 3 ? ldexpf(1.0f, (int)(rnd32() % 60) - 30)
                       : g == 4 ? nvf_qb_group_scale(nvf_f32_from_bits(m), q)
                       : q->method == NVF_QUANT_METHOD_RTN_MODELOPT
                           ? 0.0f
                           : nvf_qb_group_scale(ldexpf(1.0f, (int)(rnd32() % 20) - 10), q);
            check_batch(in, N_BLOCKS, gs, q, want, got);
        }
    }
    printf("test_moe_quant_cuda: %d batches of %d blocks, 1 and 4 lanes\n", g_batches, N_BLOCKS);
    free(in);
    free(want);
    free(got);
#endif
    return check_summary("test_moe_quant_cuda");
}
