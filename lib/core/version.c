#include "nvfp4/version.h"

const char *nvf_version(void) {
    return NVFP4_VERSION;
}
