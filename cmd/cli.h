/*
 * The command-line framework: option tables that both parse arguments and print --help,
 * the options every command shares, the status -> exit code map, and logging to stderr.
 */
#ifndef NVFP4_CMD_CLI_H
#define NVFP4_CMD_CLI_H

#include <signal.h>
#include <stddef.h>

#include <cjson/cJSON.h>
#include <stdint.h>

/* Exit codes (SPEC section 2); pinned. */
enum {
    EXIT_OK = 0,
    EXIT_RUNTIME = 1,
    EXIT_USAGE = 2,
    EXIT_INVALID = 3,
    EXIT_NODEVICE = 4,
    EXIT_INTERRUPTED = 5,
};

typedef enum cli_opt_kind {
    CLI_FLAG,   /* int target set to 1 */
    CLI_STRING, /* const char * target */
    CLI_INT,    /* long target, decimal */
    CLI_LIST,   /* cli_list target, the option may repeat */
} cli_opt_kind;

typedef struct cli_list {
    const char **items;
    size_t n;
} cli_list;

typedef struct cli_opt {
    const char *name;    /* long name without the dashes */
    const char *metavar; /* NULL for flags */
    cli_opt_kind kind;
    void *target;
    const char *help;
} cli_opt;

/* The common options of SPEC section 2. Each command takes the subset its entry in main.c's
 * command table names; any other is a usage error, never silently ignored. */
typedef struct cli_common {
    const char *device;
    long threads;
    int json;
    int quiet;
    const char *log_level;
    const char *recipe;
} cli_common;

typedef struct cli_spec {
    const char *name;    /* "inspect" */
    const char *usage;   /* "CKPT [options]" */
    const char *summary; /* one line */
    const char *details; /* paragraphs after the usage, or NULL */
    const cli_opt *opts; /* the command's own options */
    size_t n_opts;
    int min_pos, max_pos; /* positional argument counts */
    cli_common *common;   /* NULL if the command takes none of the common options */
} cli_spec;

/* Bits of the common-options mask, one per option of cli_common. */
enum {
    CLI_COMMON_DEVICE = 1u << 0,
    CLI_COMMON_THREADS = 1u << 1,
    CLI_COMMON_JSON = 1u << 2,
    CLI_COMMON_QUIET = 1u << 3,
    CLI_COMMON_LOG_LEVEL = 1u << 4,
    CLI_COMMON_RECIPE = 1u << 5,
};
/* What every command that prints takes: --json, --quiet, --log-level. */
#define CLI_COMMON_OUTPUT (CLI_COMMON_JSON | CLI_COMMON_QUIET | CLI_COMMON_LOG_LEVEL)
#define CLI_COMMON_ALL                                                                             \
    (CLI_COMMON_OUTPUT | CLI_COMMON_DEVICE | CLI_COMMON_THREADS | CLI_COMMON_RECIPE)

/**
 * Set the common options the next cli_parse() accepts (main.c, from the command table, before
 * it runs the command). Until called, every common option is accepted.
 */
void cli_set_common_mask(unsigned mask);

/* Result of cli_parse other than EXIT_OK: help was printed, the caller returns 0. */
#define CLI_HELP_SHOWN (-1)

/**
 * Parse argv[1..] (argv[0] is the command name) against the spec. Positionals are returned in
 * pos (pointing into argv). Prints --help on stdout (returns CLI_HELP_SHOWN) and usage errors
 * on stderr (returns EXIT_USAGE). Sets up logging from the common options.
 */
int cli_parse(const cli_spec *spec, int argc, char **argv, const char **pos, int *npos);

/**
 * cli_parse for a command's entry: 1 when the command goes on; 0 when it must return *code
 * (EXIT_OK after --help, else the usage error's code).
 */
int cli_parse_args(const cli_spec *spec, int argc, char **argv, const char **pos, int *npos,
                   int *code);

/** Print a usage error for the command and return EXIT_USAGE. */
int cli_usage_error(const cli_spec *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/** Map a library status to the exit code (SPEC section 2). */
int cli_exit_code(int status);

/** Print "nvfp4tool CMD: error: <last library message>" to stderr, return its exit code. */
int cli_fail(const char *cmd, int status);

/** Free the list arrays cli_parse allocated for the spec's CLI_LIST options. */
void cli_free_lists(const cli_spec *spec);

/**
 * Count failed cJSON allocations (cJSON_InitHooks with a malloc that notes a NULL), so that
 * cli_print_json() never prints a document that lost a member; main() calls it first.
 */
void cli_json_init(void);

/**
 * Print a JSON document on stdout as one line (the --json output of every command).
 * @return EXIT_OK, or EXIT_RUNTIME after an out-of-memory message naming the command (also
 * when any cJSON allocation failed since cli_json_init(): the document may be incomplete).
 */
int cli_print_json(const char *cmd, const cJSON *doc);

/**
 * Catch SIGINT and SIGTERM: the returned flag becomes non-zero when one arrives, for the
 * library's long-running calls to poll (they stop cleanly, and the command exits 5).
 */
volatile sig_atomic_t *cli_catch_stop_signals(void);

/**
 * Until a command that writes files installs its own catcher (cli_catch_stop_signals, which
 * stops cleanly and removes temporaries), SIGINT/SIGTERM end the process with exit 5: a command
 * that only reads (inspect) has nothing to clean up. main() installs it first.
 */
void cli_exit_on_stop_signals(void);

/** Parse a size like "5GB", "8GiB", "512MB", "1000" (bytes). 0 on success. */
int cli_parse_size(uint64_t *out, const char *s);

#define CLI_EXIT_HELP                                                                              \
    "Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 validation failed / bad input file,\n"    \
    "            4 requested device unavailable, 5 interrupted.\n"

/* One function per command, cmd_<name>.c. */
int cmd_inspect(int argc, char **argv);
struct nvf_ckpt;
/** inspect (cmd_inspect_made.c): the "quantization" section of the recipe in the manifest of
 * this tool beside `ck` (method, arithmetic, ...) as a new object, or NULL (none, or a file). */
cJSON *inspect_made_with(const struct nvf_ckpt *ck);
/** Print "Made by nvfp4tool: method M, arithmetic A" when inspect_made_with() finds one. */
void inspect_print_made_with(const struct nvf_ckpt *ck);

/** inspect of a DST holding expert-parallel rank directories (cmd_inspect_ranks.c): *handled is
 * 1 when `dir` is one (and the exit code is returned), else 0. */
int inspect_ranks(const char *dir, int json, int *handled);
int cmd_quantize(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_moe(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_hash(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_merge(int argc, char **argv);

/**
 * The end of a command not built yet, once its options were parsed and checked: say so on
 * stderr and return EXIT_RUNTIME (README "Exit codes": a command not implemented yet is 1).
 */
int cli_not_implemented(const cli_spec *spec);

/**
 * Check the recipe a command not built yet will use: --recipe FILE (when given) on top of the
 * defaults, then the flag overrides `flags[i]` = `values[i]` (NULL values skipped), as
 * nvf_recipe_set() parses them. @return EXIT_OK, or the exit code after the error message.
 */
int cli_check_recipe(const cli_spec *spec, const char *const *flags, const char *const *values,
                     size_t n);

#endif
