#include "cli.h"

#include "nvfp4/log.h"
#include "nvfp4/recipe.h"
#include "nvfp4/version.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const k_level_names[] = {"error", "warn", "info", "debug"};

static void stderr_sink(nvf_log_level level, const char *msg, void *user) {
    (void)user;
    fprintf(stderr, "nvfp4tool: %s: %s\n", k_level_names[level], msg);
}

static const struct {
    const char *name, *metavar, *help;
    unsigned bit;
} k_common_defs[] = {
    {"device", "auto|cpu|cuda[:N]", "where to compute (default auto: first working GPU, else CPU)",
     CLI_COMMON_DEVICE},
    {"threads", "N", "worker threads (default: all cores)", CLI_COMMON_THREADS},
    {"json", NULL, "machine-readable output on stdout", CLI_COMMON_JSON},
    {"quiet", NULL, "only errors on stderr", CLI_COMMON_QUIET},
    {"log-level", "LEVEL", "error|warn|info|debug (default info)", CLI_COMMON_LOG_LEVEL},
    {"recipe", "FILE.yaml", "quantization recipe", CLI_COMMON_RECIPE},
};
#define N_COMMON (sizeof k_common_defs / sizeof k_common_defs[0])

static unsigned g_common_mask = CLI_COMMON_ALL;

void cli_set_common_mask(unsigned mask) {
    g_common_mask = mask;
}

static cli_opt common_opt(cli_common *c, size_t i) {
    void *const targets[] = {&c->device, &c->threads,   &c->json,
                             &c->quiet,  &c->log_level, &c->recipe};
    const cli_opt_kind kinds[] = {CLI_STRING, CLI_INT, CLI_FLAG, CLI_FLAG, CLI_STRING, CLI_STRING};
    cli_opt o = {k_common_defs[i].name, k_common_defs[i].metavar, kinds[i], targets[i],
                 k_common_defs[i].help};
    return o;
}

static void print_opt_line(const char *name, const char *metavar, const char *help,
                           const char *suffix) {
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", name, metavar ? " " : "", metavar ? metavar : "");
    printf("  %-28s%s%s\n", left, help ? help : "", suffix);
}

static void print_help(const cli_spec *spec) {
    printf("Usage: nvfp4tool %s %s\n\n%s\n", spec->name, spec->usage, spec->summary);
    if (spec->details)
        printf("\n%s", spec->details);
    if (spec->n_opts > 0) {
        printf("\nOptions:\n");
        for (size_t i = 0; i < spec->n_opts; i++) {
            const cli_opt *o = &spec->opts[i];
            print_opt_line(o->name, o->metavar, o->help,
                           o->kind == CLI_LIST ? " (repeatable)" : "");
        }
    }
    printf("\n%s", spec->common && (g_common_mask & CLI_COMMON_ALL) ? "Common options:\n" : "");
    for (size_t i = 0; spec->common && i < N_COMMON; i++) {
        if (g_common_mask & k_common_defs[i].bit)
            print_opt_line(k_common_defs[i].name, k_common_defs[i].metavar, k_common_defs[i].help,
                           "");
    }
    printf("  -h, --help                  this help\n");
    printf("\n" CLI_EXIT_HELP);
}

int cli_usage_error(const cli_spec *spec, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "nvfp4tool %s: usage error: ", spec->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nUsage: nvfp4tool %s %s (see --help)\n", spec->name, spec->usage);
    return EXIT_USAGE;
}

static int set_value(const cli_spec *spec, const cli_opt *o, const char *val) {
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)o->target = 1;
        return EXIT_OK;
    case CLI_STRING:
        *(const char **)o->target = val;
        return EXIT_OK;
    case CLI_INT: {
        char *end;
        errno = 0;
        long v = strtol(val, &end, 10);
        if (errno != 0 || end == val || *end != '\0')
            return cli_usage_error(spec, "--%s takes an integer, got '%s'", o->name, val);
        *(long *)o->target = v;
        return EXIT_OK;
    }
    case CLI_LIST: {
        cli_list *l = o->target;
        const char **items = realloc(l->items, (l->n + 1) * sizeof *items);
        if (!items) {
            fprintf(stderr, "nvfp4tool %s: out of memory\n", spec->name);
            return EXIT_RUNTIME;
        }
        items[l->n++] = val;
        l->items = items;
        return EXIT_OK;
    }
    }
    return EXIT_USAGE;
}

void cli_free_lists(const cli_spec *spec) {
    for (size_t i = 0; i < spec->n_opts; i++) {
        if (spec->opts[i].kind == CLI_LIST) {
            cli_list *l = spec->opts[i].target;
            free(l->items);
            l->items = NULL;
            l->n = 0;
        }
    }
}

static int setup_logging(const cli_spec *spec, const cli_common *c) {
    nvf_log_level level = NVF_LOG_INFO;
    if (c && c->log_level) {
        int found = 0;
        for (int i = 0; i < 4; i++) {
            if (strcmp(c->log_level, k_level_names[i]) == 0) {
                level = (nvf_log_level)i;
                found = 1;
            }
        }
        if (!found)
            return cli_usage_error(spec, "--log-level takes error|warn|info|debug, got '%s'",
                                   c->log_level);
    }
    if (c && c->quiet)
        level = NVF_LOG_ERROR;
    nvf_log_set_sink(stderr_sink, NULL, level);
    return EXIT_OK;
}

