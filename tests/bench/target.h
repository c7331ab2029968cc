/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * target.h — what a threaded pair worker talks to, behind one table of
 * operations: Redis directly with the classic commands (target_direct.c), or
 * rlockd through librlock's blocking API (target_rlockd.c). Each worker
 * holds at most one lock at a time, kept in its own state.
 */
#ifndef BENCH_TARGET_H
#define BENCH_TARGET_H

#include <stddef.h>

#include "bench.h"

/* acquire's answers besides an enum bench_err (> 0). */
#define TARGET_GRANTED 0
#define TARGET_BUSY (-1) /* held by someone else: try again later */

struct target_ops {
    /* State shared by every worker of a run (may leave *run NULL). 0 or -1 with err. */
    int (*open_run)(const struct bench_opts *o, void **run, char *err, size_t errlen);
    void (*close_run)(void *run);
    /* One worker's state, opened on the worker's own thread. NULL with err. */
    void *(*open_worker)(const struct bench_opts *o, void *run, char *err, size_t errlen);
    void (*close_worker)(void *w);
    /* Try to take resource once: TARGET_GRANTED, TARGET_BUSY, or an enum bench_err. */
    int (*acquire)(void *w, const char *resource);
    /* Release the lock the last acquire took: 0 or an enum bench_err. */
    int (*release)(void *w);
    /* 0 once the worker's connection is gone for good. */
    int (*usable)(void *w);
    /* What the latest failed acquire or release said. */
    const char *(*last_error)(void *w);
};

extern const struct target_ops target_direct_ops;
extern const struct target_ops target_rlockd_ops;

/*
 * Load the classic compare-and-delete into the Redis at address and write its
 * SHA1 (41 bytes with the NUL) to sha: what redis-benchmark needs for the
 * pipelined ceiling. 0, or -1 with err.
 */
int target_direct_load_script(const char *address, char *sha, char *err, size_t errlen);

#endif
