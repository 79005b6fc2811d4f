/*
 * The conversion pipeline (SPEC section 6). Three threads:
 *   - the caller's thread computes the jobs in order: quantization (CPU reference with its own
 *     worker threads, or the CUDA twins) and FP8 dequantization into a buffer per job; it
 *     waits while the buffers in flight exceed --max-host-memory (one job always proceeds);
 *   - a writer thread takes the jobs in the same order, writes the shards (copied tensors are
 *     streamed from the source mapping in chunks), hashes as it writes, finishes each shard
 *     atomically and records it in the progress journal;
 *   - a hasher thread computes the SHA-256 of every source file for the manifest.
 * Source pages are released (MADV_DONTNEED) once consumed, so the resident set stays bounded
 * by the buffers in flight plus one job, whatever the checkpoint size.
 */
#include "convert/convert_internal.h"

#include "nvfp4/fileio.h"
#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/quant_cuda.h"
#include "nvfp4/status.h"
#include "nvfp4/version.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_CHUNK ((size_t)64 << 20)

typedef struct queue_item {
    size_t job;
    uint8_t *buf; /* NULL for a copy job or the end marker */
    uint64_t cost;
    int end;
} queue_item;

typedef struct run_state {
    const nvf_convert_options *opt;
    const nvf_ckpt *ck;
    cv_plan *p;
    char *key; /* journal key */
    cJSON *journal;
    /* queue (ring of jobs + 1 entries is never needed: bounded by memory; use a list) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    queue_item *items;
    size_t head, tail, cap;
    uint64_t inflight;  /* bytes of buffers reserved by the compute workers, not yet written */
    uint64_t queued;    /* the part of them handed to the writer */
    size_t next_job;    /* the job the writer needs next (jobs are handed over in order) */
    int compute_failed; /* a compute worker failed: the others stop */
    int failed;         /* status of the writer's failure */
    char fail_msg[1024];
    int abort;
    nvf_convert_progress prog;
    /* source files: names (relative), sizes, hashes */
    size_t n_src;
    char **src_names;
    uint64_t *src_bytes;
    char (*src_sha)[65];
    int hash_rc;
    char hash_msg[1024];
} run_state;

static int stopped(const run_state *rs) {
    return rs->opt->stop && *rs->opt->stop;
}

/* Drop the resident pages of a source range (file-backed: they are read again if needed). */
static void release_range(const nvf_ckpt *ck, size_t ti, const void *data, uint64_t len) {
    const nvf_st_file *f = ck->files[ck->tensors[ti].file].st;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)f->map, lim = base + f->map_len;
    uintptr_t a = (uintptr_t)data & ~(page - 1),
              z = ((uintptr_t)data + len + page - 1) & ~(page - 1);
    if (!f->map || len == 0)
        return;
    if (a < base)
        a = base;
    if (z > lim)
        z = lim;
    if (z > a)
        madvise((void *)a, z - a, MADV_DONTNEED);
}

static void release_member(const nvf_ckpt *ck, const cv_member *m) {
    const nvf_quant_source *s = &m->src;
    uint64_t esize = nvf_dtype_bits(s->dtype) / 8;
    release_range(ck, m->tensor, s->data, (uint64_t)s->rows * (uint64_t)s->cols * esize);
}

static void prefetch_member(const nvf_ckpt *ck, const cv_member *m) {
    const nvf_quant_source *s = &m->src;
    const nvf_st_file *f = ck->files[ck->tensors[m->tensor].file].st;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)s->data & ~(page - 1);
    uint64_t len = (uint64_t)s->rows * (uint64_t)s->cols * (nvf_dtype_bits(s->dtype) / 8);
    if (f->map && len > 0 && a >= (uintptr_t)f->map)
        madvise((void *)a, (size_t)((uintptr_t)s->data + len - a), MADV_WILLNEED);
}

/* Compute --------------------------------------------------------------------------------- */

/* Errors from the amax pass (NaN/Inf) name the tensor; say which source file holds it too. */
/* Where one compute worker runs: a device and, on the CPU, its share of the threads. */
typedef struct worker_place {
    nvf_device device;
    int threads;
} worker_place;

static int amax_of(float *out, const run_state *rs, const worker_place *w, const cv_member *m) {
    const nvf_ckpt_tensor *t = &rs->ck->tensors[m->tensor];
    const char *name = t->st->name;
    int rc;
    if (w->device.kind == NVF_DEVICE_CUDA)
        rc = nvf_quant_amax_cuda(out, &m->src, rs->opt->allow_nonfinite, w->device.index, name);
    else
        rc = nvf_quant_amax_ref(out, &m->src, rs->opt->allow_nonfinite, w->threads, name);
    if (rc != NVF_OK)
        nvf_error_prefix("'%s'", rs->ck->files[t->file].st->path);
    return rc;
}

static int quantize_into(uint8_t *packed, uint8_t *scales, const run_state *rs,
                         const worker_place *w, const cv_member *m, float gs) {
    const nvf_quant_params *q = &rs->opt->recipe->quant;
    if (w->device.kind == NVF_DEVICE_CUDA)
        return nvf_quant_source_cuda(packed, scales, &m->src, gs, q, w->device.index);
    return nvf_quant_source_ref(packed, scales, &m->src, gs, q, w->threads);
}

static uint8_t *put_f32(uint8_t *p, float v) {
    uint32_t b = nvf_f32_bits(v);
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(b >> (8 * k));
    return p + 4;
}