int cli_parse(const cli_spec *spec, int argc, char **argv, const char **pos, int *npos) {
    int np = 0, only_pos = 0;
    cli_opt common[N_COMMON];
    if (spec->common) {
        memset(spec->common, 0, sizeof *spec->common);
        for (size_t i = 0; i < N_COMMON; i++)
            common[i] = common_opt(spec->common, i);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || strcmp(a, "-") == 0) {
            if (np >= spec->max_pos)
                return cli_usage_error(spec, "unexpected argument '%s'", a);
            pos[np++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            print_help(spec);
            return CLI_HELP_SHOWN;
        }
        if (a[1] != '-')
            return cli_usage_error(spec, "unknown option '%s'", a);
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_opt *o = NULL;
        for (size_t k = 0; k < spec->n_opts && !o; k++) {
            if (strlen(spec->opts[k].name) == name_len &&
                memcmp(spec->opts[k].name, name, name_len) == 0)
                o = &spec->opts[k];
        }
        for (size_t k = 0; spec->common && k < N_COMMON && !o; k++) {
            if (strlen(common[k].name) == name_len && memcmp(common[k].name, name, name_len) == 0) {
                if (!(g_common_mask & k_common_defs[k].bit))
                    return cli_usage_error(spec, "%s does not take --%s", spec->name,
                                           common[k].name);
                o = &common[k];
            }
        }
        if (!o)
            return cli_usage_error(spec, "unknown option '--%.*s'", (int)name_len, name);
        const char *val = NULL;
        if (o->kind == CLI_FLAG) {
            if (eq)
                return cli_usage_error(spec, "--%s takes no value", o->name);
        } else if (eq) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return cli_usage_error(spec, "--%s needs a value (%s)", o->name, o->metavar);
            val = argv[++i];
        }
        int rc = set_value(spec, o, val);
        if (rc != EXIT_OK)
            return rc;
    }
    if (np < spec->min_pos)
        return cli_usage_error(spec, "expected %d argument%s, got %d", spec->min_pos,
                               spec->min_pos == 1 ? "" : "s", np);
    if (spec->common && spec->common->threads < 0)
        return cli_usage_error(spec, "--threads must be >= 0, got %ld", spec->common->threads);
    *npos = np;
    return setup_logging(spec, spec->common);
}

int cli_exit_code(int status) {
    switch (status) {
    case NVF_OK:
        return EXIT_OK;
    case NVF_E_INVALID:
    case NVF_E_CONFIG:
        return EXIT_USAGE;
    case NVF_E_FORMAT:
    case NVF_E_SHAPE:
    case NVF_E_NONFINITE:
    case NVF_E_VERIFY:
        return EXIT_INVALID;
    case NVF_E_DEVICE:
        return EXIT_NODEVICE;
    case NVF_E_INTERRUPTED:
        return EXIT_INTERRUPTED;
    default:
        return EXIT_RUNTIME;
    }
}

int cli_fail(const char *cmd, int status) {
    const char *msg = nvf_error_last();
    fprintf(stderr, "nvfp4tool %s: error: %s\n", cmd, msg[0] ? msg : nvf_status_str(status));
    return cli_exit_code(status);
}

static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int sig) {
    (void)sig;
    g_stop_signal = 1;
}

static void on_stop_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

volatile sig_atomic_t *cli_catch_stop_signals(void) {
    on_stop_signals(on_stop_signal);
    return &g_stop_signal;
}

static void exit_interrupted(int sig) {
    (void)sig;
    static const char msg[] = "nvfp4tool: interrupted\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(EXIT_INTERRUPTED);
}

void cli_exit_on_stop_signals(void) {
    on_stop_signals(exit_interrupted);
}

/* Set when a cJSON allocation fails (any thread): a document the commands built with unchecked
 * Add calls may then lack a member, so cli_print_json() refuses to print it. */
static _Atomic int g_json_alloc_failed;

static void *json_malloc(size_t n) {
    void *p = malloc(n);
    if (!p)
        g_json_alloc_failed = 1;
    return p;
}

void cli_json_init(void) {
    cJSON_Hooks hooks = {json_malloc, free};
    cJSON_InitHooks(&hooks);
}

int cli_print_json(const char *cmd, const cJSON *doc) {
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    if (!text || g_json_alloc_failed) {
        free(text);
        fprintf(stderr, "nvfp4tool %s: error: out of memory writing the JSON output\n", cmd);
        return EXIT_RUNTIME;
    }
    printf("%s\n", text);
    free(text);
    return EXIT_OK;
}

int cli_parse_args(const cli_spec *spec, int argc, char **argv, const char **pos, int *npos,
                   int *code) {
    int rc = cli_parse(spec, argc, argv, pos, npos);
    *code = rc == CLI_HELP_SHOWN ? EXIT_OK : rc;
    return rc == EXIT_OK;
}

int cli_parse_size(uint64_t *out, const char *s) {
    return nvf_size_parse(out, s, strlen(s));
}

int cli_not_implemented(const cli_spec *spec) {
    fprintf(stderr,
            "nvfp4tool %s: not implemented yet in nvfp4tool %s (the options were checked; "
            "nothing was done)\n",
            spec->name, nvf_version());
    return EXIT_RUNTIME;
}

int cli_check_recipe(const cli_spec *spec, const char *const *flags, const char *const *values,
                     size_t n) {
    nvf_recipe r;
    int st = nvf_recipe_init(&r);
    if (st == NVF_OK && spec->common && spec->common->recipe)
        st = nvf_recipe_load(&r, spec->common->recipe);
    for (size_t i = 0; st == NVF_OK && i < n; i++) {
        if (values[i])
            st = nvf_recipe_set(&r, flags[i], values[i]);
    }
    nvf_recipe_free(&r);
    if (st == NVF_OK)
        return EXIT_OK;
    if (cli_exit_code(st) == EXIT_USAGE)
        return cli_usage_error(spec, "%s", nvf_error_last());
    return cli_fail(spec->name, st);
}
