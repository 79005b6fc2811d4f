/*
 * The input scales of a plan's quantization jobs, from the --input-amax file.
 */
#include "convert_internal.h"

#include "io/json_strict.h"

#include "nvfp4/format.h"
#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <math.h>

/*
 * --input-amax: {"MODULE": amax, ...} with the calibrated maximum magnitude of each module's
 * input. ModelOpt writes the NVFP4 activation scale as amax / (6 * 448) (E2M1 max times E4M3
 * max; NVFP4QTensor.get_weights_scaling_factor_2 applied to the input quantizer's amax), and the
 * loaders multiply by it; the members of a group share one input, so they take the largest
 * amax of the group.
 */
int cv_plan_input_scales(cv_plan *p, const char *path) {
    if (!path)
        return NVF_OK;
    cJSON *doc = NULL;
    int rc = nvf_json_read_strict(&doc, path, 256u << 20, "--input-amax file", NVF_E_INVALID);
    if (rc != NVF_OK)
        return rc;
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return nvf_error_set(NVF_E_INVALID, "--input-amax '%s': not a JSON object", path);
    }
    size_t used = 0, entries = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, doc) {
        entries++;
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble <= 0 ||
            it->valuedouble > 3.0e38) {
            rc = nvf_error_set(NVF_E_INVALID,
                               "--input-amax '%s': '%s' must be a positive finite number", path,
                               it->string);
            goto done;
        }
    }
    for (size_t i = 0; i < p->n_jobs; i++) {
        cv_job *j = &p->jobs[i];
        if (j->kind != CV_JOB_QUANT)
            continue;
        float amax = 0.0f;
        for (size_t k = 0; k < j->n_members; k++) {
            for (int h = 0; h < 2; h++) {
                const cJSON *v =
                    j->members[k].module[h]
                        ? cJSON_GetObjectItemCaseSensitive(doc, j->members[k].module[h])
                        : NULL;
                if (v) {
                    used++;
                    if ((float)v->valuedouble > amax)
                        amax = (float)v->valuedouble;
                }
            }
        }
        if (amax > 0.0f) {
            j->input_scale = amax / (NVF_E2M1_MAX * NVF_E4M3_MAX);
            if (!(j->input_scale > 0.0f)) {
                rc = nvf_error_set(NVF_E_INVALID,
                                   "--input-amax '%s': amax %g of '%s' gives input_scale 0", path,
                                   (double)amax, j->members[0].module[0]);
                goto done;
            }
        }
    }
    if (used < entries)
        nvf_log(NVF_LOG_WARN, "--input-amax '%s': %zu of %zu entries name no converted module",
                path, entries - used, entries);
done:
    cJSON_Delete(doc);
    return rc;
}
