/*
 * The validate report as JSON (schemas/validate.schema.json):
 *   1. "report_version": 1, "tool": {"name", "version"}, "command": "validate"
 *   2. "checkpoint", "format", "manifest" (present), "deep", "ep_ranks"
 *   3. "read": {"files", "tensors", "bytes", "seconds", "gb_per_s"}
 *   4. "findings": [{"id", "severity", "file", "tensor", "layer", "expert", "message"}], sorted
 *   5. "summary": {"errors", "warnings", "layers_verified"}, "pass"
 */
#include "validate_internal.h"

#include "io/json_build.h"
#include "nvfp4/version.h"

#include <stdlib.h>

static void int_or_null(nvf_jb *b, cJSON *o, const char *key, int64_t v) {
    if (v >= 0)
        nvf_jb_num(b, o, key, (double)v);
    else
        nvf_jb_null(b, o, key);
}

int nvf_validate_report_json(char **out, const nvf_validate_report *r) {
    nvf_jb b = {0};
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the validate report");
    nvf_jb_num(&b, doc, "report_version", 1);
    cJSON *tool = nvf_jb_obj(&b, doc, "tool");
    nvf_jb_str(&b, tool, "name", "nvfp4tool");
    nvf_jb_str(&b, tool, "version", nvf_version());
    nvf_jb_str(&b, doc, "command", "validate");
    nvf_jb_str(&b, doc, "checkpoint", r->checkpoint ? r->checkpoint : "");
    nvf_jb_str(&b, doc, "format", r->format);
    nvf_jb_bool(&b, doc, "manifest", r->manifest);
    nvf_jb_bool(&b, doc, "deep", r->deep);
    nvf_jb_num(&b, doc, "ep_ranks", (double)r->n_ranks);
    cJSON *rd = nvf_jb_obj(&b, doc, "read");
    nvf_jb_num(&b, rd, "files", (double)r->files);
    nvf_jb_num(&b, rd, "tensors", (double)r->tensors);
    nvf_jb_num(&b, rd, "bytes", (double)r->bytes_read);
    nvf_jb_num(&b, rd, "seconds", r->seconds);
    nvf_jb_num(&b, rd, "gb_per_s", r->seconds > 0 ? (double)r->bytes_read / r->seconds / 1e9 : 0.0);
    cJSON *arr = nvf_jb_arr(&b, doc, "findings");
    for (size_t i = 0; arr && i < r->findings.n; i++) {
        const nvf_finding *f = &r->findings.v[i];
        cJSON *o = cJSON_CreateObject();
        nvf_jb_push(&b, arr, o);
        if (!o)
            break;
        nvf_jb_str(&b, o, "id", f->id);
        nvf_jb_str(&b, o, "severity", f->severity);
        nvf_jb_str(&b, o, "file", f->file);
        nvf_jb_str(&b, o, "tensor", f->tensor);
        int_or_null(&b, o, "layer", f->layer);
        int_or_null(&b, o, "expert", f->expert);
        nvf_jb_str(&b, o, "message", f->message);
    }
    cJSON *sum = nvf_jb_obj(&b, doc, "summary");
    nvf_jb_num(&b, sum, "errors", (double)r->errors);
    nvf_jb_num(&b, sum, "warnings", (double)r->warnings);
    nvf_jb_num(&b, sum, "layers_verified", (double)r->layers_verified);
    nvf_jb_bool(&b, doc, "pass", r->pass);
    doc = nvf_jb_done(&b, doc);
    if (!doc)
        return nvf_error_set(NVF_E_NOMEM, "no memory for the validate report");
    *out = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    return *out ? NVF_OK : nvf_error_set(NVF_E_NOMEM, "no memory for the validate report");
}
