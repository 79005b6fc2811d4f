/*
 * nvf_merge_run: the union of the parts of `convert --shard i/N` (SPEC section 6), in order:
 *   1. lock DST (DST/.nvfp4-convert.lock, as a conversion does) and read the part records;
 *   2. the parts: one N, all N present, none still running (its lock held), one fingerprint;
 *   3. the plan again, from the SRC, recipe and options that part 0 recorded; the fingerprint
 *      computed again from them and from SRC as it is now must be the parts' (SRC unchanged since,
 *      same tool version);
 *   4. every planned shard in exactly one part, with the planned tensors in the planned order;
 *      its file in DST with the recorded size (--rehash: SHA-256 and CRC-32s too); every source
 *      file hashed by exactly one part;
 *   5. stale shards of earlier runs removed, then the finish of a one-job conversion
 *      (convert_finish.c) from the records' hashes: so the same bytes;
 *   6. .nvfp4-parts removed, after the manifest: a merge stopped before that can be run again.
 */
#include "convert_internal.h"

#include "ckpt/ckpt_docs.h"
#include "nvfp4/fileio.h"
#include "nvfp4/log.h"
#include "nvfp4/pool.h"
#include "nvfp4/status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The faults found, joined by "; " (the first few), for one NVF_E_VERIFY message. */
typedef struct faults {
    char text[2048];
    size_t len, n;
} faults;

__attribute__((format(printf, 2, 3))) static void fault(faults *f, const char *fmt, ...) {
    if (f->n++ >= 8 || f->len + 8 >= sizeof f->text)
        return;
    if (f->len)
        f->len += (size_t)snprintf(f->text + f->len, sizeof f->text - f->len, "; ");
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(f->text + f->len, sizeof f->text - f->len, fmt, ap);
    va_end(ap);
    f->len = k < 0 ? f->len : f->len + (size_t)k;
    if (f->len >= sizeof f->text)
        f->len = sizeof f->text - 1;
}

static int faults_done(const faults *f, const char *dst) {
    if (f->n == 0)
        return NVF_OK;
    return nvf_error_set(NVF_E_VERIFY, "cannot merge '%s': %s%s", dst, f->text,
                         f->n > 8 ? "; ..." : "");
}

static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Step 2 without the fingerprint: one N, every part, none running. */
static int check_parts(const nvf_merge_options *o, const cv_part *parts, size_t n) {
    faults f = {.len = 0};
    if (n == 0) {
        char *m = nvf_path_join(o->dst, NVF_MANIFEST_NAME);
        int merged = m && nvf_path_is_file(m);
        free(m);
        return nvf_error_set(NVF_E_VERIFY, "no part records in '%s/%s'%s", o->dst,
                             NVF_CONVERT_PARTS_DIR,
                             merged ? " (DST holds a manifest: already merged; `hash --check` "
                                      "verifies it)"
                                    : ": run `convert SRC DST --shard I/N` for I = 0 .. N-1 first");
    }
    int count = parts[0].count;
    if (parts[n - 1].count != count) {
        /* Sorted by count: one group per split, "N=2: 0-of-2.json; N=3: 0-of-3.json, ...". */
        char list[1024] = "";
        size_t len = 0;
        for (size_t i = 0; i < n && len < sizeof list; i++) {
            if (i == 0 || parts[i].count != parts[i - 1].count)
                len += (size_t)snprintf(list + len, sizeof list - len, "%sN=%d: ", i ? "; " : "",
                                        parts[i].count);
            else
                len += (size_t)snprintf(list + len, sizeof list - len, ", ");
            if (len < sizeof list)
                len += (size_t)snprintf(list + len, sizeof list - len, "%s", base(parts[i].path));
        }
        fault(&f, "part records of different splits (%s): keep the records of one split", list);
    }
    if (f.n)
        return faults_done(&f, o->dst);
    /* A part still running (its record not yet written, or being written again) first. */
    for (int k = 0; k < count; k++) {
        char *lock = cv_parts_path(o->dst, k, count, ".lock");
        int fd = lock ? open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
            close(fd);
            int rc = nvf_error_set(NVF_E_IO, "part %d-of-%d is still running (it holds '%s')", k,
                                   count, lock);
            free(lock);
            return rc;
        }
        if (fd >= 0)
            close(fd);
        free(lock);
    }
    for (int k = 0, i = 0; k < count; k++) {
        if ((size_t)i < n && parts[i].index == k) {
            i++;
            continue;
        }
        fault(&f, "part %d-of-%d is missing (no %s/%d-of-%d.json: run `convert --shard %d/%d`)", k,
              count, NVF_CONVERT_PARTS_DIR, k, count, k, count);
    }
    return faults_done(&f, o->dst);
}