/* The outputs of one linear: weight, weight_scale, weight_scale_2, input_scale. */
static uint8_t *put_linear(uint8_t *p, const uint8_t *packed, const uint8_t *scales, int64_t rows,
                           int64_t cols, float gs, float input_scale) {
    size_t pb = (size_t)(rows * cols / 2), sb = (size_t)(rows * cols / NVF_BLOCK);
    memcpy(p, packed, pb);
    memcpy(p + pb, scales, sb);
    p = put_f32(p + pb + sb, nvf_quant_decode_scale(gs));
    return put_f32(p, input_scale);
}

static int compute_quant(uint8_t *buf, const run_state *rs, const worker_place *w,
                         const cv_job *j) {
    float amax = 0.0f;
    int rc = NVF_OK;
    for (size_t k = 0; k < j->n_members; k++) {
        float a;
        if ((rc = amax_of(&a, rs, w, &j->members[k])) != NVF_OK)
            return rc;
        if (a > amax || a != a)
            amax = a;
    }
    float gs = nvf_quant_global_scale(amax, rs->opt->recipe->quant.e4m3_max);
    uint8_t *p = buf;
    for (size_t k = 0; k < j->n_members; k++) {
        const cv_member *m = &j->members[k];
        int64_t rows = m->src.rows, cols = m->src.cols;
        size_t pb = (size_t)(rows * cols / 2), sb = (size_t)(rows * cols / NVF_BLOCK);
        uint8_t *tmp = malloc(pb + sb + 1);
        if (!tmp)
            return nvf_error_set(NVF_E_NOMEM, "no memory to quantize '%s'", m->module[0]);
        rc = quantize_into(tmp, tmp + pb, rs, w, m, gs);
        if (rc == NVF_OK && m->split) {
            int64_t half = rows / 2;
            p = put_linear(p, tmp, tmp + pb, half, cols, gs, j->input_scale);
            p = put_linear(p, tmp + pb / 2, tmp + pb + sb / 2, half, cols, gs, j->input_scale);
        } else if (rc == NVF_OK) {
            p = put_linear(p, tmp, tmp + pb, rows, cols, gs, j->input_scale);
        }
        free(tmp);
        if (rc != NVF_OK)
            return rc;
    }
    return NVF_OK;
}

/* FP8 to BF16: bf16(RN(f32(fp8) * scale)) per element, matrix by matrix. */
static int compute_dequant(uint8_t *buf, const run_state *rs, const cv_job *j) {
    const nvf_st_tensor *st = rs->ck->tensors[j->members[0].tensor].st;
    int64_t mats = st->ndim == 3 ? st->shape[0] : 1;
    uint8_t *p = buf;
    for (int64_t e = 0; e < mats; e++) {
        nvf_quant_source s;
        cv_source_view(&s, rs->ck, j->members[0].tensor, st->ndim == 3 ? e : -1);
        float *row = malloc((size_t)(s.cols > 0 ? s.cols : 1) * sizeof *row);
        if (!row)
            return nvf_error_set(NVF_E_NOMEM, "no memory to dequantize '%s'", st->name);
        for (int64_t r = 0; r < s.rows; r++) {
            nvf_quant_source_load_row(row, &s, r);
            for (int64_t c = 0; c < s.cols; c++) {
                uint16_t h = nvf_f32_to_bf16_rn(row[c]);
                *p++ = (uint8_t)h;
                *p++ = (uint8_t)(h >> 8);
            }
        }
        free(row);
    }
    return NVF_OK;
}

/* Writer ---------------------------------------------------------------------------------- */

