/*
 * Programmatic dependent launch (PDL, compute capability 9.0 and newer) for the MoE block's
 * kernels: each is launched with programmatic stream serialization, so the GPU may start it
 * while the kernel before it in the stream is still finishing (its CTAs take free SMs and run
 * up to pdl_wait), and each kernel calls pdl_wait before it reads or writes any memory that
 * another kernel touches, which holds it until the previous grid has completed and its writes
 * are visible. pdl_trigger lets the next kernel be launched once every CTA of this one has
 * called it (or exited). So every kernel still sees all earlier kernels' writes, in stream order,
 * and the outputs are the bytes of a launch without it; only the gaps between kernels shrink.
 *
 * Every kernel launched through moe_launch must call pdl_wait before its first access to
 * global memory other than its own constant inputs (weights and tables). On devices before 9.0,
 * or with NVFP4_MOE_PDL=0, the launches are plain and both calls do nothing.
 */
#ifndef NVFP4_KERNELS_MOE_LAUNCH_H
#define NVFP4_KERNELS_MOE_LAUNCH_H

#include <cuda_runtime.h>

#include <utility>

__device__ __forceinline__ void pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/** Whether launches on the current device use PDL: compute capability 9.0 or newer, unless
 * NVFP4_MOE_PDL=0 (read once; for side-by-side timing). */
int nvf_cuda_moe_pdl(void);

/** Launch `kernel` on `st` like <<<grid, block, smem, st>>>, with programmatic stream
 * serialization where nvf_cuda_moe_pdl(). */
template <typename... P, typename... A>
static inline cudaError_t moe_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                     cudaStream_t st, A &&...args) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = at;
    cfg.numAttrs = nvf_cuda_moe_pdl() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

#endif
