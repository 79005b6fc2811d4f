/*
 * The bytes of one buffered job, computed on the worker's backend (CPU or GPU, the same bytes):
 *   - a quantization group: amax over every member, the group scale from it, each member
 *     quantized with it (one backend call, so a GPU uploads each member once), then laid out by
 *     the target;
 *   - an FP8 (or other) tensor written as BF16: bf16(RN(f32(x) * scale)), matrix by matrix.
 * A NaN or infinity stops both unless --allow-nonfinite: one rule for every computed tensor.
 */
#include "convert_internal.h"
#include "convert_profile.h"

#include "ckpt/ckpt_source.h"
#include "io/st_file.h"

#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int stopped(const cv_run *r) {
    return r->opt->stop && *r->opt->stop;
}

static const char *file_of(const cv_run *r, size_t ti) {
    return r->ck->files[r->ck->tensors[ti].file].st->path;
}

/* Say which source file holds the tensor an error names (the members of a group nearly always
 * share one file; when they do not, both are named). */
static int name_files(int rc, const cv_run *r, const cv_job *j) {
    const char *a = file_of(r, j->members[0].tensor), *b = NULL;
    for (size_t k = 1; k < j->n_members && !b; k++)
        if (strcmp(file_of(r, j->members[k].tensor), a) != 0)
            b = file_of(r, j->members[k].tensor);
    if (b)
        nvf_error_prefix("'%s' or '%s'", a, b);
    else
        nvf_error_prefix("'%s'", a);
    return rc;
}

/* Bytes rounded up to the host buffer's alignment (each part of a job starts on 256 bytes). */
static size_t part_bytes(uint64_t n) {
    return (size_t)((n + 255) / 256 * 256);
}

/* What a job may use of the backend's host buffer, which stays allocated for the run (so at
 * most this per worker; NVFP4_CONVERT_HOST_KEEP=BYTES sets it, for tests): a job whose results
 * and staged members need more reads its members in place and puts its results in memory of
 * its own, freed after it. */
#define HOST_KEEP_MAX ((uint64_t)256 << 20)

void cv_compute_settings(cv_run *r) {
    const char *e = getenv("NVFP4_CONVERT_STAGE");
    r->stage = e && *e ? strcmp(e, "0") != 0 : -1;
    e = getenv("NVFP4_CONVERT_HOST_KEEP");
    r->host_keep = e && *e ? strtoull(e, NULL, 10) : HOST_KEEP_MAX;
}

/* Whether to read the job's members into the backend's host buffer before computing:
 * NVFP4_CONVERT_STAGE=0|1 when set (for tests and measurements), else the backend's
 * preference; never for a source without a file mapping. */
static int stage_members(nvf_backend *b, const cv_run *r, const cv_job *j) {
    int want = r->stage >= 0 ? r->stage : nvf_backend_prefers_staged(b);
    for (size_t k = 0; k < j->n_members && want; k++) {
        const nvf_st_file *f = r->ck->files[r->ck->tensors[j->members[k].tensor].file].st;
        want = nvf_st_priv_of(f)->map != NULL;
    }
    return want;
}

/* Read member `m`'s values from its file into `dst` (pread at the offset its mapping has them
 * at: one copy from the page cache, no page faults), through `*fd` open on file `*fd_file`
 * (reopened when the member is in another file). */