static int writer_failed(run_state *rs, int rc) {
    pthread_mutex_lock(&rs->mu);
    if (!rs->failed) {
        rs->failed = rc;
        snprintf(rs->fail_msg, sizeof rs->fail_msg, "%s", nvf_error_last());
    }
    pthread_cond_broadcast(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
    return rc;
}

static void report(run_state *rs, int final) {
    if (rs->opt->progress)
        rs->opt->progress(&rs->prog, final, rs->opt->progress_user);
}

static int journal_write(run_state *rs, const cv_shard *s, size_t si) {
    const cv_plan *p = rs->p;
    cJSON *arr = cJSON_GetObjectItem(rs->journal, "shards");
    cJSON *e = cJSON_CreateObject();
    cJSON *crcs = cJSON_AddArrayToObject(e, "crc32");
    cJSON_AddStringToObject(e, "name", s->name);
    cJSON_AddNumberToObject(e, "bytes", (double)s->file_bytes);
    cJSON_AddStringToObject(e, "sha256", s->sha256);
    for (size_t i = 0; i < s->n_out; i++) {
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", (unsigned)p->outs[s->first_out + i].crc32);
        cJSON_AddItemToArray(crcs, cJSON_CreateString(hex));
    }
    cJSON_AddItemToArray(arr, e);
    char *path = nvf_path_join(rs->opt->dst, NVF_CONVERT_JOURNAL);
    int rc = path ? cv_write_json(path, rs->journal, NULL, NULL)
                  : nvf_error_set(NVF_E_NOMEM, "no memory for the journal of shard %zu", si);
    free(path);
    return rc;
}

static int write_copy(run_state *rs, cv_writer *w, const cv_job *j) {
    size_t ti = j->members[0].tensor;
    const nvf_st_tensor *st = rs->ck->tensors[ti].st;
    cv_out *o = &rs->p->outs[j->first_out];
    uint64_t len = st->end - st->begin;
    for (uint64_t off = 0; off < len;) {
        if (stopped(rs))
            return nvf_error_set(NVF_E_INTERRUPTED, "interrupted while copying '%s'", st->name);
        size_t k = len - off < COPY_CHUNK ? (size_t)(len - off) : COPY_CHUNK;
        int rc = cv_writer_write(w, o, st->data + off, k);
        release_range(rs->ck, ti, st->data + off, k);
        if (rc != NVF_OK)
            return rc;
        off += k;
        rs->prog.bytes_done += k;
        if (off < len)
            report(rs, 0);
    }
    rs->prog.tensors_done++;
    return NVF_OK;
}

static int write_buffered(run_state *rs, cv_writer *w, const cv_job *j, const uint8_t *buf) {
    for (size_t i = 0; i < j->n_out; i++) {
        cv_out *o = &rs->p->outs[j->first_out + i];
        int rc = cv_writer_write(w, o, buf, (size_t)o->bytes);
        if (rc != NVF_OK)
            return rc;
        buf += o->bytes;
        rs->prog.bytes_done += o->bytes;
        rs->prog.tensors_done++;
    }
    return NVF_OK;
}

static void *writer_main(void *arg) {
    run_state *rs = arg;
    cv_plan *p = rs->p;
    cv_writer *w = NULL;
    size_t open_shard = (size_t)-1, jobs_in_shard = 0;
    int rc = NVF_OK;
    for (;;) {
        pthread_mutex_lock(&rs->mu);
        while (rs->head == rs->tail && !rs->abort)
            pthread_cond_wait(&rs->cv, &rs->mu);
        if (rs->abort) {
            pthread_mutex_unlock(&rs->mu);
            break;
        }
        queue_item it = rs->items[rs->head % rs->cap];
        pthread_mutex_unlock(&rs->mu);
        if (it.end)
            break;
        const cv_job *j = &p->jobs[it.job];
        if (rc == NVF_OK && j->shard != open_shard) {
            open_shard = j->shard;
            jobs_in_shard = 0;
            rc = cv_writer_open(&w, rs->opt->dst, p, open_shard);
        }
        if (rc == NVF_OK)
            rc = it.buf ? write_buffered(rs, w, j, it.buf) : write_copy(rs, w, j);
        free(it.buf);
        pthread_mutex_lock(&rs->mu);
        rs->head++;
        rs->inflight -= it.cost;
        rs->queued -= it.cost;
        pthread_cond_broadcast(&rs->cv);
        pthread_mutex_unlock(&rs->mu);
        if (rc == NVF_OK && ++jobs_in_shard == p->shards[open_shard].n_jobs) {
            cv_shard *s = &p->shards[open_shard];
            rc = cv_writer_finish(w, s);
            w = NULL;
            if (rc == NVF_OK)
                rc = journal_write(rs, s, open_shard);
            rs->prog.shards_done++;
        }
        if (rc != NVF_OK) {
            writer_failed(rs, rc);
            break;
        }
        report(rs, 0);
    }
    cv_writer_abort(w);
    return NULL;
}

/*
 * Reserve `cost` bytes for job `i`, waiting while the buffers in flight would exceed the
 * budget. A job proceeds anyway when nothing is in flight, or when it is the job the writer
 * needs next and the writer has nothing queued: other workers' finished buffers wait for their
 * turn, so without that exception they could hold the budget that job `i` waits for.
 * @return non-zero when the conversion is failing (the caller stops).
 */
static int reserve(run_state *rs, size_t i, uint64_t cost) {
    pthread_mutex_lock(&rs->mu);
    while (!rs->failed && !rs->compute_failed && rs->inflight > 0 &&
           rs->inflight + cost > rs->opt->max_host_memory &&
           !(i == rs->next_job && rs->queued == 0))
        pthread_cond_wait(&rs->cv, &rs->mu);
    int failing = rs->failed || rs->compute_failed;
    if (!failing)
        rs->inflight += cost;
    pthread_mutex_unlock(&rs->mu);
    return failing;
}

/* The first job from `i` on that is computed here (not in a reused shard); n_jobs if none. */
static size_t next_live_job(const cv_plan *p, size_t i) {
    while (i < p->n_jobs && p->shards[p->jobs[i].shard].reused)
        i++;
    return i;
}

/* Hand job `it.job` to the writer once every earlier job has been handed over. */
static int hand_over(run_state *rs, queue_item it) {
    pthread_mutex_lock(&rs->mu);
    while (!rs->failed && !rs->compute_failed && rs->next_job != it.job)
        pthread_cond_wait(&rs->cv, &rs->mu);
    int failing = rs->failed || rs->compute_failed;
    if (!failing) {
        rs->items[rs->tail++ % rs->cap] = it;
        rs->queued += it.cost;
        rs->next_job = next_live_job(rs->p, it.job + 1);
    }
    pthread_cond_broadcast(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
    return failing;
}

/*
 * Compute worker `k` of `n`: the live jobs numbered k, k + n, ... in order (copy jobs need no
 * computing and are only handed over in their turn).
 */
static int produce(run_state *rs, const worker_place *w, size_t k, size_t n) {
    cv_plan *p = rs->p;
    size_t live = 0;
    for (size_t i = next_live_job(p, 0); i < p->n_jobs; i = next_live_job(p, i + 1)) {
        if (live++ % n != k)
            continue;
        const cv_job *j = &p->jobs[i];
        if (stopped(rs))
            return nvf_error_set(NVF_E_INTERRUPTED, "interrupted");
        queue_item it = {.job = i};
        if (j->kind != CV_JOB_COPY) {
            it.cost = j->bytes_out + j->bytes_in;
            if (reserve(rs, i, it.cost))
                return NVF_OK; /* the failure is reported by the caller */
            for (size_t q = i + 1; q < p->n_jobs && q < i + 2 * n; q++)
                if (p->jobs[q].kind == CV_JOB_QUANT && !p->shards[p->jobs[q].shard].reused &&
                    (q - i) % n == 0)
                    prefetch_member(rs->ck, &p->jobs[q].members[0]);
            it.buf = malloc(j->bytes_out ? (size_t)j->bytes_out : 1);
            if (!it.buf)
                return nvf_error_set(NVF_E_NOMEM, "no memory for the %llu bytes of '%s'",
                                     (unsigned long long)j->bytes_out, p->outs[j->first_out].name);
            int rc = j->kind == CV_JOB_QUANT ? compute_quant(it.buf, rs, w, j)
                                             : compute_dequant(it.buf, rs, j);
            for (size_t m = 0; m < j->n_members; m++)
                release_member(rs->ck, &j->members[m]);
            if (rc != NVF_OK) {
                free(it.buf);
                return rc;
            }
        }
        if (hand_over(rs, it)) {
            free(it.buf);
            return NVF_OK;
        }
    }
    return NVF_OK;
}

typedef struct worker {
    run_state *rs;
    worker_place place;
    size_t k, n;
    int rc;
    char msg[1024];
} worker;

static void *worker_main(void *arg) {
    worker *wk = arg;
    wk->rc = produce(wk->rs, &wk->place, wk->k, wk->n);
    if (wk->rc != NVF_OK) {
        snprintf(wk->msg, sizeof wk->msg, "%s", nvf_error_last());
        pthread_mutex_lock(&wk->rs->mu);
        wk->rs->compute_failed = 1;
        pthread_cond_broadcast(&wk->rs->cv);
        pthread_mutex_unlock(&wk->rs->mu);
    }
    return NULL;
}

/*
 * Run the compute workers: the caller's thread alone for one device, else one thread per
 * --devices entry (CPU entries share the CPU threads). The first failure, in worker order, is
 * the one reported.
 */
static int compute_all(run_state *rs) {
    const nvf_convert_options *o = rs->opt;
    size_t n = o->n_devices > 1 ? o->n_devices : 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o->threads > 0 ? o->threads : (int)(cores > 0 ? cores : 1);
    rs->next_job = next_live_job(rs->p, 0);
    if (n == 1) {
        worker_place w = {o->n_devices == 1 ? o->devices[0] : o->device, o->threads};
        return produce(rs, &w, 0, 1);
    }
    size_t n_cpu = 0;
    for (size_t i = 0; i < n; i++)
        n_cpu += o->devices[i].kind == NVF_DEVICE_CPU;
    worker *wk = calloc(n, sizeof *wk);
    pthread_t *tid = calloc(n, sizeof *tid);
    int rc = NVF_OK;
    size_t started = 0;
    if (!wk || !tid)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for %zu compute workers", n);
    for (size_t i = 0; rc == NVF_OK && i < n; i++) {
        wk[i].rs = rs;
        wk[i].place.device = o->devices[i];
        wk[i].place.threads = n_cpu ? (threads / (int)n_cpu > 0 ? threads / (int)n_cpu : 1) : 1;
        wk[i].k = i;
        wk[i].n = n;
        if (pthread_create(&tid[i], NULL, worker_main, &wk[i]) != 0)
            rc = nvf_error_set(NVF_E_NOMEM, "cannot start compute worker %zu", i);
        else
            started++;
    }
    if (rc != NVF_OK) {
        pthread_mutex_lock(&rs->mu);
        rs->compute_failed = 1;
        pthread_cond_broadcast(&rs->cv);
        pthread_mutex_unlock(&rs->mu);
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    for (size_t i = 0; rc == NVF_OK && i < started; i++)
        if (wk[i].rc != NVF_OK)
            rc = nvf_error_set(wk[i].rc, "%s", wk[i].msg);
    free(wk);
    free(tid);
    return rc;
}

/* Source files, resume key, journal ------------------------------------------------------ */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files at the top of SRC (or the single file), sorted; hidden files left out. */
static int list_sources(run_state *rs) {
    const nvf_ckpt *ck = rs->ck;
    size_t cap = 16;
    rs->src_names = calloc(cap, sizeof *rs->src_names);
    if (!rs->src_names)
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->path);
    if (ck->is_file) {
        const char *slash = strrchr(ck->path, '/');
        rs->src_names[rs->n_src++] = strdup(slash ? slash + 1 : ck->path);
    } else {
        DIR *d = opendir(ck->dir);
        if (!d)
            return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", ck->dir, strerror(errno));
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char *full = nvf_path_join(ck->dir, e->d_name);
            int is_file = full && nvf_path_is_file(full);
            free(full);
            if (!is_file)
                continue;
            if (rs->n_src == cap) {
                char **nn = realloc(rs->src_names, 2 * cap * sizeof *nn);
                if (!nn) {
                    closedir(d);
                    return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->dir);
                }
                rs->src_names = nn;
                cap *= 2;
            }
            rs->src_names[rs->n_src++] = strdup(e->d_name);
        }
        closedir(d);
    }
    for (size_t i = 0; i < rs->n_src; i++)
        if (!rs->src_names[i])
            return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->dir);
    qsort(rs->src_names, rs->n_src, sizeof *rs->src_names, cmp_str);
    rs->src_bytes = calloc(rs->n_src + 1, sizeof *rs->src_bytes);
    rs->src_sha = calloc(rs->n_src + 1, sizeof *rs->src_sha);
    if (!rs->src_bytes || !rs->src_sha)
        return nvf_error_set(NVF_E_NOMEM, "no memory listing '%s'", ck->dir);
    return NVF_OK;
}

