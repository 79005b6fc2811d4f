/*
 * nvfp4tool hash: write the SHA-256 manifest of a checkpoint directory, or check the directory
 * against it (--check).
 */
#include "cli.h"

#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/manifest.h"
#include "nvfp4/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static cli_common g_common;
static int g_check, g_tensors;

static const cli_opt k_opts[] = {
    {"check", NULL, CLI_FLAG, &g_check, "check CKPT against its manifest instead of writing it"},
    {"tensors", NULL, CLI_FLAG, &g_tensors,
     "--check also compares every tensor's dtype, shape and CRC-32 (writing always records them)"},
};

static const cli_spec k_spec = {
    .name = "hash",
    .usage = "CKPT [--check] [--tensors] [options]",
    .summary = "Write or check the SHA-256 manifest of a checkpoint.",
    .details =
        "Without --check: hashes every regular file under the directory CKPT (recursively;\n"
        "not " NVF_MANIFEST_NAME " itself nor *.tmp files) with SHA-256, computes the\n"
        "CRC-32 of every tensor of every .safetensors file, and writes CKPT/" NVF_MANIFEST_NAME "\n"
        "(schemas/manifest.schema.json). The recipe, target, source and summary of an existing\n"
        "manifest are kept; its files and tensors are replaced. Files are hashed in --threads\n"
        "worker threads, biggest first; the manifest is the same whatever the thread count.\n"
        "\n"
        "With --check: reads every byte of every listed file and prints one line per finding:\n"
        "  MISSING name | SIZE name: actual != listed | SHA256 name: got X expected Y |\n"
        "  EXTRA name (a file present but not listed; only the manifest is exempt) |\n"
        "  CRC32 file:tensor: got X expected Y | TENSOR file:tensor: got DTYPE [shape]\n"
        "  expected DTYPE [shape] (both with --tensors)\n"
        "then 'hash check: N files ok, M findings'. --json prints one report object instead.\n"
        "Exit 0 when clean, 3 with findings or when the manifest is missing or malformed,\n"
        "1 on I/O errors (CKPT missing or unreadable included), 5 on SIGINT/SIGTERM (nothing\n"
        "is written then).\n",
    .opts = k_opts,
    .n_opts = sizeof k_opts / sizeof k_opts[0],
    .min_pos = 1,
    .max_pos = 1,
    .common = &g_common,
};

/* Progress ------------------------------------------------------------------------------------ */

typedef struct progress {
    int tty;
    double start, last;
    int drawn;
} progress;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Called under the library's lock. A TTY gets one line redrawn at most 10 times a second;
 * anything else a log line per file. */
static void on_progress(void *user, const char *name, uint64_t done, uint64_t total) {
    progress *p = user;
    if (!p->tty) {
        if (name)
            nvf_log(NVF_LOG_INFO, "hashed %s; %.1f of %.1f MB done", name, (double)done / 1e6,
                    (double)total / 1e6);
        return;
    }
    double t = now_s();
    if (name || t - p->last < 0.1)
        return;
    p->last = t;
    double rate = t > p->start ? (double)done / (t - p->start) : 0.0;
    fprintf(stderr, "\rhashing: %.2f / %.2f GB (%3.0f%%) %.0f MB/s   ", (double)done / 1e9,
            (double)total / 1e9, total ? 100.0 * (double)done / (double)total : 100.0, rate / 1e6);
    p->drawn = 1;
}

static void progress_end(progress *p) {
    if (p->drawn)
        fprintf(stderr, "\r\033[K");
}

/* Modes ------------------------------------------------------------------------------------------
 */

/* @return EXIT_OK, or EXIT_RUNTIME when out of memory for the document. */
static int print_json(cJSON *j) {
    int rc = cli_print_json(k_spec.name, j);
    cJSON_Delete(j);
    return rc;
}

static int write_manifest(const char *dir, const char *path, const nvf_hash_opts *opts,
                          progress *pr) {
    nvf_manifest *old = NULL, *m = NULL;
    int rc = NVF_OK, printed = EXIT_OK;
    if (nvf_path_is_file(path)) {
        rc = nvf_manifest_read(&old, path);
        if (rc != NVF_OK)
            goto done;
    }
    rc = nvf_manifest_hash_dir(&m, dir, opts);
    progress_end(pr);
    if (rc != NVF_OK)
        goto done;
    if (old) {
        /* Keep what the conversion recorded; only the hashes are this run's. */
        nvf_manifest_move_provenance(m, old);
    }
    rc = nvf_manifest_write(path, m);
    if (rc != NVF_OK)
        goto done;
    uint64_t bytes = 0;
    for (size_t i = 0; i < m->n_files; i++)
        bytes += m->files[i].bytes;
    if (g_common.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "manifest", path);
        cJSON_AddNumberToObject(j, "files", (double)m->n_files);
        cJSON_AddNumberToObject(j, "bytes", (double)bytes);
        cJSON_AddNumberToObject(j, "tensors", (double)m->n_tensors);
        printed = print_json(j);
    } else {
        printf("hash: wrote %s: %zu files, %" PRIu64 " bytes, %zu tensors\n", path, m->n_files,
               bytes, m->n_tensors);
    }
