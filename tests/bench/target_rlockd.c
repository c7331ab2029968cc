/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * target_rlockd.c — rlockd through librlock's blocking API: one client per
 * worker (--mode sync), or one client shared by every worker (--mode
 * shared; each thread is its own owner, so they exclude each other as
 * separate clients would). A try that finds the lock held (NOT_ACQUIRED) is
 * busy and retried like the baseline's; with --wait the daemon queues it.
 */
#include "target.h"

#include <stdio.h>
#include <stdlib.h>

#include "rlock.h"

#define CONNECT_TIMEOUT_MS 10000

struct rl_worker {
    const struct bench_opts *o;
    struct rlock_client *c;
    int own; /* 1: c is this worker's alone and closed with it */
    struct rlock_lock *held;
};

static struct rlock_client *connect_client(const struct bench_opts *o, char *err, size_t errlen)
{
    struct rlock_options opts = {
        .client_name = "rlock-bench",
        .session_timeout_ms = o->session_timeout_ms,
        .connect_timeout_ms = CONNECT_TIMEOUT_MS,
    };
    bench_tls(&opts);
    struct rlock_client *c = NULL;
    if (rlock_connect(o->server, &opts, &c, err, errlen) != RLOCK_OK)
        return NULL;
    return c;
}

static int rl_open_run(const struct bench_opts *o, void **run, char *err, size_t errlen)
{
    *run = NULL;
    if (o->mode != BENCH_SHARED)
        return 0;
    *run = connect_client(o, err, errlen);
    return *run != NULL ? 0 : -1;
}

static void rl_close_run(void *run)
{
    rlock_close(run);
}

static void *rl_open(const struct bench_opts *o, void *run, char *err, size_t errlen)
{
    struct rl_worker *w = calloc(1, sizeof *w);
    if (w == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    w->o = o;
    w->own = run == NULL;
    w->c = run != NULL ? run : connect_client(o, err, errlen);
    if (w->c == NULL) {
        free(w);
        return NULL;
    }
    return w;
}

static void rl_close(void *p)
{
    struct rl_worker *w = p;
    if (w == NULL)
        return;
    rlock_lock_free(w->held);
    if (w->own)
        rlock_close(w->c);
    free(w);
}

static int rl_acquire(void *p, const char *resource)
{
    struct rl_worker *w = p;
    struct rlock_acquire_opts ao = {.ttl_ms = w->o->ttl_ms, .wait_ms = w->o->wait_ms};
    enum rlock_err e = rlock_acquire(w->c, resource, &ao, 0, &w->held);
    if (e == RLOCK_ERR_NOT_ACQUIRED && w->o->wait_ms == 0)
        return TARGET_BUSY;
    return e == RLOCK_OK ? TARGET_GRANTED : (int)bench_err_of_rlock(e);
}

static int rl_release(void *p)
{
    struct rl_worker *w = p;
    enum rlock_err e = rlock_release(w->held, 0);
    rlock_lock_free(w->held);
    w->held = NULL;
    return (int)bench_err_of_rlock(e);
}

static int rl_usable(void *p)
{
    return rlock_client_alive(((struct rl_worker *)p)->c);
}

static const char *rl_last_error(void *p)
{
    (void)p;
    return rlock_last_error()->message;
}

const struct target_ops target_rlockd_ops = {
    .open_run = rl_open_run,
    .close_run = rl_close_run,
    .open_worker = rl_open,
    .close_worker = rl_close,
    .acquire = rl_acquire,
    .release = rl_release,
    .usable = rl_usable,
    .last_error = rl_last_error,
};