static char *src_path(const run_state *rs, size_t i) {
    return rs->ck->is_file ? strdup(rs->ck->path) : nvf_path_join(rs->ck->dir, rs->src_names[i]);
}

static void *hasher_main(void *arg) {
    run_state *rs = arg;
    for (size_t i = 0; i < rs->n_src && !rs->hash_rc; i++) {
        char *path = src_path(rs, i);
        int rc = path ? nvf_sha256_file(rs->src_sha[i], &rs->src_bytes[i], path)
                      : nvf_error_set(NVF_E_NOMEM, "no memory");
        free(path);
        if (rc != NVF_OK) {
            rs->hash_rc = rc;
            snprintf(rs->hash_msg, sizeof rs->hash_msg, "%s", nvf_error_last());
        }
        pthread_mutex_lock(&rs->mu);
        int quit = rs->abort || rs->failed;
        pthread_mutex_unlock(&rs->mu);
        if (quit || stopped(rs))
            break;
    }
    return NULL;
}

/*
 * The journal key: SHA-256 over the tool version, each source file's name, size and mtime,
 * the effective recipe and the options that change the output. A changed input or recipe
 * gives another key, so stale shards are never reused.
 */
static int make_key(run_state *rs) {
    const nvf_convert_options *o = rs->opt;
    nvf_sha256 *h = nvf_sha256_new();
    char *rj = nvf_recipe_to_json(o->recipe);
    int rc = h && rj ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory for the resume key");
    char line[512];
    for (size_t i = 0; rc == NVF_OK && i < rs->n_src; i++) {
        char *path = src_path(rs, i);
        struct stat sb;
        if (!path || stat(path, &sb) != 0) {
            rc =
                nvf_error_set(NVF_E_IO, "cannot stat '%s': %s", path ? path : "?", strerror(errno));
        } else {
            snprintf(line, sizeof line, "%s\n%lld %lld.%09ld\n", rs->src_names[i],
                     (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
            rc = nvf_sha256_update(h, line, strlen(line));
        }
        free(path);
    }
    if (rc == NVF_OK && o->input_amax_path) {
        char sum[65];
        uint64_t n;
        rc = nvf_sha256_file(sum, &n, o->input_amax_path);
        if (rc == NVF_OK)
            rc = nvf_sha256_update(h, sum, 64);
    }
    if (rc == NVF_OK) {
        snprintf(line, sizeof line, "%s\nkeep_source_precision=%d allow_nonfinite=%d\n",
                 nvf_version(), o->keep_source_precision, o->allow_nonfinite);
        rc = nvf_sha256_update(h, line, strlen(line));
    }
    if (rc == NVF_OK)
        rc = nvf_sha256_update(h, rj, strlen(rj));
    if (rc == NVF_OK) {
        rs->key = malloc(65);
        rc = rs->key ? nvf_sha256_final(h, rs->key) : nvf_error_set(NVF_E_NOMEM, "no memory");
    }
    nvf_sha256_free(h);
    free(rj);
    return rc;
}

static int hex_crc(uint32_t *out, const cJSON *v) {
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 8)
        return 0;
    char *end;
    unsigned long x = strtoul(v->valuestring, &end, 16);
    *out = (uint32_t)x;
    return *end == '\0';
}

/* Mark the shards the journal recorded as finished, if their files still hash the same. */
static int resume_shards(run_state *rs, const char *jpath) {
    char *text = NULL;
    size_t len = 0;
    if (!nvf_path_is_file(jpath))
        return NVF_OK;
    int rc = nvf_file_read_all(&text, &len, jpath, 1u << 30);
    if (rc != NVF_OK)
        return rc;
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *key = cJSON_GetObjectItem(doc, "key");
    const cJSON *shards = cJSON_GetObjectItem(doc, "shards");
    if (!cJSON_IsString(key) || strcmp(key->valuestring, rs->key) != 0 || !cJSON_IsArray(shards)) {
        nvf_log(NVF_LOG_INFO, "resume: the journal is for another source, recipe or options; "
                              "starting over");
        cJSON_Delete(doc);
        return NVF_OK;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, shards) {
        const cJSON *name = cJSON_GetObjectItem(e, "name"), *sha = cJSON_GetObjectItem(e, "sha256");
        const cJSON *crcs = cJSON_GetObjectItem(e, "crc32"),
                    *bytes = cJSON_GetObjectItem(e, "bytes");
        for (size_t s = 0; s < rs->p->n_shards && cJSON_IsString(name) && cJSON_IsString(sha);
             s++) {
            cv_shard *sh = &rs->p->shards[s];
            if (strcmp(sh->name, name->valuestring) != 0 || sh->reused ||
                cJSON_GetArraySize(crcs) != (int)sh->n_out || !cJSON_IsNumber(bytes))
                continue;
            char *path = nvf_path_join(rs->opt->dst, sh->name);
            char got[65];
            uint64_t n = 0;
            int ok = path && nvf_sha256_file(got, &n, path) == NVF_OK &&
                     strcmp(got, sha->valuestring) == 0 && (double)n == bytes->valuedouble;
            free(path);
            nvf_error_clear();
            for (size_t i = 0; ok && i < sh->n_out; i++)
                ok = hex_crc(&rs->p->outs[sh->first_out + i].crc32,
                             cJSON_GetArrayItem(crcs, (int)i));
            if (!ok)
                continue;
            sh->reused = 1;
            sh->file_bytes = n;
            memcpy(sh->sha256, got, sizeof got);
            cJSON_AddItemToArray(cJSON_GetObjectItem(rs->journal, "shards"), cJSON_Duplicate(e, 1));
            rs->p->counts.shards_reused++;
            rs->prog.shards_done++;
            rs->prog.bytes_done += sh->tensor_bytes;
            rs->prog.tensors_done += sh->n_out;
        }
    }
    cJSON_Delete(doc);
    if (rs->p->counts.shards_reused)
        nvf_log(NVF_LOG_INFO, "resume: reusing %llu of %zu shards",
                (unsigned long long)rs->p->counts.shards_reused, rs->p->n_shards);
    return NVF_OK;
}

/* DST ------------------------------------------------------------------------------------- */

/* Remove what marks a finished (or half-finished) output: the manifest, the index, the
 * configs and temporary files. Finished shards and the journal stay for --resume. */
static int clear_outputs(const char *dst, int journal_too) {
    static const char *const names[] = {NVF_MANIFEST_NAME, "model.safetensors.index.json",
                                        "config.json", "hf_quant_config.json"};
    DIR *d = opendir(dst);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", dst, strerror(errno));
    struct dirent *e;
    int rc = NVF_OK;
    while ((e = readdir(d)) != NULL && rc == NVF_OK) {
        int drop = fnmatch("*.tmp", e->d_name, 0) == 0 ||
                   (journal_too && strcmp(e->d_name, NVF_CONVERT_JOURNAL) == 0);
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            drop |= strcmp(e->d_name, names[i]) == 0;
        if (!drop)
            continue;
        char *path = nvf_path_join(dst, e->d_name);
        if (path && unlink(path) != 0 && errno != ENOENT)
            rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", path, strerror(errno));
        free(path);
    }
    closedir(d);
    return rc;
}

/* Create DST; refuse a non-empty one without --resume or --force. */
static int prepare_dst(const nvf_convert_options *o) {
    int rc = nvf_mkdir_p(o->dst);
    if (rc != NVF_OK)
        return rc;
    DIR *d = opendir(o->dst);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", o->dst, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL && !o->resume && !o->force) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        rc = nvf_error_set(NVF_E_INVALID,
                           "'%s' is not empty (holds '%s'): use --resume to continue a "
                           "conversion or --force to overwrite",
                           o->dst, e->d_name);
        break;
    }
    closedir(d);
    return rc == NVF_OK ? clear_outputs(o->dst, o->force && !o->resume) : rc;
}

