/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * chaos_driver.h — the driver's state, shared by chaos_main.c (setup, the
 * run, teardown) and chaos_nemesis.c (the faults).
 *
 * The driver is one thread. Whatever it waits for, it waits in drv_idle(),
 * which keeps watching the children (a worker that died without the nemesis
 * is a crash: logged and respawned) and samples rlockd's memory once a
 * second. Its own history is DIR/run.log:
 *
 *   <us> SEED seed seconds workers resources
 *   <us> DAEMONS n                 how many rlockd share Redis and the resume key
 *   <us> SHARED pct pct_others     per cent of acquires asked shared (r0, the others)
 *   <us> KINDS sem_res=i sem_limit=n elect_res=j   the semaphore's and the election's
 *                                  resource indices (-1: none)
 *   <us> RLOCKD_START pid          a new incarnation of an rlockd
 *   <us> RSS pid kb                VmRSS of rlockd
 *   <us> FAULT kind fields...      one line per fault, once done
 *   <us> CRASH what pid status     a process that died on its own
 *   <us> RESULT name value ...     what the teardown found
 */
#ifndef RLOCK_CHAOS_DRIVER_H
#define RLOCK_CHAOS_DRIVER_H

#include "chaos.h"
#include "harness.h"

/* The fault kinds, in the order the summary lists them. */
#define CHAOS_FAULTS(X)                                                                       \
    X(worker_kill, "kill -9 a worker (respawned)")                                             \
    X(worker_pause, "SIGSTOP a holder past the session timeout, then SIGCONT")                 \
    X(redis_kill, "kill -9 redis-server, restart it empty")                                    \
    X(redis_pause, "SIGSTOP redis-server past the ttl, then SIGCONT")                          \
    X(script_flush, "SCRIPT FLUSH")                                                            \
    X(client_kill, "CLIENT KILL TYPE normal (rlockd's connections)")                           \
    X(rlockd_kill, "kill -9 rlockd, restart it")                                              \
    X(rlockd_pause, "SIGSTOP an rlockd past the session timeout, then SIGCONT")                \
    X(rlockd_term, "SIGTERM an rlockd (sessions handed over), restart it")

enum chaos_fault {
#define CHAOS_FAULT_ENUM(name, text) CHAOS_F_##name,
    CHAOS_FAULTS(CHAOS_FAULT_ENUM)
#undef CHAOS_FAULT_ENUM
        CHAOS_NFAULTS
};

extern const char *const chaos_fault_names[CHAOS_NFAULTS];
extern const char *const chaos_fault_texts[CHAOS_NFAULTS];

/* At most this many rlockd (--daemons). */
#define CHAOS_MAX_DAEMONS 2

struct driver {
    struct h_env e;      /* Redis, the run's dir, and the first rlockd */
    struct h_env peer;   /* the second rlockd (--daemons 2): DIR/b, on e's Redis */
    int ndaemons;
    int shared_pct;      /* --shared: per cent of acquires asked shared on resource 0 */
    int sem_limit;       /* --semaphore: the semaphore's limit; 0: no semaphore */
    int election;        /* --election: 1 (default) with an election resource */
    char worker_addr[700]; /* every rlockd's address, comma-separated */
    struct chaos_shm *m;
    char self[512];      /* this executable, for the workers and the store */
    uint64_t seed;
    int seconds;
    int nworkers;
    int nres;
    int log;             /* DIR/run.log */
    struct chaos_rng rng;
    pid_t store_pid;
    int64_t start_ms;
    int64_t end_ms;
    int64_t next_rss_ms;
    int64_t last_rlockd_kill_ms;
    int faults[CHAOS_NFAULTS];
    int crashes;         /* processes that died without the nemesis */
    int workaround_keys; /* --workaround-shutdown-keys (README.md) */
    int workaround_redis; /* --workaround-redis-delayed-restart (README.md) */
    volatile int interrupted;
};

/* Wait ms while watching the children and sampling memory. */
void drv_idle(struct driver *d, int ms);
/* One look at the children and the memory; called by drv_idle. */
void drv_tick(struct driver *d);
/* Start the worker of slot i (after an exit or a kill). 0 or -1. */
int drv_spawn_worker(struct driver *d, int i);
/* Forget a dead worker's presence in the referee and reset its slot. */
void drv_clear_slot(struct driver *d, int i);
/* Sample rlockd's VmRSS into run.log now. */
void drv_sample_rss(struct driver *d);

/* rlockd number i (0 .. ndaemons - 1). */
struct h_env *drv_daemon(struct driver *d, int i);
/* Start rlockd i again and log its new incarnation. 0 or -1. */
int drv_daemon_start(struct driver *d, int i);
/* Whether fault kind f applies to a run with ndaemons rlockd (the pause and the
 * handover of one need another to move to). */
int chaos_fault_enabled(enum chaos_fault f, int ndaemons);

/* Run one fault of kind f: 0 when done, 1 when it had no target now (no worker holds
 * anything), -1 when the run cannot go on (Redis or rlockd did not come back). */
int nemesis_run(struct driver *d, enum chaos_fault f);
/* The next fault kind: first every kind once (rlockd_kill first, so that the last
 * incarnation of rlockd is long enough to measure), then weighted at random. */
enum chaos_fault nemesis_pick(struct driver *d, int index);

#endif
