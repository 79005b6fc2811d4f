/*
 * Which grouped-GEMM kernel takes a GEMM (moe_gemm_select.h): the kernel version
 * (NVFP4_MOE_GEMM), the kernel for each tile height and K, and what the host's planning needs to
 * know of it (kernels/moe_gemm.h: K step, tallest tiles, CTA rows, CTAs per SM).
 */
#include "moe_gemm_select.h"

#include "kernels/moe_gemm.h"

#include <stdlib.h>
#include <string.h>

/* NVFP4_MOE_GEMM picks the kernels, for side-by-side timing: v1 the first ones (registers only,
 * 8-byte steps, 16- and 64-row tiles); v2 the register kernel with 16-byte steps (K % 128 == 0)
 * and prefetch for 16-row tiles and the shared-memory kernel (moe_gemm_tiled.cu) for 32- and
 * 64-row tiles (K % 32 == 0); v3 the shared-memory kernel for every tile height; v4, v2's
 * kernels with each block scale read from a 256-entry table of BF16 pairs instead of decoded per
 * use (a branchy E4M3 decode, about a third of the K loop's instructions); v5, v4 with the E2M1
 * pair table replicated per lane (bank-conflict-free lookups) in the shared-memory kernel's
 * 64-row tiles where K >= REP_LUT_MIN_K: 2-4% faster than v4 at 1024-4096 tokens on
 * DeepSeek-V3, while for 32-row tiles it was 11-14% slower (its 32 KB fill per CTA; bench moe on
 * the H200 at 5517e83, bench/results/gemm-h200-5517e83/; at c4a08b5, before the scale table, it
 * did not help at all; for 16-row tiles 9-13% slower, bench/results/gemm-h200-v6/); v6, the
 * v5 with the 16-row register kernel capped at 128 registers (launch_reg); v7, v6 with the
 * warpgroup-MMA kernel (moe_gemm_wg.cu) for 32-row tiles and taller where the device runs it
 * (use_wg); v8, v7 with the 16-row register kernel's codes decoded by a multiply (DQ_BITS)
 * instead of the pair table; v10, v8 with that kernel's A rows through shared memory where
 * K % 128 == 0 (AM_SMEM); v12, v10 with 32-row tiles on the register kernel where K % 128 == 0
 * (use_reg32: DeepSeek-V3 at 512 tokens 0.566 -> 0.448 ms); v13, v12 with the 16-row kernel in
 * AM_SMEM_WORD's order too (3-5% faster than v10 at 8-256 tokens; stop 28,
 * bench/results/final-h200-afc547e/; capped for 4 CTAs per SM the 32-row kernel spilled 144
 * bytes and was 12% slower at 512 tokens, final-h200-193c4b6/); v16, v13 with each
 * wgmma tile's MMAs as wide as its rows need (moe_gemm_wg.cu: DeepSeek-V3 at 2048 and 4096 tokens
 * 6-9% faster, bench/results/gemm-h200-v16-712ad9a/); v25, the default, v16 with a chunk's four
 * wgmmas in one asm statement (DeepSeek-V3 at 2048 tokens 8% faster, the same at 4096;
 * bench/results/gemm-h200-x4-7154382/). bench moe at 00142a7 on the H200:
 * v2 is 4-12% faster than v3 up to 128 tokens, v3 5% faster at 512 tokens on DeepSeek-V3 and even
 * elsewhere (bench/results/moe-v[23]-h200-*-00142a7.json). Read once. */
int moe_gemm_version(void) {
    static int v = 0;
    if (v == 0) {
        const char *env = getenv("NVFP4_MOE_GEMM");
        v = !env                      ? 25
            : strcmp(env, "v1") == 0  ? 1
            : strcmp(env, "v2") == 0  ? 2
            : strcmp(env, "v3") == 0  ? 3
            : strcmp(env, "v4") == 0  ? 4
            : strcmp(env, "v5") == 0  ? 5
            : strcmp(env, "v6") == 0  ? 6
            : strcmp(env, "v7") == 0  ? 7
            : strcmp(env, "v8") == 0  ? 8
            : strcmp(env, "v10") == 0 ? 10
            : strcmp(env, "v12") == 0 ? 12
            : strcmp(env, "v13") == 0 ? 13
            : strcmp(env, "v16") == 0 ? 16
                                      : 25;
    }
    return v;
}

/* Kernel v7: the warpgroup-MMA kernel (moe_gemm_wg.cu) for tiles of 32 rows and more where the
 * device runs it and K % 64 == 0; v6's kernels elsewhere, and its 16-row register kernel for
 * 16-row tiles, which is 9-12% faster there (bench moe on the H200, DeepSeek-V3 at 16-128
 * tokens; bench/results/wg-h200-v7/). */
static int wg_takes(int64_t k) {
    return moe_gemm_version() >= 7 && k % 64 == 0 && nvf_cuda_moe_gemm_wg_ok();
}

/* Kernel v12: 32-row tiles on the register kernel (two 16-row halves, A through shared memory
 * a weight word at a time, AM_SMEM_WORD) where K % 128 == 0, instead of the wgmma kernel. */
int moe_gemm_use_reg32(int64_t k, int32_t tile_rows) {
    return moe_gemm_version() >= 12 && tile_rows == 32 && k % 128 == 0;
}

int moe_gemm_use_wg(int64_t k, int32_t tile_rows) {
    return tile_rows >= 32 && wg_takes(k) && !moe_gemm_use_reg32(k, tile_rows);
}

extern "C" int nvf_cuda_moe_gemm_step(int64_t k, int32_t tile_rows) {
    int v = moe_gemm_version();
    if (moe_gemm_use_wg(k, tile_rows))
        return 1;
    return ((v == 2 || v >= 4) && tile_rows == 16 && k % 128 == 0) ||
                   moe_gemm_use_reg32(k, tile_rows)
               ? 2
               : 1;
}

int moe_gemm_use_tiled(int64_t k, int32_t tile_rows) {
    int v = moe_gemm_version();
    return !moe_gemm_use_wg(k, tile_rows) && !moe_gemm_use_reg32(k, tile_rows) && v != 1 &&
           k % 32 == 0 && (v == 3 || tile_rows >= 32);
}

extern "C" int nvf_cuda_moe_gemm_tall(int64_t k) {
    return wg_takes(k) ? 128 : moe_gemm_use_tiled(k, 32) ? 64 : 16;
}

extern "C" int nvf_cuda_moe_gemm_cta_rows(int64_t k, int32_t tile_rows) {
    return moe_gemm_use_tiled(k, tile_rows) ? 256 : 128;
}

/* What bounds each kernel's residency (ptxas -v at sm_90): the shared-memory kernel's
 * __launch_bounds__(256, 2) and its stages; the 16-row register kernel's 128 registers from v6
 * (4 CTAs of 128 threads), 152 before (3); the 64-row register kernel's 210-255 (2); the wgmma
 * kernel's shared memory (stages and the 32 KB table: 3 CTAs for 32-row tiles, 2 beyond). */
extern "C" int nvf_cuda_moe_gemm_ctas_per_sm(int64_t k, int32_t tile_rows) {
    if (moe_gemm_use_reg32(k, tile_rows))
        return REG32_CTAS;
    if (moe_gemm_use_wg(k, tile_rows))
        return tile_rows >= 64 ? 2 : 3;
    if (moe_gemm_use_tiled(k, tile_rows))
        return 2;
    if (tile_rows == 16)
        return moe_gemm_version() >= 6 ? 4 : 3;
    return 2;
}