/* Remove shards of an earlier run that this conversion does not produce. */
static int remove_stale(const run_state *rs) {
    DIR *d = opendir(rs->opt->dst);
    if (!d)
        return nvf_error_set(NVF_E_IO, "cannot list '%s': %s", rs->opt->dst, strerror(errno));
    struct dirent *e;
    int rc = NVF_OK;
    while ((e = readdir(d)) != NULL && rc == NVF_OK) {
        if (fnmatch("model-*-of-*.safetensors", e->d_name, 0) != 0)
            continue;
        int mine = 0;
        for (size_t s = 0; s < rs->p->n_shards && !mine; s++)
            mine = strcmp(rs->p->shards[s].name, e->d_name) == 0;
        if (mine)
            continue;
        char *path = nvf_path_join(rs->opt->dst, e->d_name);
        if (path && unlink(path) != 0 && errno != ENOENT)
            rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", path, strerror(errno));
        free(path);
    }
    closedir(d);
    return rc;
}

/* Finish ---------------------------------------------------------------------------------- */

static int is_metadata(const char *name) {
    return strcmp(name, "config.json") == 0 || strcmp(name, "hf_quant_config.json") == 0 ||
           strcmp(name, NVF_MANIFEST_NAME) == 0 || fnmatch("*.safetensors", name, 0) == 0 ||
           fnmatch("*.safetensors.index.json", name, 0) == 0;
}

