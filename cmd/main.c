/*
 * nvfp4tool: FP8/BF16 -> NVFP4 checkpoint conversion, verification and validation.
 * The command table; each command lives in cmd_<name>.c. Only cmd/ calls exit().
 * Each entry names the common options (SPEC section 2) the command uses; cli_parse() rejects
 * the others with exit 2 (e.g. hash computes nothing on a device, so it takes no --device).
 */
#include "cli.h"

#include "nvfp4/version.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    unsigned common; /* CLI_COMMON_* bits */
    const char *summary;
} command;

#define OUT CLI_COMMON_OUTPUT
#define THR CLI_COMMON_THREADS

static const command k_commands[] = {
    {"inspect", cmd_inspect, OUT | CLI_COMMON_RECIPE,
     "detect the format, list tensors, summarize the MoE structure"},
    {"quantize", cmd_quantize, CLI_COMMON_ALL,
     "quantize the 2-D tensors of one .safetensors file to NVFP4"},
    {"convert", cmd_convert, CLI_COMMON_ALL,
     "convert a whole checkpoint directory to NVFP4 (the main job)"},
    {"verify", cmd_verify, CLI_COMMON_ALL,
     "run every MoE layer's kernels and compare against references"},
    {"moe", cmd_moe, CLI_COMMON_ALL, "run one MoE block of a checkpoint on given activations"},
    {"validate", cmd_validate, CLI_COMMON_ALL,
     "CI gate: structure, loader compatibility, hashes, finiteness"},
    {"hash", cmd_hash, OUT | THR, "write or check the SHA-256 manifest"},
    {"bench", cmd_bench, OUT | THR | CLI_COMMON_DEVICE,
     "performance tables: bench quant | bench moe"},
    {"synth", cmd_synth, OUT | THR, "write a small deterministic realistic checkpoint"},
    {"merge", cmd_merge, OUT | THR,
     "write the index and manifest of the union of --shard i/N outputs"},
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
    cli_json_init();
    cli_exit_on_stop_signals();
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
        if (strcmp(name, k_commands[i].name) == 0) {
            cli_set_common_mask(k_commands[i].common);
            return k_commands[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "nvfp4tool: unknown command '%s'\n\n", name);
    print_usage(stderr);
    return EXIT_USAGE;
}