static int read_member(uint8_t *dst, const cv_run *r, const cv_member *m, int *fd,
                       size_t *fd_file) {
    size_t file = r->ck->tensors[m->tensor].file;
    const nvf_st_file *f = r->ck->files[file].st;
    const uint8_t *map = nvf_st_priv_of(f)->map;
    if (*fd < 0 || *fd_file != file) {
        if (*fd >= 0)
            close(*fd);
        char doing[512];
        snprintf(doing, sizeof doing, "reading '%s'", r->ck->tensors[m->tensor].st->name);
        *fd_file = file;
        int rc = cv_source_reopen(f, fd, doing);
        if (rc != NVF_OK)
            return rc;
    }
    uint64_t off = (uint64_t)((const uint8_t *)m->src.data - map), len = cv_member_bytes(m);
    for (uint64_t done = 0; done < len;) {
        size_t want = len - done < ((size_t)1 << 30) ? (size_t)(len - done) : (size_t)1 << 30;
        ssize_t got = pread(*fd, dst + done, want, (off_t)(off + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return nvf_error_set(
                NVF_E_IO, "'%s': reading %llu bytes of '%s' at offset %llu: %s", f->path,
                (unsigned long long)len, r->ck->tensors[m->tensor].st->name,
                (unsigned long long)(off + done),
                got < 0 ? strerror(errno) : "the file ended early (changed since it was opened?)");
        done += (uint64_t)got;
    }
    return NVF_OK;
}

/*
 * A quantization group. Its outputs go to the backend's host buffer (pinned on a GPU, so its
 * downloads need no CPU copy; reused, so no fresh pages per job), followed there by the
 * members' values when the backend prefers them staged (stage_members); a job larger than
 * r->host_keep uses memory of its own instead, its members read in place.
 */
static int compute_quant(uint8_t *buf, const cv_run *r, nvf_backend *b, const cv_job *j) {
    nvf_quant_source srcs[CV_MAX_MEMBERS];
    const char *names[CV_MAX_MEMBERS];
    uint8_t *packed[CV_MAX_MEMBERS] = {NULL}, *scales[CV_MAX_MEMBERS] = {NULL};
    uint64_t out = 0, in = 0;
    for (size_t k = 0; k < j->n_members; k++) {
        uint64_t n = (uint64_t)j->members[k].src.rows * (uint64_t)j->members[k].src.cols;
        out += part_bytes(n / 2) + part_bytes(n / NVF_BLOCK);
        in += part_bytes(cv_member_bytes(&j->members[k]));
    }
    uint64_t keep = r->host_keep;
    int stage = out + in <= keep && stage_members(b, r, j);
    void *host = NULL, *own = NULL;
    int rc = NVF_OK;
    if (out + (stage ? in : 0) <= keep)
        rc = nvf_backend_host_buffer(b, &host, (size_t)(out + (stage ? in : 0)));
    else if (!(host = own = malloc((size_t)out + 1)))
        rc = nvf_error_set(NVF_E_NOMEM, "no memory to quantize '%s'", j->members[0].module[0]);
    uint8_t *at = host;
    int fd = -1;
    size_t fd_file = 0;
    for (size_t k = 0; k < j->n_members && rc == NVF_OK; k++) {
        const cv_member *m = &j->members[k];
        uint64_t n = (uint64_t)m->src.rows * (uint64_t)m->src.cols;
        srcs[k] = m->src;
        names[k] = r->ck->tensors[m->tensor].st->name;
        packed[k] = at;
        scales[k] = at + part_bytes(n / 2);
        at = scales[k] + part_bytes(n / NVF_BLOCK);
        if (stage) {
            uint64_t t = cv_prof_now();
            rc = read_member(at, r, m, &fd, &fd_file);
            cv_prof_add(CV_P_STAGE, t);
            srcs[k].data = at;
            at += part_bytes(cv_member_bytes(m));
        }
    }
    if (fd >= 0)
        close(fd);
    float gs = 0.0f;
    if (rc == NVF_OK) {
        rc = nvf_backend_quantize_group(b, &gs, packed, scales, srcs, names, j->n_members,
                                        &r->opt->recipe->quant, r->opt->allow_nonfinite);
        if (rc != NVF_OK)
            name_files(rc, r, j);
    }
    const nvf_quant_params *qp = &r->opt->recipe->quant;
    if (rc == NVF_OK && nvf_quant_group_fallback(gs, qp))
        nvf_log(NVF_LOG_WARN,
                "'%s': group of '%s' is all zero: ModelOpt's arithmetic would write NaN scales, "
                "written as the default arithmetic writes it",
                file_of(r, j->members[0].tensor), names[0]);
    if (rc == NVF_OK && r->p->job_scale_2) /* this job's slot only: no other thread writes it */
        r->p->job_scale_2[j - r->p->jobs] = nvf_quant_group_decode(gs, qp);
    if (rc == NVF_OK)
        rc = r->target->pack_job(b, buf, j, packed, scales, nvf_quant_group_decode(gs, qp));
    free(own);
    return rc;
}

/*
 * One tensor (2-D, or 3-D matrix by matrix) to BF16. An empty tensor is written as it is (no
 * bytes), never sized by its other dimensions; otherwise the matrix count is bounded by the
 * tensor's bytes, which the safetensors reader checked against the file.
 */
static int compute_dequant(uint8_t *buf, const cv_run *r, nvf_backend *b, const cv_job *j) {
    size_t ti = j->members[0].tensor;
    const nvf_st_tensor *st = r->ck->tensors[ti].st;
    if (st->numel == 0)
        return NVF_OK;
    int64_t mats = st->ndim == 3 ? st->shape[0] : 1;
    uint8_t *p = buf;
    for (int64_t e = 0; e < mats; e++) {
        if (stopped(r))
            return nvf_error_set(NVF_E_INTERRUPTED, "interrupted while dequantizing '%s'",
                                 st->name);
        nvf_quant_source s;
        nvf_ckpt_source_view(&s, r->ck, ti, st->ndim == 3 ? e : -1);
        /* A matrix of a 3-D tensor is named NAME[e], so that [row, col] in a message is clear. */
        size_t len = strlen(st->name) + 24;
        char *name = malloc(len);
        if (!name)
            return nvf_error_set(NVF_E_NOMEM, "no memory to dequantize '%s'", st->name);
        if (st->ndim == 3)
            snprintf(name, len, "%s[%lld]", st->name, (long long)e);
        else
            snprintf(name, len, "%s", st->name);
        int rc = nvf_backend_dequant_bf16(b, p, &s, !r->opt->allow_nonfinite, name);
        free(name);
        if (rc != NVF_OK)
            return name_files(rc, r, j);
        p += (size_t)s.rows * (size_t)s.cols * 2;
    }
    return NVF_OK;
}

int cv_compute_job(uint8_t *buf, const cv_run *r, nvf_backend *b, const cv_job *j) {
    if (j->kind == CV_JOB_NVFP4)
        return cv_compute_nvfp4(buf, r, b, j);
    return j->kind == CV_JOB_QUANT ? compute_quant(buf, r, b, j) : compute_dequant(buf, r, b, j);
}