/* Which part of the fingerprint differs, for the message. */
static const char *differs_in(const cJSON *a, const cJSON *b) {
    static const char *const keys[] = {"tool_version", "recipe", "options", "sources"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (!cJSON_Compare(cJSON_GetObjectItem(a, keys[k]), cJSON_GetObjectItem(b, keys[k]), 1))
            return keys[k];
    return "fingerprint_sha256";
}

static int check_fingerprints(const nvf_merge_options *o, const cv_part *parts, size_t n) {
    faults f = {.len = 0};
    for (size_t i = 1; i < n; i++)
        if (strcmp(parts[i].fp_sha, parts[0].fp_sha) != 0)
            fault(&f,
                  "part %d-of-%d has another fingerprint than part 0-of-%d (its %s differs: "
                  "another source, recipe, option or tool version)",
                  parts[i].index, parts[i].count, parts[0].count,
                  differs_in(parts[i].fp, parts[0].fp));
    return faults_done(&f, o->dst);
}

/* The conversion the parts ran: options and recipe from part 0's record. */
typedef struct rebuilt {
    nvf_recipe recipe;
    int recipe_ok;
    nvf_convert_options opt;
    nvf_ckpt *ck;
    cJSON *config;
    cv_sources src;
    cv_plan *p;
    const cv_target *target;
} rebuilt;

static int opt_flag(const cJSON *opts, const char *key) {
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(opts, key));
}

/* Name the first source file whose name, size or mtime differs between the parts and now. */
static void changed_source(char *why, size_t cap, const cJSON *was, const cJSON *now) {
    const cJSON *a = was ? was->child : NULL, *b = now ? now->child : NULL;
    for (; a && b; a = a->next, b = b->next)
        if (!cJSON_Compare(a, b, 1))
            break;
    const cJSON *name = cJSON_GetObjectItem(a ? a : b, "name");
    snprintf(why, cap, "source file '%s' %s since the parts ran",
             cJSON_IsString(name) ? name->valuestring : "?",
             a && b ? "changed (size or mtime)"
             : a    ? "is gone"
                    : "is new");
}

static int rebuild(rebuilt *b, const nvf_merge_options *o, const cv_part *p0) {
    const cJSON *fp = p0->fp, *opts = cJSON_GetObjectItemCaseSensitive(fp, "options");
    const cJSON *recipe = cJSON_GetObjectItemCaseSensitive(fp, "recipe");
    const cJSON *amax = cJSON_GetObjectItemCaseSensitive(p0->doc, "input_amax");
    const char *src = cJSON_GetObjectItemCaseSensitive(p0->doc, "src")->valuestring;
    int rc = nvf_recipe_init(&b->recipe);
    b->recipe_ok = rc == NVF_OK;
    char *text = cJSON_IsObject(recipe) ? cJSON_PrintUnformatted(recipe) : NULL;
    if (rc == NVF_OK && !cJSON_IsObject(opts))
        rc = nvf_error_set(NVF_E_FORMAT,
                           "invalid part record '%s': no fingerprint options or recipe", p0->path);
    else if (rc == NVF_OK && !text)
        rc = nvf_error_set(NVF_E_FORMAT, "invalid part record '%s': no recipe", p0->path);
    if (rc == NVF_OK) {
        rc = nvf_recipe_parse(&b->recipe, text, strlen(text), p0->path);
        if (rc != NVF_OK)
            rc = nvf_error_set(NVF_E_FORMAT, "invalid part record '%s': %s", p0->path,
                               nvf_error_last());
    }
    free(text);
    if (rc != NVF_OK)
        return rc;
    nvf_convert_options_init(&b->opt, src, o->dst, &b->recipe);
    b->opt.keep_source_precision = opt_flag(opts, "keep_source_precision");
    b->opt.strict = opt_flag(opts, "strict");
    b->opt.allow_nonfinite = opt_flag(opts, "allow_nonfinite");
    b->opt.allow_empty = opt_flag(opts, "allow_empty");
    b->opt.no_follow_outside = opt_flag(opts, "no_follow_outside");
    b->opt.input_amax_path = cJSON_IsString(amax) ? amax->valuestring : NULL;
    b->opt.threads = o->threads;
    if (!(b->target = cv_find_target(&b->recipe)))
        return nvf_error_code();
    if ((rc = nvf_ckpt_open(&b->ck, src)) != NVF_OK ||
        (rc = cv_sources_list(&b->src, b->ck, b->opt.no_follow_outside)) != NVF_OK ||
        (rc = cv_source_config(&b->config, b->ck)) != NVF_OK)
        return rc;
    /* SRC as it is now, with these options, must be what the parts converted. */
    cJSON *now = NULL;
    char sha[65];
    if ((rc = cv_parts_fingerprint(&now, sha, &b->opt, &b->src)) != NVF_OK)
        return rc;
    if (strcmp(sha, p0->fp_sha) != 0) {
        const char *what = differs_in(now, p0->fp);
        char why[600];
        if (strcmp(what, "sources") == 0)
            changed_source(why, sizeof why, cJSON_GetObjectItem(p0->fp, "sources"),
                           cJSON_GetObjectItem(now, "sources"));
        else
            snprintf(why, sizeof why, "its %s differs: %s", what,
                     strcmp(what, "tool_version") == 0 ? "another nvfp4tool ran the parts"
                                                       : "the --input-amax file changed");
        cJSON_Delete(now);
        return nvf_error_set(NVF_E_VERIFY,
                             "cannot merge '%s': the parts' fingerprint is not that of SRC '%s' "
                             "now (%s)",
                             o->dst, src, why);
    }
    cJSON_Delete(now);
    return b->target->plan(&b->p, b->ck, &b->opt);
}

