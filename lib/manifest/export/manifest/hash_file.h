/*
 * One pass over a file that computes its SHA-256 and, for a safetensors file, the CRC-32 of
 * every tensor's bytes from the same chunks (lib/manifest/sha256.c). Library-internal: exported
 * by lib/manifest to the modules that link it (lib/convert re-hashes a kept shard on --resume);
 * not part of the public API.
 */
#ifndef NVFP4_MANIFEST_HASH_FILE_H
#define NVFP4_MANIFEST_HASH_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Read size of the hashing loop: small enough that the bytes read stay in the core's L2 cache
 * for the SHA-256 that reads them next (one SHA-256 stream 10-18% faster with 128 KiB than with
 * 8 MiB reads of a cached file on the development VM), large enough to amortize the call. */
#define NVF_HASH_READ ((size_t)128 << 10)
/* Bytes between two calls of the chunk callback (progress, stop). */
#define NVF_HASH_CHUNK ((size_t)8 << 20)

/** Running CRC-32s of a safetensors file's tensors (arrays of n, in data-offset order). */
typedef struct nvf_hash_tensors {
    uint64_t data_start; /* file offset of the data area */
    size_t n;
    const uint64_t *begin, *end; /* offsets relative to the data area */
    uint32_t *crc;               /* zero-initialized by the caller */
    size_t cursor;
} nvf_hash_tensors;

/** Feed `len` bytes found at data-area offset `at` into the tensors' CRCs. */
void nvf_hash_tensors_feed(nvf_hash_tensors *t, const uint8_t *p, uint64_t at, size_t len);

/** Called after each chunk with its byte count; a non-zero return stops the hashing. */
typedef int (*nvf_hash_chunk_fn)(void *user, uint64_t bytes);

/**
 * SHA-256 and size of the file at `path`, read with read() in NVF_HASH_READ pieces; with `t`,
 * the tensors' CRC-32s from the same bytes; `on_chunk` called every NVF_HASH_CHUNK bytes and at
 * the end. NVF_E_INTERRUPTED when `on_chunk` says stop.
 */
int nvf_hash_file_ex(char out[65], uint64_t *out_bytes, const char *path, nvf_hash_tensors *t,
                     nvf_hash_chunk_fn on_chunk, void *user);

/** The same for `fd`, open on `path` (named in messages) and read from its current offset;
 * the caller closes it. */
int nvf_hash_fd_ex(char out[65], uint64_t *out_bytes, int fd, const char *path, nvf_hash_tensors *t,
                   nvf_hash_chunk_fn on_chunk, void *user);

#endif