static int cmp_out_name(const void *a, const void *b) {
    return strcmp((*(cv_out *const *)a)->name, (*(cv_out *const *)b)->name);
}

static cJSON *index_doc(const cv_plan *p) {
    cv_out **order = malloc((p->n_outs ? p->n_outs : 1) * sizeof *order);
    if (!order)
        return NULL;
    for (size_t i = 0; i < p->n_outs; i++)
        order[i] = &p->outs[i];
    qsort(order, p->n_outs, sizeof *order, cmp_out_name);
    cJSON *doc = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(doc, "metadata");
    cJSON_AddNumberToObject(meta, "total_size", (double)p->total_size);
    cJSON *map = cJSON_AddObjectToObject(doc, "weight_map");
    for (size_t i = 0; i < p->n_outs; i++)
        cJSON_AddStringToObject(map, order[i]->name, p->shards[p->jobs[order[i]->job].shard].name);
    free(order);
    return doc;
}

cJSON *nvf_convert_summary_json(const nvf_convert_summary *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tensors_quantized", (double)s->tensors_quantized);
    cJSON_AddNumberToObject(o, "linears_quantized", (double)s->linears_quantized);
    cJSON_AddNumberToObject(o, "tensors_kept", (double)s->tensors_kept);
    cJSON_AddNumberToObject(o, "tensors_dequantized", (double)s->tensors_dequantized);
    cJSON_AddNumberToObject(o, "tensors_dropped", (double)s->tensors_dropped);
    cJSON_AddNumberToObject(o, "tensors_written", (double)s->tensors_written);
    cJSON_AddNumberToObject(o, "shards", (double)s->shards);
    cJSON_AddNumberToObject(o, "bytes_in", (double)s->bytes_in);
    cJSON_AddNumberToObject(o, "bytes_out", (double)s->bytes_out);
    return o;
}