done:
    nvf_manifest_free(old);
    nvf_manifest_free(m);
    return rc == NVF_OK ? printed : cli_fail(k_spec.name, rc);
}

static cJSON *report_json(const char *path, const nvf_manifest_report *r) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "manifest", path);
    cJSON_AddBoolToObject(j, "ok", r->n_findings == 0);
    cJSON_AddNumberToObject(j, "files_listed", (double)r->files_listed);
    cJSON_AddNumberToObject(j, "files_ok", (double)r->files_ok);
    cJSON_AddNumberToObject(j, "tensors_checked", (double)r->tensors_checked);
    cJSON *arr = cJSON_AddArrayToObject(j, "findings");
    for (size_t i = 0; arr && i < r->n_findings; i++) {
        const nvf_manifest_finding *f = &r->findings[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", nvf_finding_kind_name(f->kind));
        cJSON_AddStringToObject(o, "name", f->name);
        if (f->got)
            cJSON_AddStringToObject(o, "got", f->got);
        else
            cJSON_AddNullToObject(o, "got");
        if (f->expected)
            cJSON_AddStringToObject(o, "expected", f->expected);
        else
            cJSON_AddNullToObject(o, "expected");
        cJSON_AddStringToObject(o, "message", f->line);
        cJSON_AddItemToArray(arr, o);
    }
    return j;
}

static int check_manifest(const char *dir, const char *path, const nvf_hash_opts *opts,
                          progress *pr) {
    nvf_manifest *m = NULL;
    nvf_manifest_report *r = NULL;
    if (!nvf_path_is_file(path)) {
        fprintf(stderr, "nvfp4tool hash: error: no manifest '%s'\n", path);
        return EXIT_INVALID;
    }
    int rc = nvf_manifest_read(&m, path);
    if (rc == NVF_OK)
        rc = nvf_manifest_check_dir(&r, dir, m, opts);
    progress_end(pr);
    int code = EXIT_OK;
    if (rc != NVF_OK) {
        code = cli_fail(k_spec.name, rc);
    } else if (g_common.json) {
        code = print_json(report_json(path, r));
        if (code == EXIT_OK && r->n_findings)
            code = EXIT_INVALID;
    } else {
        for (size_t i = 0; i < r->n_findings; i++)
            printf("%s\n", r->findings[i].line);
        printf("hash check: %zu files ok, %zu findings\n", r->files_ok, r->n_findings);
        code = r->n_findings ? EXIT_INVALID : EXIT_OK;
    }
    nvf_manifest_report_free(r);
    nvf_manifest_free(m);
    return code;
}

int cmd_hash(int argc, char **argv) {
    const char *pos[1];
    int np = 0;
    int rc;
    if (!cli_parse_args(&k_spec, argc, argv, pos, &np, &rc))
        return rc;
    const char *dir = pos[0];
    if (g_common.threads > 1024)
        return cli_usage_error(&k_spec, "--threads is at most 1024, got %ld", g_common.threads);
    struct stat st;
    if (stat(dir, &st) != 0) {
        /* Missing, unreadable, a symbolic-link loop: an I/O error, as in the other commands. */
        fprintf(stderr, "nvfp4tool hash: error: cannot open checkpoint directory '%s': %s\n", dir,
                strerror(errno));
        return EXIT_RUNTIME;
    }
    if (!S_ISDIR(st.st_mode))
        return cli_usage_error(&k_spec, "'%s' is not a checkpoint directory", dir);
    char *path = nvf_path_join(dir, NVF_MANIFEST_NAME);
    if (!path) {
        fprintf(stderr, "nvfp4tool hash: out of memory\n");
        return EXIT_RUNTIME;
    }
    progress pr = {isatty(STDERR_FILENO) && !g_common.quiet, now_s(), 0.0, 0};
    nvf_hash_opts opts = {(int)g_common.threads, g_tensors, on_progress, &pr,
                          cli_catch_stop_signals()};
    if (g_common.quiet)
        opts.progress = NULL;
    int code =
        g_check ? check_manifest(dir, path, &opts, &pr) : write_manifest(dir, path, &opts, &pr);
    free(path);
    return code;
}