static void rebuilt_free(rebuilt *b) {
    cv_plan_free(b->p);
    cv_sources_free(&b->src);
    cJSON_Delete(b->config);
    nvf_ckpt_close(b->ck);
    if (b->recipe_ok)
        nvf_recipe_free(&b->recipe);
}

/* Part `pi`'s record of planned shard `sh`: the planned tensors, in order, with their CRCs. */
static void take_shard(faults *f, cv_plan *p, cv_shard *sh, const cv_part *part, const cJSON *e) {
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "tensors");
    size_t k = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, ts) {
        const char *name = cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring;
        if (k >= sh->n_out || strcmp(name, p->outs[sh->first_out + k].name) != 0) {
            fault(f, "part %d-of-%d: shard '%s' lists tensor '%s' where the plan has %s%s%s",
                  part->index, part->count, sh->name, name, k < sh->n_out ? "'" : "none",
                  k < sh->n_out ? p->outs[sh->first_out + k].name : "", k < sh->n_out ? "'" : "");
            return;
        }
        p->outs[sh->first_out + k].crc32 =
            (uint32_t)strtoul(cJSON_GetObjectItemCaseSensitive(t, "crc32")->valuestring, NULL, 16);
        k++;
    }
    if (k != sh->n_out) {
        fault(f, "part %d-of-%d: shard '%s' lists %zu tensors, the plan %zu", part->index,
              part->count, sh->name, k, sh->n_out);
        return;
    }
    if (!cv_job_scales_take(p, sh, e)) {
        fault(f, "part %d-of-%d: shard '%s' does not list one weight_scale_2 per job of its %zu",
              part->index, part->count, sh->name, sh->n_jobs);
        return;
    }
    sh->file_bytes = (uint64_t)cJSON_GetObjectItemCaseSensitive(e, "bytes")->valuedouble;
    snprintf(sh->sha256, sizeof sh->sha256, "%s",
             cJSON_GetObjectItemCaseSensitive(e, "sha256")->valuestring);
}

