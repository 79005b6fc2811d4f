/*
 * The stage profile of a conversion (convert_profile.c): wall seconds each thread role spends
 * busy and waiting, measured with CLOCK_MONOTONIC. Each timed interval is one relaxed atomic add
 * into a process-wide counter (a few per job or per 4 MiB chunk), so the cost is negligible and
 * the hot path takes no lock. nvf_convert_run() resets it; nvf_convert_profile_to_json() and
 * nvf_convert_profile_print() report it.
 */
#ifndef NVFP4_CONVERT_PROFILE_H
#define NVFP4_CONVERT_PROFILE_H

#include <stdint.h>

/* What an interval was spent on (each belongs to one thread role). */
typedef enum cv_prof_key {
    CV_P_BACKEND_OPEN,   /* compute: opening its backend */
    CV_P_COMPUTE,        /* compute: a job (source pages, backend compute, packing) */
    CV_P_STAGE,          /* compute, within CV_P_COMPUTE: reading sources into host buffers */
    CV_P_RELEASE,        /* compute: dropping consumed source pages (madvise) */
    CV_P_WAIT_MEMORY,    /* compute: waiting for the host-memory budget */
    CV_P_WAIT_HANDOVER,  /* compute: waiting for its turn to hand a job to the writers */
    CV_P_WRITE,          /* writer: pwrite of a buffered job's pieces */
    CV_P_COPY,           /* writer: streaming a copied tensor from the source mapping */
    CV_P_OPEN,           /* writer: opening a shard (header) */
    CV_P_PUBLISH,        /* writer: publish after a job, close after a shard's last */
    CV_P_WAIT_JOB,       /* writer: waiting for the next job in order */
    CV_P_WAIT_HASHER,    /* writer: waiting for a hasher slot */
    CV_P_WAIT_SHARD,     /* hasher: idle, waiting for a shard */
    CV_P_SHA_READ,       /* hasher: reading the shard back (pread, page cache) */
    CV_P_SHA,            /* hasher: SHA-256 of the bytes read */
    CV_P_WAIT_PUBLISHED, /* hasher: waiting for the writer to publish (or close) */
    CV_P_CRC_WALL,       /* hasher: waiting for its CRC-32 thread after the SHA-256 */
    CV_P_FINALIZE,       /* hasher: fsync, rename, directory fsync */
    CV_P_JOURNAL,        /* hasher: recording the shard in the journal */
    CV_P_CRC,            /* CRC-32 threads: read back and CRC, summed */
    CV_P_SOURCE_HASH,    /* core pool: source-file SHA-256, summed over files */
    CV_P_FINISH,         /* the finish: stale shards, index, configs, manifest (or part record) */
    CV_P_N
} cv_prof_key;

/* The thread roles, for their counts. */
typedef enum cv_prof_role {
    CV_R_COMPUTE,
    CV_R_WRITER,
    CV_R_HASHER,
    CV_R_POOL, /* the core pool (source hashing) */
    CV_R_CRC,  /* CRC-32 threads, one beside each hasher */
    CV_R_N
} cv_prof_role;

/** Zero every counter and start the run clock. */
void cv_prof_reset(void);
/** Now, CLOCK_MONOTONIC nanoseconds. */
uint64_t cv_prof_now(void);
/** Add now - since to `k`. @return now (the start of the next interval). */
uint64_t cv_prof_add(cv_prof_key k, uint64_t since);
/** One compute worker's busy nanoseconds (CV_P_COMPUTE), for the largest over workers. */
void cv_prof_worker_busy(uint64_t ns);
/** A source file hashed now (its end, for when the source hashing finished). */
void cv_prof_source_done(void);
/** One writer thread's busy nanoseconds (write, copy, open, publish), for the largest. */
void cv_prof_writer_busy(uint64_t ns);
/** A writer's last job written (the latest is kept: for the hashers' tail after it). */
void cv_prof_writer_done(void);
/** The pipeline's start (start = 1) or end. */
void cv_prof_pipeline(int start);
/** `n` threads of `role` (the largest count set in a run is kept). */
void cv_prof_threads(cv_prof_role role, int n);
/** The calling thread's CPU nanoseconds so far (CLOCK_THREAD_CPUTIME_ID). */
uint64_t cv_prof_thread_cpu(void);
/** Add `ns` CPU nanoseconds to `role` (its threads' own CPU time, beside their wall time). */
void cv_prof_cpu(cv_prof_role role, uint64_t ns);
/** The run's end (for the run seconds). */
void cv_prof_end(void);
/** Name the calling thread (at most 15 characters shown by top -H); printf format. */
void cv_prof_name_thread(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
