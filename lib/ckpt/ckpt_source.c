/*
 * A checkpoint weight as a quantization source (ckpt/ckpt_source.h).
 */
#include "ckpt/ckpt_source.h"

#include <string.h>

static size_t scale_elem_size(nvf_dtype d) {
    return d == NVF_DTYPE_F32 ? 4 : d == NVF_DTYPE_BF16 ? 2 : 1;
}

void nvf_ckpt_source_view(nvf_quant_source *out, const nvf_ckpt *ck, size_t ti, int64_t e) {
    const nvf_ckpt_tensor *t = &ck->tensors[ti];
    const nvf_st_tensor *st = t->st;
    int64_t mats = st->ndim == 3 ? st->shape[0] : 1;
    memset(out, 0, sizeof *out);
    out->dtype = st->dtype;
    out->rows = st->ndim >= 2 ? st->shape[st->ndim - 2] : 1;
    out->cols = st->ndim >= 1 ? st->shape[st->ndim - 1] : 1;
    uint64_t esize = nvf_dtype_bits(st->dtype) / 8;
    uint64_t mat_bytes = (uint64_t)out->rows * (uint64_t)out->cols * esize;
    out->data = st->data + (e > 0 ? (uint64_t)e * mat_bytes : 0);
    if (st->dtype != NVF_DTYPE_F8_E4M3 || t->scale == NVF_CKPT_NONE || mats <= 0)
        return;
    const nvf_st_tensor *sc = ck->tensors[t->scale].st;
    uint64_t per = sc->numel / (uint64_t)mats;
    out->scale_dtype = sc->dtype;
    out->scale_numel = per;
    out->scale = sc->data + (e > 0 ? (uint64_t)e * per * scale_elem_size(sc->dtype) : 0);
    if (per == 1) {
        out->block_rows = out->rows > 0 ? out->rows : 1;
        out->block_cols = out->cols;
    } else {
        out->block_rows = ck->quant.block[0] > 0 ? ck->quant.block[0] : 128;
        out->block_cols = ck->quant.block[1] > 0 ? ck->quant.block[1] : 128;
    }
}