/* Step 4: every planned shard in exactly one part (owner[s]: its part), its file as recorded. */
static int check_coverage(const nvf_merge_options *o, cv_plan *p, const cv_part *parts, size_t n) {
    faults f = {.len = 0};
    int *owner = malloc((p->n_shards + 1) * sizeof *owner);
    if (!owner)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t s = 0; s < p->n_shards; s++)
        owner[s] = -1;
    for (size_t i = 0; i < n; i++) {
        const cJSON *e;
        cJSON_ArrayForEach(e, parts[i].shards) {
            const char *name = cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring;
            size_t s = 0;
            while (s < p->n_shards && strcmp(p->shards[s].name, name) != 0)
                s++;
            if (s == p->n_shards) {
                fault(&f, "part %d-of-%d lists shard '%s', which the plan does not have",
                      parts[i].index, parts[i].count, name);
            } else if (owner[s] >= 0) {
                fault(&f, "shard '%s' is in two parts: %d-of-%d and %d-of-%d", name,
                      parts[owner[s]].index, parts[owner[s]].count, parts[i].index, parts[i].count);
            } else {
                owner[s] = (int)i;
                take_shard(&f, p, &p->shards[s], &parts[i], e);
            }
        }
    }
    for (size_t s = 0; s < p->n_shards; s++) {
        if (owner[s] < 0) {
            fault(&f, "shard '%s' is in no part", p->shards[s].name);
            continue;
        }
        char *path = nvf_path_join(o->dst, p->shards[s].name);
        struct stat sb;
        if (!path || stat(path, &sb) != 0)
            fault(&f, "shard file '%s' of part %d-of-%d is missing", p->shards[s].name,
                  parts[owner[s]].index, parts[owner[s]].count);
        else if ((uint64_t)sb.st_size != p->shards[s].file_bytes)
            fault(&f, "shard file '%s' has %lld bytes, part %d-of-%d recorded %llu",
                  p->shards[s].name, (long long)sb.st_size, parts[owner[s]].index,
                  parts[owner[s]].count, (unsigned long long)p->shards[s].file_bytes);
        free(path);
    }
    free(owner);
    return faults_done(&f, o->dst);
}

/* Step 4, sources: every file hashed by exactly one part, at the size it has now. */
static int take_sources(const nvf_merge_options *o, cv_sources *src, const cv_part *parts,
                        size_t n) {
    faults f = {.len = 0};
    unsigned char *seen = calloc(src->n + 1, 1);
    if (!seen)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t i = 0; i < n; i++) {
        const cJSON *e;
        cJSON_ArrayForEach(e, parts[i].sources) {
            const char *name = cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring;
            size_t k = 0;
            while (k < src->n && strcmp(src->names[k], name) != 0)
                k++;
            if (k == src->n || seen[k]++) {
                fault(&f, "part %d-of-%d hashed source file '%s', %s", parts[i].index,
                      parts[i].count, name,
                      k == src->n ? "which SRC does not have" : "which another part hashed too");
                continue;
            }
            src->bytes[k] = (uint64_t)cJSON_GetObjectItemCaseSensitive(e, "bytes")->valuedouble;
            snprintf(src->sha[k], sizeof src->sha[k], "%s",
                     cJSON_GetObjectItemCaseSensitive(e, "sha256")->valuestring);
        }
    }
    for (size_t k = 0; k < src->n; k++)
        if (!seen[k])
            fault(&f, "source file '%s' was hashed by no part", src->names[k]);
    free(seen);
    return faults_done(&f, o->dst);
}

/* --rehash ---------------------------------------------------------------------------------- */

typedef struct rehash_ctx {
    const nvf_merge_options *o;
    cv_plan *p;
    uint32_t *want; /* the records' CRC-32s, by output */
    volatile sig_atomic_t *stop;
} rehash_ctx;

static int rehash_task(void *arg, size_t s) {
    rehash_ctx *c = arg;
    const cv_shard *sh = &c->p->shards[s];
    if (c->stop && *c->stop)
        return nvf_error_set(NVF_E_INTERRUPTED, "interrupted while hashing the shards");
    char *path = nvf_path_join(c->o->dst, sh->name);
    char sha[65] = "";
    uint64_t bytes = 0;
    if (!path)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    int ok = cv_shard_rehash(c->p, sh, path, sha, &bytes);
    free(path);
    if (!ok || bytes != sh->file_bytes || strcmp(sha, sh->sha256) != 0)
        return nvf_error_set(NVF_E_VERIFY,
                             "cannot merge '%s': shard '%s' does not hold what its part recorded "
                             "(SHA-256 %s, recorded %s)",
                             c->o->dst, sh->name, ok ? sha : "unreadable", sh->sha256);
    for (size_t i = sh->first_out; i < sh->first_out + sh->n_out; i++)
        if (c->p->outs[i].crc32 != c->want[i])
            return nvf_error_set(NVF_E_VERIFY,
                                 "cannot merge '%s': tensor '%s' of shard '%s' has CRC-32 %08x, "
                                 "its part recorded %08x",
                                 c->o->dst, c->p->outs[i].name, sh->name, c->p->outs[i].crc32,
                                 c->want[i]);
    return NVF_OK;
}