static cJSON *summary_doc(const run_state *rs) {
    nvf_convert_summary c = rs->p->counts;
    c.shards = rs->p->n_shards;
    cJSON *o = nvf_convert_summary_json(&c);
    if (o)
        cJSON_AddStringToObject(o, "source_format", nvf_ckpt_format_name(rs->ck->quant.format));
    return o;
}

/* A new file in DST: add it to the manifest. */
static int add_written(nvf_manifest *m, const char *name, uint64_t bytes, const char sha[65]) {
    return nvf_manifest_add_file(m, name, bytes, sha);
}

static int write_json_file(const run_state *rs, nvf_manifest *m, const char *name, cJSON *doc) {
    char *path = nvf_path_join(rs->opt->dst, name);
    char sha[65];
    uint64_t bytes = 0;
    int rc = path && doc ? cv_write_json(path, doc, sha, &bytes)
                         : nvf_error_set(NVF_E_NOMEM, "no memory writing '%s'", name);
    if (rc == NVF_OK)
        rc = add_written(m, name, bytes, sha);
    free(path);
    cJSON_Delete(doc);
    return rc;
}

static int finish_outputs(run_state *rs) {
    const nvf_convert_options *o = rs->opt;
    cv_plan *p = rs->p;
    int mixed = o->keep_source_precision && cJSON_GetArraySize(p->fp8_modules) > 0;
    nvf_manifest *m = nvf_manifest_new();
    int rc = m ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory for the manifest");
    char *rj = nvf_recipe_to_json(o->recipe);
    if (rc == NVF_OK && !rj)
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the manifest");
    if (rc == NVF_OK) {
        m->recipe = cJSON_Parse(rj);
        m->target = cJSON_CreateObject();
        cJSON_AddStringToObject(m->target, "format", "modelopt");
        cJSON_AddNullToObject(m->target, "layout");
        m->has_source = 1;
    }
    for (size_t i = 0; rc == NVF_OK && i < rs->n_src; i++)
        rc = nvf_manifest_add_source(m, rs->src_names[i], rs->src_bytes[i], rs->src_sha[i]);
    for (size_t s = 0; rc == NVF_OK && s < p->n_shards; s++) {
        const cv_shard *sh = &p->shards[s];
        p->counts.bytes_out += sh->file_bytes;
        rc = add_written(m, sh->name, sh->file_bytes, sh->sha256);
    }
    for (size_t i = 0; rc == NVF_OK && i < p->n_outs; i++) {
        const cv_out *t = &p->outs[i];
        rc = nvf_manifest_add_tensor(m, t->name, p->shards[p->jobs[t->job].shard].name,
                                     nvf_dtype_name(t->dtype), t->ndim, t->shape, t->crc32);
    }
    /* Other source files: copied; the copy has the bytes (and so the hash) of the source. */
    for (size_t i = 0; rc == NVF_OK && !rs->ck->is_file && i < rs->n_src; i++) {
        if (is_metadata(rs->src_names[i]))
            continue;
        char *from = src_path(rs, i), *to = nvf_path_join(o->dst, rs->src_names[i]);
        rc = from && to ? nvf_file_copy(to, from) : nvf_error_set(NVF_E_NOMEM, "no memory");
        if (rc == NVF_OK)
            rc = add_written(m, rs->src_names[i], rs->src_bytes[i], rs->src_sha[i]);
        free(from);
        free(to);
    }
    if (rc == NVF_OK)
        rc = write_json_file(rs, m, "model.safetensors.index.json", index_doc(p));
    if (rc == NVF_OK)
        rc = write_json_file(rs, m, "hf_quant_config.json", cv_meta_hf_quant_config(p, mixed));
    if (rc == NVF_OK) {
        rc = write_json_file(rs, m, "config.json", cv_meta_config(p, rs->ck->config, mixed));
    }
    if (rc == NVF_OK) {
        m->summary = summary_doc(rs);
        char *jpath = nvf_path_join(o->dst, NVF_CONVERT_JOURNAL);
        char *mpath = nvf_path_join(o->dst, NVF_MANIFEST_NAME);
        if (!jpath || !mpath)
            rc = nvf_error_set(NVF_E_NOMEM, "no memory");
        else if (unlink(jpath) != 0 && errno != ENOENT)
            rc = nvf_error_set(NVF_E_IO, "cannot remove '%s': %s", jpath, strerror(errno));
        if (rc == NVF_OK)
            rc = nvf_manifest_write(mpath, m);
        free(jpath);
        free(mpath);
    }
    free(rj);
    nvf_manifest_free(m);
    return rc;
}

/* Entry ----------------------------------------------------------------------------------- */

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

