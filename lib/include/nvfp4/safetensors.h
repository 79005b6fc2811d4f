/*
 * safetensors files: a validating reader (mmap) and a streaming writer.
 *
 * The byte layout of a file:
 *   1. 8 bytes: N, the header length, unsigned little-endian (N <= 100,000,000).
 *   2. N bytes: a UTF-8 JSON object. Key "__metadata__" (optional) maps strings to strings;
 *      every other key names a tensor: {"dtype": "BF16", "shape": [r, c], "data_offsets": [b, e]}.
 *      Trailing JSON whitespace (the writer pads with spaces to 8-byte alignment) is allowed.
 *   3. The data area: tensors' bytes at [8 + N + b, 8 + N + e). Sorted by offset, the tensors
 *      tile the area exactly from 0, with no gap, overlap or trailing byte.
 */
#ifndef NVFP4_SAFETENSORS_H
#define NVFP4_SAFETENSORS_H

#include "nvfp4/dtype.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NVF_ST_MAX_DIMS   8
#define NVF_ST_MAX_HEADER 100000000ull

typedef struct nvf_st_tensor {
    char *name; /* owned by the file */
    nvf_dtype dtype;
    int32_t ndim; /* 0 for a scalar */
    int64_t shape[NVF_ST_MAX_DIMS];
    uint64_t numel;      /* product of shape (1 for a scalar) */
    uint64_t begin, end; /* offsets relative to the data area */
    const uint8_t *data; /* into the mapping; NULL when parsed from a buffer */
} nvf_st_tensor;

/**
 * An open (or parsed) safetensors file. Only nvf_st_open() and nvf_st_parse() make one: it
 * carries private state beyond these fields (the name index, the mapping), so never declare
 * or copy one.
 */
typedef struct nvf_st_file {
    char *path;
    uint64_t file_size;
    uint64_t header_len; /* N */
    uint64_t data_start; /* 8 + N */
    size_t n_tensors;
    nvf_st_tensor *tensors; /* in data-offset order */
    size_t n_meta;
    char **meta_keys, **meta_values; /* __metadata__ in file order */
} nvf_st_file;

/**
 * Open, mmap and validate a safetensors file (every rule of SPEC section 3).
 * @return 0; NVF_E_IO when it cannot be opened or mapped; NVF_E_FORMAT when malformed (the
 * message reads "invalid safetensors file 'PATH': PROBLEM", naming the tensor and value).
 * The caller owns *out and frees it with nvf_st_close().
 */
int nvf_st_open(nvf_st_file **out, const char *path);

/**
 * Validate a file whose first `len` bytes are in `buf` and whose total size is `file_size`
 * (len >= 8 + N unless the header itself is truncated). `path` is used in messages only.
 * Tensors' `data` pointers are NULL. This is the entry point of the fuzz target.
 */
int nvf_st_parse(nvf_st_file **out, const char *path, const uint8_t *buf, size_t len,
                 uint64_t file_size);

/** Unmap and free; NULL is fine. */
void nvf_st_close(nvf_st_file *f);

/** The tensor called `name`, or NULL. O(log n). */
const nvf_st_tensor *nvf_st_find(const nvf_st_file *f, const char *name);

/** The value of metadata key `key`, or NULL. */
const char *nvf_st_meta(const nvf_st_file *f, const char *key);

/** Declaration of one tensor for the writer. */
typedef struct nvf_st_entry {
    const char *name;
    nvf_dtype dtype;
    int32_t ndim;
    int64_t shape[NVF_ST_MAX_DIMS];
} nvf_st_entry;

typedef struct nvf_st_writer nvf_st_writer;

/**
 * Start writing `path`: the header (all `n` tensors, data in the order given, plus
 * __metadata__ {"format": "pt"} and the `n_meta` extra key/value pairs) is written at once to
 * "PATH.tmp", padded with spaces so that the data area starts 8-byte aligned. Data is then
 * appended with nvf_st_writer_write(), in declaration order, in chunks of any size, or written
 * with nvf_st_writer_write_at() as pieces of tensors in any order (a writer uses one or the
 * other).
 * Names must be unique (NVF_E_INVALID otherwise). The caller frees the writer with
 * nvf_st_writer_finish() or nvf_st_writer_abort().
 */
int nvf_st_writer_open(nvf_st_writer **out, const char *path, const nvf_st_entry *entries, size_t n,
                       const char *const *meta_keys, const char *const *meta_values, size_t n_meta);

