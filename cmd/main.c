/*
 * nvfp4tool: FP8/BF16 -> NVFP4 checkpoint conversion, verification and validation.
 * The command table; each command lives in cmd_<name>.c. Only cmd/ calls exit().
 */
#include "cli.h"

#include "nvfp4/version.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command k_commands[] = {
    {"inspect", cmd_inspect, "detect the format, list tensors, summarize the MoE structure"},
    {"quantize", cmd_quantize, "quantize the 2-D tensors of one .safetensors file to NVFP4"},
    {"convert", cmd_convert, "convert a whole checkpoint directory to NVFP4 (the main job)"},
    {"verify", cmd_verify, "run every MoE layer's kernels and compare against references"},
    {"moe", cmd_moe, "run one MoE block of a checkpoint on given activations"},
    {"validate", cmd_validate, "CI gate: structure, loader compatibility, hashes, finiteness"},
    {"hash", cmd_hash, "write or check the SHA-256 manifest"},
    {"bench", cmd_bench, "performance tables: bench quant | bench moe"},
    {"synth", cmd_synth, "write a small deterministic realistic checkpoint"},
    {"merge", cmd_merge, "write the index and manifest of the union of --shard i/N outputs"},
};
#define N_COMMANDS (sizeof k_commands / sizeof k_commands[0])

static void print_usage(FILE *f) {
    fprintf(f, "Usage: nvfp4tool <command> [options]\n\n"
               "Turns FP8/BF16 LLM checkpoints into NVFP4 checkpoints for NVIDIA's 4-bit MoE\n"
               "kernels, and proves them right.\n\nCommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f, "\n'nvfp4tool <command> --help' describes each command.\n"
               "  --version   print the version\n\n" CLI_EXIT_HELP);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        print_usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("nvfp4tool %s\n", nvf_version());
        return EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(name, k_commands[i].name) == 0)
            return k_commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "nvfp4tool: unknown command '%s'\n\n", name);
    print_usage(stderr);
    return EXIT_USAGE;
}