static int rehash_all(const nvf_merge_options *o, cv_plan *p) {
    rehash_ctx c = {o, p, malloc((p->n_outs + 1) * sizeof(uint32_t)), o->stop};
    if (!c.want)
        return nvf_error_set(NVF_E_NOMEM, "no memory");
    for (size_t i = 0; i < p->n_outs; i++)
        c.want[i] = p->outs[i].crc32;
    int rc = nvf_pool_run(nvf_pool_global(), p->n_shards, o->threads, rehash_task, &c);
    free(c.want);
    return rc;
}

/* Step 6 ------------------------------------------------------------------------------------ */

static int remove_parts_dir(const char *dst) {
    char *dir = nvf_path_join(dst, NVF_CONVERT_PARTS_DIR);
    DIR *d = dir ? opendir(dir) : NULL;
    int rc = d ? NVF_OK
               : nvf_error_set(dir ? NVF_E_IO : NVF_E_NOMEM, "cannot list '%s': %s",
                               dir ? dir : "?", strerror(errno));
    struct dirent *e;
    while (rc == NVF_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *path = nvf_path_join(dir, e->d_name);
        if (!path || (unlink(path) != 0 && errno != ENOENT))
            rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", path ? path : "?",
                               strerror(errno));
        free(path);
    }
    if (d)
        closedir(d);
    if (rc == NVF_OK && rmdir(dir) != 0)
        rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", dir, strerror(errno));
    free(dir);
    return rc;
}

int nvf_merge_run(nvf_merge_summary *out, const nvf_merge_options *o) {
    memset(out, 0, sizeof *out);
    cv_dst *dst = NULL;
    cv_part *parts = NULL;
    size_t n = 0;
    rebuilt b;
    memset(&b, 0, sizeof b);
    int rc = nvf_path_is_dir(o->dst) ? NVF_OK
                                     : nvf_error_set(NVF_E_IO, "'%s' is not a directory", o->dst);
    if (rc != NVF_OK || (rc = cv_dst_lock(&dst, o->dst)) != NVF_OK ||
        (rc = cv_parts_read(&parts, &n, o->dst)) != NVF_OK ||
        (rc = check_parts(o, parts, n)) != NVF_OK ||
        (rc = check_fingerprints(o, parts, n)) != NVF_OK)
        goto done;
    out->parts = (uint64_t)parts[0].count;
    snprintf(out->src, sizeof out->src, "%s",
             cJSON_GetObjectItemCaseSensitive(parts[0].doc, "src")->valuestring);
    nvf_log(NVF_LOG_INFO, "merging %zu parts of '%s' (fingerprint %.16s)", n, out->src,
            parts[0].fp_sha);
    if ((rc = rebuild(&b, o, &parts[0])) != NVF_OK ||
        (rc = check_coverage(o, b.p, parts, n)) != NVF_OK ||
        (rc = take_sources(o, &b.src, parts, n)) != NVF_OK)
        goto done;
    if (o->rehash) {
        if ((rc = rehash_all(o, b.p)) != NVF_OK)
            goto done;
        out->shards_rehashed = b.p->n_shards;
    }
    if ((rc = cv_dst_remove_stale(o->dst, b.p)) != NVF_OK ||
        (rc = cv_dst_clear(dst, 1, b.p)) != NVF_OK)
        goto done;
    cv_finish_args fa = {
        .dst = o->dst,
        .target = b.target,
        .plan = b.p,
        .recipe = &b.recipe,
        .source_config = b.config ? b.config : nvf_ckpt_config_doc(b.ck),
        .mixed = b.opt.keep_source_precision && cJSON_GetArraySize(b.p->fp8_modules) > 0,
        .sources = &b.src,
        .source_format = nvf_ckpt_format_name(b.ck->quant.format),
        .source_hf_quant_config = nvf_ckpt_hf_quant_config_doc(b.ck),
    };
    if ((rc = cv_finish_outputs(&out->convert, &fa)) == NVF_OK)
        rc = remove_parts_dir(o->dst);
done:
    cv_dst_close(dst, 0);
    rebuilt_free(&b);
    cv_parts_free(parts, n);
    return rc;
}
