/*
 * Small file helpers shared by every writer: whole-file reads, atomic writes
 * (PATH.tmp + fsync + rename + directory fsync), directory creation.
 */
#ifndef NVFP4_FILEIO_H
#define NVFP4_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Open `path` for reading (O_CLOEXEC) and check that it is a regular file: *fd is the
 * descriptor and *st its fstat. @return 0, or NVF_E_IO naming the file, with nothing left open.
 */
int nvf_file_open_regular(int *fd, struct stat *st, const char *path);

/**
 * Read a whole (small) file into a NUL-terminated buffer. Refuses files over `max_len` bytes
 * (NVF_E_FORMAT). The caller frees *out with free().
 */
int nvf_file_read_all(char **out, size_t *out_len, const char *path, size_t max_len);

/**
 * Create the temporary file `tmp` (NAME.tmp beside an output) for writing (opened read-write, so
 * that a writer may read its bytes back before renaming it): a stale file of that
 * name is removed first (a symbolic link itself, never what it points to), then the file is
 * created with O_EXCL | O_NOFOLLOW, so nothing planted at that name is ever written through.
 * @return the descriptor, or -1 with NVF_E_IO set naming the file.
 */
int nvf_file_create_tmp(const char *tmp);

/** Write `len` bytes to PATH atomically: PATH.tmp, fsync, rename, fsync of the directory. */
int nvf_file_write_atomic(const char *path, const void *data, size_t len);

/** fsync the directory that holds `path` (or `path` itself if it is a directory). */
int nvf_fsync_parent_dir(const char *path);

/** mkdir -p with mode 0755. */
int nvf_mkdir_p(const char *path);

/** Join a directory and a file name into a newly allocated string; NULL on no memory. */
char *nvf_path_join(const char *dir, const char *name);

/** Whether `path` exists and is a directory / a regular file. */
int nvf_path_is_dir(const char *path);
int nvf_path_is_file(const char *path);

/** Copy a file atomically (PATH.tmp + fsync + rename). */
int nvf_file_copy(const char *dst, const char *src);

#ifdef __cplusplus
}
#endif
#endif
