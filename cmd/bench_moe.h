/*
 * `nvfp4tool bench moe` (cmd/cmd_bench_moe.c), called by cmd_bench.c with the parsed options.
 */
#ifndef NVFP4_CMD_BENCH_MOE_H
#define NVFP4_CMD_BENCH_MOE_H

#include "cli.h"

#include "nvfp4/backend.h"
#include "nvfp4/device.h"

typedef struct bench_moe_args {
    const char *shape;       /* deepseek-v3 | qwen3-30b-a3b | gpt-oss-120b (NULL: deepseek-v3) */
    const char *tokens;      /* comma list (NULL: 1,2,4,...,4096) */
    const char *precision;   /* w4a16 | w4a4 | all (NULL: all) */
    const char *baseline;    /* JSON of bench/moe_baseline.py, or NULL */
    const char *router_bias; /* DeepSeek-V3's correction bias range R: (-R, R) (NULL: 0) */
    int eager;               /* launch the kernels one by one instead of a CUDA graph */
    long ep;                 /* expert-parallel ranks (0: 8 for deepseek-v3, else 1) */
    long runs;
    int json;
} bench_moe_args;

/** Run `bench moe` on backend `b`. @return an exit code (usage errors through `spec`). */
int bench_moe(nvf_backend *b, const nvf_device *dev, const bench_moe_args *a, const cli_spec *spec);

#endif
