/*
 * The MoE block on host memory (kernels/moe_gemm.h nvf_cuda_moe_host): upload one layer's
 * prepared experts and the inputs, run, download. Not a resident path: tests and one-off runs.
 */
#include "kernels/moe_gemm.h"

#include "cuda_ctx.h"

#include "nvfp4/layout.h"
#include "nvfp4/status.h"

#include <cuda_runtime.h>

#include <string.h>

/* Upload `bytes` of host `src` into fresh device memory *dst (NULL src: *dst NULL). */
static int put(void **dst, const void *src, size_t bytes, const char *what) {
    int rc = 0;
    *dst = NULL;
    if (!src)
        return 0;
    if ((rc = nvf_cuda_alloc(dst, bytes, what)))
        return rc;
    NVF_CUDA_TRY(cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice));
done:
    return rc;
}

extern "C" int nvf_cuda_moe_host(float *y, const uint16_t *x, int64_t t, const int32_t *ids,
                                 const float *weights, int64_t top_k, int64_t expert0,
                                 const nvf_cuda_moe_layer *h, const nvf_cuda_moe_act *act,
                                 const nvf_quant_params *q, int device) {
    int rc = 0;
    int64_t E = h->n_experts, H = h->hidden, I = h->inter, N1 = h->gated ? 2 * I : I;
    nvf_cuda_moe_layer d;
    nvf_cuda_moe *m = NULL;
    void *p[12];
    memset(p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    d = *h;
    NVF_CUDA_TRY(cudaSetDevice(device));
    if ((rc = put(&p[0], h->w13, (size_t)(E * N1 * H / 2), "MoE w13")) ||
        (rc = put(&p[1], h->w13_sf, (size_t)(E * nvf_layout_bytes(NVF_LAYOUT_128X4, N1, H / 16)),
                  "MoE w13 scales")) ||
        (rc = put(&p[2], h->w2, (size_t)(E * H * I / 2), "MoE w2")) ||
        (rc = put(&p[3], h->w2_sf, (size_t)(E * nvf_layout_bytes(NVF_LAYOUT_128X4, H, I / 16)),
                  "MoE w2 scales")) ||
        (rc = put(&p[4], h->w13_alpha, (size_t)E * 4, "MoE w13 alpha")) ||
        (rc = put(&p[5], h->w2_alpha, (size_t)E * 4, "MoE w2 alpha")) ||
        (rc = put(&p[6], h->w13_input_scale, (size_t)E * 4, "MoE w13 input scales")) ||
        (rc = put(&p[7], h->fc2_input_scale, 4, "MoE fc2 input scale")) ||
        (rc = put(&p[8], x, (size_t)(t * H) * 2, "MoE activations")) ||
        (rc = put(&p[9], ids, (size_t)(t * top_k) * 4, "MoE expert ids")) ||
        (rc = put(&p[10], weights, (size_t)(t * top_k) * 4, "MoE routing weights")) ||
        (rc = nvf_cuda_alloc(&p[11], (size_t)(t * H) * 4, "MoE output")))
        goto done;
    d.w13 = (const uint8_t *)p[0];
    d.w13_sf = (const uint8_t *)p[1];
    d.w2 = (const uint8_t *)p[2];
    d.w2_sf = (const uint8_t *)p[3];
    d.w13_alpha = (const float *)p[4];
    d.w2_alpha = (const float *)p[5];
    d.w13_input_scale = (const float *)p[6];
    d.fc2_input_scale = (const float *)p[7];
    if ((rc = nvf_cuda_moe_create(&m, &d, t, top_k)) ||
        (rc = nvf_cuda_moe_run(m, (float *)p[11], (const uint16_t *)p[8], t, (const int32_t *)p[9],
                               (const float *)p[10], expert0, act, q, NULL)))
        goto done;
    NVF_CUDA_TRY(cudaMemcpy(y, p[11], (size_t)(t * H) * 4, cudaMemcpyDeviceToHost));
done:
    nvf_cuda_moe_free(m);
    for (int i = 0; i < 12; i++)
        nvf_cuda_free(p[i]);
    return rc;
}
