#ifndef NVFP4_VERSION_H
#define NVFP4_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/** The tool's version, "MAJOR.MINOR.PATCH". */
const char *nvf_version(void);

#ifdef __cplusplus
}
#endif
#endif