/** Append `len` bytes of tensor data. Writing past the declared total is NVF_E_INVALID. */
int nvf_st_writer_write(nvf_st_writer *w, const void *data, size_t len);

/**
 * Write bytes [off, off + len) of tensor `tensor` (declaration index), in any order.
 * Every byte of every tensor must be written exactly once: a piece outside the tensor, or one
 * that would bring its count of written bytes past its size, is NVF_E_INVALID (the writer then
 * fails). One thread at a time. @return 0, NVF_E_INVALID, NVF_E_IO.
 */
int nvf_st_writer_write_at(nvf_st_writer *w, size_t tensor, uint64_t off, const void *data,
                           size_t len);

/**
 * Check that every declared byte was written (per tensor for nvf_st_writer_write_at) and write
 * out what is buffered; after it the writer takes no more data. Idempotent. @return 0,
 * NVF_E_INVALID naming the first tensor not fully written (the writer then fails), NVF_E_IO.
 */
int nvf_st_writer_complete(nvf_st_writer *w);

/** Write out the bytes gathered so far (they become visible to nvf_st_writer_read_at()).
 * @return 0 or NVF_E_IO. */
int nvf_st_writer_flush(nvf_st_writer *w);

/**
 * Read bytes [off, off + len) of the file (header included) back from PATH.tmp: bytes already
 * written out (nvf_st_writer_flush, nvf_st_writer_complete). Safe from other threads while one
 * thread writes other bytes (pread); the caller orders it after the writes it reads.
 * @return 0, NVF_E_INVALID (outside the file), NVF_E_IO.
 */
int nvf_st_writer_read_at(const nvf_st_writer *w, uint64_t off, void *buf, size_t len);

/** The file offset of tensor `tensor`'s first byte (header length + its data offset). */
uint64_t nvf_st_writer_tensor_offset(const nvf_st_writer *w, size_t tensor);

/**
 * The header bytes written at open (8-byte length, JSON, padding), so that a caller can hash
 * the file as it is written without reading it back: header, then every chunk it passes to
 * nvf_st_writer_write(), is the file. Owned by the writer; valid until finish/abort.
 */
const uint8_t *nvf_st_writer_header(const nvf_st_writer *w, size_t *len);

/** Bytes the data area will hold in all (the sum of every tensor's size). */
uint64_t nvf_st_writer_data_size(const nvf_st_writer *w);

/** The declared size of the whole file (8 + N + data). */
uint64_t nvf_st_writer_file_size(const nvf_st_writer *w);

/**
 * Check every declared byte was written (nvf_st_writer_complete), fsync, rename PATH.tmp to
 * PATH, fsync the directory, free the writer. On failure the temporary file is removed and PATH is
 * left untouched.
 */
int nvf_st_writer_finish(nvf_st_writer *w);

/** Remove the temporary file and free the writer; NULL is fine. */
void nvf_st_writer_abort(nvf_st_writer *w);

/**
 * Write a whole file in one call (tensor i's bytes at data[i]): open, write, finish.
 */
int nvf_st_write_file(const char *path, const nvf_st_entry *entries, const void *const *data,
                      size_t n);

/* model.safetensors.index.json ------------------------------------------------------------- */

typedef struct nvf_st_index {
    uint64_t total_size;   /* metadata.total_size */
    size_t n;              /* weight_map entries */
    char **names, **files; /* weight_map, sorted by tensor name */
    size_t n_files;
    char **file_list; /* distinct shard file names, sorted */
} nvf_st_index;

/**
 * Read and validate an index file: a JSON object with "weight_map" mapping each tensor name
 * (once; duplicate keys rejected) to a shard file name without '/' or "..", and optional
 * "metadata" whose "total_size" is a non-negative integer (number or numeric string).
 * @return 0 or NVF_E_IO / NVF_E_FORMAT. Free with nvf_st_index_free().
 */
int nvf_st_index_read(nvf_st_index **out, const char *path);

/** The shard file holding `name`, or NULL. */
const char *nvf_st_index_file(const nvf_st_index *idx, const char *name);

/** Write an index atomically (tmp + fsync + rename); entries need not be sorted. */
int nvf_st_index_write(const char *path, uint64_t total_size, const char *const *names,
                       const char *const *files, size_t n);

void nvf_st_index_free(nvf_st_index *idx);

#ifdef __cplusplus
}
#endif
#endif
