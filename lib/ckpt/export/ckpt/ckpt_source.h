/*
 * A checkpoint weight as a quantization source (nvfp4/quant.h): the library-internal view that
 * readers of source values share, so that the FP8 scale rule (a per-tensor scale is one block
 * the size of the matrix; a block scale has the checkpoint's block size) lives in lib/ckpt.
 */
#ifndef NVFP4_CKPT_SOURCE_H
#define NVFP4_CKPT_SOURCE_H

#include "nvfp4/checkpoint.h"
#include "nvfp4/quant.h"

/**
 * View matrix `e` (along dimension 0 of a 3-D tensor; 0 or -1 for a 2-D one) of tensor `ti` as
 * a source: its dtype, rows and columns (the last two dimensions), data, and for an F8_E4M3
 * weight with a scale companion the matching scale slice: one element per matrix is a
 * per-tensor scale (one block the size of the matrix), anything else a block scale of
 * ck->quant.block (128 x 128 when not given). Nothing is checked: pass the result to
 * nvf_quant_source_check() before reading it.
 */
void nvf_ckpt_source_view(nvf_quant_source *out, const nvf_ckpt *ck, size_t ti, int64_t e);

#endif
