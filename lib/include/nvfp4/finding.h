/*
 * One findings type for every command that judges a checkpoint (validate, verify): a stable id
 * ("index.missing-tensor", "structure", ...), a severity, where (file, tensor, layer, expert) and
 * a message that names the file, the tensor and the offending value.
 */
#ifndef NVFP4_FINDING_H
#define NVFP4_FINDING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nvf_finding {
    char id[48];      /* stable id, e.g. "modelopt.gate-up-scale-mismatch" */
    char severity[8]; /* "error" or "warning" */
    char file[256];   /* relative to the checkpoint; "" when no one file */
    char tensor[256]; /* "" when no one tensor */
    int64_t layer;    /* -1: not one layer */
    int64_t expert;   /* -1: not one expert */
    char message[640];
} nvf_finding;

/** A growing list of findings. Zero-initialize; free with nvf_findings_free(). */
typedef struct nvf_findings {
    nvf_finding *v;
    size_t n, cap;
} nvf_findings;

/**
 * Append a finding (strings copied, cut at their capacity; `file` and `tensor` may be NULL);
 * layer and expert are -1.
 * @return 0 or NVF_E_NOMEM.
 */
int nvf_findings_add(nvf_findings *l, const char *id, const char *severity, const char *file,
                     const char *tensor, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

/** Append a copy of `f`. @return 0 or NVF_E_NOMEM. */
int nvf_findings_push(nvf_findings *l, const nvf_finding *f);

/**
 * Sort stably by (file, tensor, id, message): the order then depends on the findings alone,
 * never on the order the checks ran in.
 */
void nvf_findings_sort(nvf_findings *l);

/** Count the findings of severity "error". */
size_t nvf_findings_errors(const nvf_findings *l);

/** Free the list's storage and zero it; NULL is fine. */
void nvf_findings_free(nvf_findings *l);

#ifdef __cplusplus
}
#endif
#endif
