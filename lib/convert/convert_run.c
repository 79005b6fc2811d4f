/*
 * nvf_convert_run: one conversion from start to end (SPEC sections 5 and 6).
 *   1. open SRC, list its files (links outside SRC: a warning, or refused), plan the outputs
 *      with the target (modelopt);
 *   2. open DST (create, lock, check, clear);
 *   3. the journal key; with --resume, reuse the shards the journal recorded;
 *   4. the pipeline (compute, write, hash the sources), then remove stale shards;
 *   5. finish: index, metadata, side files, manifest; or, for a part of --shard i/N, only its
 *      part record (convert_parts.c; `merge` finishes the union);
 *   6. release DST: after a failure nothing that looks complete is left.
 */
#include "convert_internal.h"
#include "convert_profile.h"

#include "ckpt/ckpt_docs.h"
#include "io/json_strict.h"
#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX_BYTES ((size_t)64 << 20)

void nvf_convert_options_init(nvf_convert_options *o, const char *src, const char *dst,
                              const nvf_recipe *recipe) {
    memset(o, 0, sizeof *o);
    o->src = src;
    o->dst = dst;
    o->recipe = recipe;
    o->device.kind = NVF_DEVICE_CPU;
    snprintf(o->device.name, sizeof o->device.name, "cpu");
    o->max_host_memory = (uint64_t)8 << 30;
}

static int same_dir(const char *a, const char *b) {
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    int same = ra && rb && strcmp(ra, rb) == 0;
    free(ra);
    free(rb);
    return same;
}

/* The target of the recipe; the scale layout and the expert-parallel split are the prepared
 * targets' (a modelopt checkpoint has linear scales and no ranks). */
const cv_target *cv_find_target(const nvf_recipe *r) {
    if (r->target == NVF_TARGET_FORMAT_PREPARED_W4A16)
        return &cv_target_prepared_w4a16;
    if (r->target == NVF_TARGET_FORMAT_PREPARED_W4A4)
        return &cv_target_prepared_w4a4;
    if (r->scale_layout != NVF_SCALE_LAYOUT_128X4 || r->ep != 1) {
        nvf_error_set(NVF_E_INVALID,
                      "--scale-layout and --ep (target.scale_layout, target.ep) apply to the "
                      "prepared targets only, not to --target modelopt");
        return NULL;
    }
    return &cv_target_modelopt;
}

/*
 * The source's config.json: a directory's is read with the checkpoint; a single shard takes the
 * one beside it, and without one the output would not be a loadable checkpoint: refused.
 */
int cv_source_config(cJSON **out, const nvf_ckpt *ck) {
    *out = NULL;
    if (!ck->is_file)
        return NVF_OK;
    char *path = nvf_path_join(ck->dir, "config.json");
    int rc = path ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory");
    if (rc == NVF_OK && !nvf_path_is_file(path))
        rc = nvf_error_set(NVF_E_INVALID,
                           "'%s' is a single shard and '%s' has no config.json: convert the "
                           "checkpoint directory, or put the model's config.json beside the shard",
                           ck->path, ck->dir);
    if (rc == NVF_OK)
        rc = nvf_json_read_strict(out, path, CONFIG_MAX_BYTES, "config file", 0);
    if (rc == NVF_OK && !cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        rc = nvf_error_set(NVF_E_FORMAT, "invalid config file '%s': not a JSON object", path);
    }
    free(path);
    return rc;
}

/* Progress counts source bytes: every job's, a reused shard's at once. */
static void count_source_bytes(cv_run *r) {
    cv_plan *p = r->p;
    for (size_t s = 0; s < p->n_shards; s++) {
        cv_shard *sh = &p->shards[s];
        if (sh->other)
            continue;
        sh->source_bytes = 0;
        for (size_t j = sh->first_job; j < sh->first_job + sh->n_jobs; j++)
            sh->source_bytes += p->jobs[j].bytes_in;
        r->prog.bytes_total += sh->source_bytes;
        r->prog.tensors_total += sh->n_out;
        r->prog.shards_total++;
    }
}

/* The message of an interrupted run: which finished shards DST keeps, and how to go on. */
static int interrupted(const cv_run *r) {
    const cv_plan *p = r->p;
    char list[512] = "";
    size_t kept = 0, len = 0;
    size_t mine = 0;
    for (size_t s = 0; s < p->n_shards; s++) {
        mine += !p->shards[s].other;
        if (!p->shards[s].reused && !p->shards[s].written)
            continue;
        if (kept++ < 4 && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", kept > 1 ? ", " : "",
                                    p->shards[s].name);
    }
    if (kept == 0)
        return nvf_error_set(NVF_E_INTERRUPTED,
                             "interrupted before a shard was finished; nothing was kept in '%s'",
                             r->opt->dst);
    return nvf_error_set(NVF_E_INTERRUPTED,
                         "interrupted; '%s' keeps %zu of %zu shards (%s%s): run the same command "
                         "with --resume to continue",
                         r->opt->dst, kept, mine, list, kept > 4 ? ", ..." : "");
}

int nvf_convert_run(nvf_convert_summary *out, const nvf_convert_options *opt) {
    cv_prof_reset();
    int rc = cv_convert_run_ordered(out, opt, NULL);
    cv_prof_end();
    return rc;
}

