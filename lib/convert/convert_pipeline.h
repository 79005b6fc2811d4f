/*
 * The pipeline's state, shared by convert_pipeline.c (the processing order, the memory budget,
 * the compute workers, the run) and convert_writer.c (the writer and hasher threads).
 *
 * The live jobs (of shards neither reused nor another part's) are processed in an order that
 * deals the live shards out in groups of n_writers consecutive shards: within a group the
 * shards' jobs are interleaved (the next job is always of the shard with the fewest output bytes
 * dealt so far), so the group's shards grow side by side, each written by its own writer thread
 * (the shard's place in its group) into its own file. The compute workers hand the jobs over in
 * that order: position `handed` is the next one, and writer k takes the positions of its shards
 * in turn. A shard's jobs keep their plan order, so each file gets the same bytes as with one
 * writer; only the order of the files' writes changes.
 *
 * A compute worker claims the next unclaimed position when it is free (so a long job holds up
 * one worker, not the others) and marks it ready when computed, without waiting for the earlier
 * positions: `handed` then moves over the ready positions that follow it.
 */
#ifndef NVFP4_CONVERT_PIPELINE_H
#define NVFP4_CONVERT_PIPELINE_H

#include "convert_internal.h"

#include "nvfp4/status.h"

#include <pthread.h>
#include <stdint.h>

/* Shards hashed side by side at most (a writer waits for one to finish beyond it): each is a
 * sequential SHA-256 stream, so several keep the cores busy while bounding the shards whose
 * bytes the page cache must still hold. Also the most writer threads (one shard open each). */
#define CV_HASHERS 4

/* A handed-over job's buffer (NULL for a copy job, or once its writer took it) and its bytes
 * counted in the budget. */
typedef struct cv_item {
    uint8_t *buf;
    uint64_t cost;
} cv_item;

typedef struct cv_pending_shard {
    cv_writer *w;
    size_t shard;
} cv_pending_shard;

typedef struct cv_pipeline {
    cv_run *r;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* The processing order: live job order[i] goes to writer slot[i]. */
    size_t n_order;
    size_t *order;
    unsigned char *slot;
    size_t n_writers;     /* 1 .. CV_HASHERS */
    cv_item *items;       /* by position: positions [0, handed) are handed over */
    unsigned char *ready; /* by position: computed (or a copy job), handed over or not */
    size_t claimed;       /* the next position a compute worker takes */
    size_t handed;        /* the first position not ready (the one the writers need next) */
    uint64_t inflight;    /* bytes of buffers reserved by the compute workers, not yet written */
    uint64_t queued;      /* the part of them handed to the writers */
    int compute_failed;   /* a compute worker failed: the others stop */
    int failed;           /* status of a writer's or hasher's failure */
    nvf_error_state fail;
    int abort; /* the compute failed or stopped: the writers leave */
    int hash_rc;
    nvf_error_state hash_err;
    /* Shards opened and handed to the hashers (a ring of CV_HASHERS), under mu. */
    cv_pending_shard fin[CV_HASHERS];
    size_t n_named;            /* hasher threads named so far (nvf-hashN) */
    size_t n_writers_named;    /* writer threads named so far (nvf-writerN) */
    size_t fin_head, fin_tail; /* queued: [fin_head, fin_tail) */
    size_t pending;            /* queued or being hashed */
    int fin_end;               /* the writers are done: hashers leave once the ring is empty */
    /* The progress counters and the journal, touched by the writers and the hashers. */
    pthread_mutex_t prog_mu;
} cv_pipeline;

/** The processing order of the live jobs (pl->order, slot, n_writers) for at most `writers`
 * writer threads (NVFP4_CONVERT_WRITERS). @return 0 or NVF_E_NOMEM. */
int cv_pipeline_order(cv_pipeline *pl, size_t writers);

/** Writer thread: writes the positions of its slot (the pipeline's own counter picks it). */
void *cv_writer_main(void *arg);

/** Hasher thread: finishes the shards the writers open (SHA-256, CRCs, rename, journal). */
void *cv_hasher_main(void *arg);

/** Whether the run was asked to stop (SIGINT). */
int cv_pipeline_stopped(const cv_pipeline *pl);

/** Quit callback of the hashing (the pipeline failing or stopping). */
int cv_pipeline_quit(void *ctx);

/** Report progress (final: the last report). */
void cv_pipeline_report(cv_run *r, int final);

#endif