static int run_pipeline(run_state *rs) {
    pthread_t writer, hasher;
    int rc = NVF_OK, have_writer = 0;
    rs->cap = rs->p->n_jobs + 1;
    rs->items = calloc(rs->cap, sizeof *rs->items);
    if (!rs->items)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the job queue");
    if (pthread_create(&hasher, NULL, hasher_main, rs) != 0)
        return nvf_error_set(NVF_E_NOMEM, "cannot start the hashing thread");
    if (pthread_create(&writer, NULL, writer_main, rs) != 0)
        rc = nvf_error_set(NVF_E_NOMEM, "cannot start the writer thread");
    else
        have_writer = 1;
    if (rc == NVF_OK)
        rc = compute_all(rs);
    if (have_writer) {
        if (rc == NVF_OK) {
            pthread_mutex_lock(&rs->mu);
            rs->items[rs->tail++ % rs->cap] = (queue_item){.end = 1};
            pthread_cond_broadcast(&rs->cv);
            pthread_mutex_unlock(&rs->mu);
        } else {
            pthread_mutex_lock(&rs->mu);
            rs->abort = 1;
            pthread_cond_broadcast(&rs->cv);
            pthread_mutex_unlock(&rs->mu);
        }
        pthread_join(writer, NULL);
    }
    pthread_join(hasher, NULL);
    /* Buffers the writer never took. */
    for (size_t i = rs->head; i < rs->tail; i++)
        free(rs->items[i % rs->cap].buf);
    if (rc == NVF_OK && rs->failed)
        rc = nvf_error_set(rs->failed, "%s", rs->fail_msg);
    if (rc == NVF_OK && stopped(rs))
        rc = nvf_error_set(NVF_E_INTERRUPTED, "interrupted");
    if (rc == NVF_OK && rs->hash_rc)
        rc = nvf_error_set(rs->hash_rc, "%s", rs->hash_msg);
    rs->prog.bytes_done = rs->prog.bytes_total;
    report(rs, 1);
    return rc;
}

int nvf_convert_run(nvf_convert_summary *out, const nvf_convert_options *opt) {
    nvf_ckpt *ck = NULL;
    run_state rs;
    char *jpath = NULL;
    int rc, dst_ready = 0, dst_existed = 1;
    memset(&rs, 0, sizeof rs);
    memset(out, 0, sizeof *out);
    rs.opt = opt;
    pthread_mutex_init(&rs.mu, NULL);
    pthread_cond_init(&rs.cv, NULL);
    if (opt->recipe->target != NVF_TARGET_FORMAT_MODELOPT) {
        rc = nvf_error_set(NVF_E_NOTIMPL, "target '%s' is not implemented yet (use modelopt)",
                           opt->recipe->target == NVF_TARGET_FORMAT_PREPARED_W4A16
                               ? "prepared-w4a16"
                               : "prepared-w4a4");
        goto done;
    }
    if ((rc = nvf_ckpt_open(&ck, opt->src)) != NVF_OK)
        goto done;
    rs.ck = ck;
    if (nvf_path_is_dir(opt->dst) && same_dir(ck->dir, opt->dst)) {
        rc = nvf_error_set(NVF_E_INVALID, "DST '%s' is the source directory", opt->dst);
        goto done;
    }
    dst_existed = nvf_path_is_dir(opt->dst);
    if ((rc = cv_plan_build(&rs.p, ck, opt)) != NVF_OK ||
        (rc = cv_plan_input_scales(rs.p, opt->input_amax_path)) != NVF_OK ||
        (rc = prepare_dst(opt)) != NVF_OK || !(dst_ready = 1) ||
        (rc = list_sources(&rs)) != NVF_OK || (rc = make_key(&rs)) != NVF_OK)
        goto done;
    rs.journal = cJSON_CreateObject();
    jpath = nvf_path_join(opt->dst, NVF_CONVERT_JOURNAL);
    if (!rs.journal || !jpath || !cJSON_AddStringToObject(rs.journal, "key", rs.key) ||
        !cJSON_AddArrayToObject(rs.journal, "shards")) {
        rc = nvf_error_set(NVF_E_NOMEM, "no memory for the journal");
        goto done;
    }
    rs.prog.bytes_total = rs.p->total_size;
    rs.prog.tensors_total = rs.p->n_outs;
    rs.prog.shards_total = rs.p->n_shards;
    if (opt->resume && (rc = resume_shards(&rs, jpath)) != NVF_OK)
        goto done;
    nvf_log(NVF_LOG_INFO,
            "converting %zu tensors (%llu to quantize) into %zu output tensors in %zu shards on %s",
            ck->n_tensors, (unsigned long long)rs.p->counts.tensors_quantized, rs.p->n_outs,
            rs.p->n_shards, opt->device.name);
    if ((rc = run_pipeline(&rs)) != NVF_OK || (rc = remove_stale(&rs)) != NVF_OK ||
        (rc = finish_outputs(&rs)) != NVF_OK)
        goto done;
    *out = rs.p->counts;
    out->shards = rs.p->n_shards;
done:
    if (rc != NVF_OK && dst_ready) {
        /* Leave nothing that looks complete: no temporary file, no manifest. */
        int saved = nvf_error_code();
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", nvf_error_last());
        clear_outputs(opt->dst, 0);
        if (!dst_existed)
            rmdir(opt->dst); /* only when nothing is left in it (no finished shard to resume) */
        nvf_error_set(saved, "%s", msg);
    }
    free(jpath);
    free(rs.key);
    cJSON_Delete(rs.journal);
    free(rs.items);
    for (size_t i = 0; i < rs.n_src; i++)
        free(rs.src_names[i]);
    free(rs.src_names);
    free(rs.src_bytes);
    free(rs.src_sha);
    cv_plan_free(rs.p);
    nvf_ckpt_close(ck);
    pthread_mutex_destroy(&rs.mu);
    pthread_cond_destroy(&rs.cv);
    return rc;
}
