/*
 * What an open safetensors file holds beyond the public fields of nvf_st_file: the name index
 * and the mapping. Library-internal (lib/io builds them; lib/convert advises the kernel on the
 * mapped pages of its sources).
 */
#ifndef NVFP4_IO_ST_FILE_H
#define NVFP4_IO_ST_FILE_H

#include "nvfp4/safetensors.h"

#include <stddef.h>
#include <stdint.h>

/** Every nvf_st_file that nvf_st_open() or nvf_st_parse() hands out is the `pub` member. */
typedef struct nvf_st_file_priv {
    nvf_st_file pub; /* first: a nvf_st_file * is a nvf_st_file_priv * */
    size_t *by_name; /* indices into pub.tensors, sorted by name */
    void *map;       /* the whole file, mapped by nvf_st_open; NULL when parsed from a buffer */
    size_t map_len;
    uint64_t dev, ino; /* the mapped file's identity (st_dev, st_ino), for readers that reopen it */
} nvf_st_file_priv;

static inline const nvf_st_file_priv *nvf_st_priv_of(const nvf_st_file *f) {
    return (const nvf_st_file_priv *)f;
}

#endif