int cv_convert_run_ordered(nvf_convert_summary *out, const nvf_convert_options *opt,
                           const cJSON *order) {
    nvf_ckpt *ck = NULL;
    cJSON *config = NULL;
    cv_dst *dst = NULL;
    cv_run r;
    int rc, complete = 0, ordered = 0;
    memset(&r, 0, sizeof r);
    memset(out, 0, sizeof *out);
    r.opt = opt;
    if (opt->shard_count < 0 || opt->shard_count > NVF_CONVERT_MAX_PARTS ||
        (opt->shard_count > 0 && (opt->shard_index < 0 || opt->shard_index >= opt->shard_count))) {
        rc = nvf_error_set(NVF_E_INVALID, "--shard %d/%d: expected I/N with 0 <= I < N <= %d",
                           opt->shard_index, opt->shard_count, NVF_CONVERT_MAX_PARTS);
        goto done;
    }
    if ((rc = nvf_recipe_check(opt->recipe)) != NVF_OK)
        goto done;
    if (!(r.target = cv_find_target(opt->recipe))) {
        rc = nvf_error_code();
        goto done;
    }
    if (r.target == &cv_target_modelopt && cv_unprepare_is_prepared(opt->src)) {
        /* the inverse of a prepared target: one job (it converts a temporary ModelOpt copy) */
        rc = opt->shard_count > 0
                 ? nvf_error_set(NVF_E_INVALID,
                                 "--shard %d/%d: '%s' is a prepared checkpoint, and its inverse "
                                 "(--target modelopt) runs as one job",
                                 opt->shard_index, opt->shard_count, opt->src)
                 : cv_unprepare_run(out, opt);
        goto done;
    }
    if ((rc = nvf_ckpt_open(&ck, opt->src)) != NVF_OK)
        goto done;
    r.ck = ck;
    if (nvf_path_is_dir(opt->dst) && same_dir(ck->dir, opt->dst)) {
        rc = nvf_error_set(NVF_E_INVALID, "DST '%s' is the source directory", opt->dst);
        goto done;
    }
    if ((rc = cv_sources_list(&r.src, ck, opt->no_follow_outside)) != NVF_OK ||
        (rc = cv_source_config(&config, ck)) != NVF_OK ||
        (rc = r.target->plan(&r.p, ck, opt)) != NVF_OK ||
        (order &&
         (rc = cv_plan_order(r.p, order, opt->recipe->max_shard_size, &ordered)) != NVF_OK) ||
        (rc = cv_dst_open(&dst, opt, &r.src)) || (rc = cv_journal_start(&r)) != NVF_OK)
        goto done;
    if (opt->shard_count > 0 && (rc = cv_parts_select(&r)) != NVF_OK)
        goto done;
    count_source_bytes(&r);
    /* A part never finds the whole output complete: the merge decides that. */
    if (opt->shard_count == 0 && (rc = cv_journal_complete(&r, &complete)) != NVF_OK)
        goto done;
    if (complete) {
        nvf_log(NVF_LOG_INFO, "resume: '%s' already holds this conversion, verified; nothing to do",
                opt->dst);
        *out = r.p->counts;
        out->shards = out->shards_reused = r.p->n_shards;
        for (size_t s = 0; s < r.p->n_shards; s++)
            out->bytes_out += r.p->shards[s].file_bytes;
        goto done;
    }
    if ((rc = cv_dst_clear(dst, opt->force && !opt->resume, r.p)) != NVF_OK ||
        (rc = cv_dst_make_ranks(opt->dst, r.p)) != NVF_OK ||
        (opt->resume && (rc = cv_journal_resume(&r)) != NVF_OK))
        goto done;
    nvf_log(NVF_LOG_INFO,
            "converting %zu tensors (%llu to quantize) into %zu output tensors in %zu shards on %s",
            ck->n_tensors, (unsigned long long)r.p->counts.tensors_quantized, r.p->n_outs,
            r.p->n_shards, opt->device.name);
    if (opt->shard_count > 0)
        nvf_log(NVF_LOG_INFO, "part %d of %d (--shard %d/%d): %llu of the %zu shards",
                opt->shard_index, opt->shard_count, opt->shard_index, opt->shard_count,
                (unsigned long long)r.prog.shards_total, r.p->n_shards);
    rc = cv_pipeline_run(&r);
    if (rc == NVF_E_INTERRUPTED)
        rc = interrupted(&r);
    uint64_t t = cv_prof_now();
    /* A part leaves stale shards to the merge (other parts may be writing beside it). */
    if (rc == NVF_OK && opt->shard_count == 0)
        rc = cv_dst_remove_stale(opt->dst, r.p);
    if (rc == NVF_OK && opt->shard_count > 0) {
        rc = cv_parts_write(&r);
        *out = r.p->counts;
        for (size_t s = 0; s < r.p->n_shards; s++)
            if (!r.p->shards[s].other) {
                out->shards++;
                out->bytes_out += r.p->shards[s].file_bytes;
            }
    } else if (rc == NVF_OK) {
        cv_finish_args fa = {
            .dst = opt->dst,
            .target = r.target,
            .plan = r.p,
            .recipe = opt->recipe,
            .source_config = config ? config : nvf_ckpt_config_doc(ck),
            .mixed = opt->keep_source_precision && cJSON_GetArraySize(r.p->fp8_modules) > 0,
            .sources = &r.src,
            .source_format = nvf_ckpt_format_name(ck->quant.format),
            .source_hf_quant_config = nvf_ckpt_hf_quant_config_doc(ck),
        };
        rc = cv_finish_outputs(out, &fa);
    }
    cv_prof_add(CV_P_FINISH, t);
done:
    cv_dst_close(dst, rc != NVF_OK);
    free(r.key);
    free(r.journal_path);
    cJSON_Delete(r.part_fp);
    cJSON_Delete(r.journal);
    cv_sources_free(&r.src);
    cv_plan_free(r.p);
    cJSON_Delete(config);
    nvf_ckpt_close(ck);
    return rc;
}
