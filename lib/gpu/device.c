#include "nvfp4/device.h"

#include "nvfp4/log.h"
#include "nvfp4/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef NVFP4_HAVE_CUDA
#include "kernels/device_probe.h"
#endif

int nvf_cuda_compiled(void) {
#ifdef NVFP4_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int nvf_cuda_device_count(void) {
#ifdef NVFP4_HAVE_CUDA
    int n = 0;
    if (nvf_cuda_probe(&n) != 0)
        return 0;
    return n;
#else
    return 0;
#endif
}

static void set_cpu(nvf_device *out) {
    out->kind = NVF_DEVICE_CPU;
    out->index = 0;
    snprintf(out->name, sizeof out->name, "cpu");
}

static int set_cuda(nvf_device *out, int index) {
    out->kind = NVF_DEVICE_CUDA;
    out->index = index;
#ifdef NVFP4_HAVE_CUDA
    if (nvf_cuda_name(index, out->name, (int)sizeof out->name) != 0)
        snprintf(out->name, sizeof out->name, "cuda:%d", index);
#endif
    return NVF_OK;
}

int nvf_device_select(nvf_device *out, const char *spec) {
    if (!spec || strcmp(spec, "auto") == 0) {
        int n = nvf_cuda_device_count();
        if (n > 0) {
            set_cuda(out, 0);
            nvf_log(NVF_LOG_INFO, "device: cuda:0 (%s)", out->name);
        } else {
            set_cpu(out);
            nvf_log(NVF_LOG_INFO, "device: cpu (%s)",
                    nvf_cuda_compiled() ? "no working CUDA GPU found"
                                        : "this build has no CUDA support");
        }
        return NVF_OK;
    }
    if (strcmp(spec, "cpu") == 0) {
        set_cpu(out);
        nvf_log(NVF_LOG_INFO, "device: cpu");
        return NVF_OK;
    }
    if (strncmp(spec, "cuda", 4) == 0 && (spec[4] == '\0' || spec[4] == ':')) {
        long index = 0;
        if (spec[4] == ':') {
            char *end;
            index = strtol(spec + 5, &end, 10);
            if (end == spec + 5 || *end != '\0' || index < 0 || index > 1024)
                return nvf_error_set(NVF_E_INVALID, "bad device '%s': expected cuda:N", spec);
        }
        if (!nvf_cuda_compiled())
            return nvf_error_set(NVF_E_DEVICE,
                                 "device '%s' requested but this build has no CUDA support", spec);
        int n = nvf_cuda_device_count();
        if (index >= n)
            return nvf_error_set(NVF_E_DEVICE, "device '%s' requested but %d CUDA device%s found",
                                 spec, n, n == 1 ? " is" : "s are");
        set_cuda(out, (int)index);
        nvf_log(NVF_LOG_INFO, "device: cuda:%ld (%s)", index, out->name);
        return NVF_OK;
    }
    return nvf_error_set(NVF_E_INVALID, "bad device '%s': expected auto, cpu, cuda or cuda:N",
                         spec);
}
