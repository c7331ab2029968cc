/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.h — the one server struct every part of the daemon hangs off.
 *
 * There is no mutable global state besides the log level (log.c): handlers
 * receive the server through the session or request they act on. The fields
 * that name a higher layer's types do so through opaque pointers and list
 * heads only; each is owned by the part its comment names. rlockd.c owns
 * startup and shutdown order; server.c the stop gate.
 */
#ifndef RLOCKD_SERVER_H
#define RLOCKD_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "counters.h"
#include "quota.h"
#include "seal.h"
#include "theap.h"
#include "twheel.h"
#include "util.h"

struct event_base;
struct event;
struct config;
struct rpool;
struct pubsub;
struct sentinel;
struct restable;
struct topk;
struct listener;
struct session;
struct lease;
struct tls_server;
struct cleanup_list;
struct relq;
struct renewq;
struct http;
struct peercount;
struct sdnotify;
struct sessidx;

TAILQ_HEAD(session_list, session);

/* Counters reported by Stats; one list so the reply and the struct agree. */
/* Signals the daemon handles on its loop (rlockd.c: stop, reload, state line). */
#define RLOCKD_SIGNALS 6

#define SERVER_COUNTERS(X)                                                                      \
    X(acquires)                                                                                 \
    X(grants)                                                                                   \
    X(locks_lost)                                                                               \
    X(sessions_opened)                                                                          \
    X(auth_failures)     /* Hellos refused: token missing or wrong */                           \
    X(permission_denied) /* admin requests refused to sessions without the admin role */    \
    X(sessions_resumed)  /* Resumes accepted (sessions that came from elsewhere) */           \
    X(resumes_refused)   /* Resumes refused: wrong secret, token, or no resume key */         \
    X(locks_adopted)     /* Adopts that took a lock over */                                   \
    X(adopts_refused)    /* Adopts whose seal did not match */                                \
    X(sessions_handed_over) /* sessions that left during a handover, locks kept */

struct server_counters {
#define COUNTER_FIELD(name) uint64_t name;
    SERVER_COUNTERS(COUNTER_FIELD)
#undef COUNTER_FIELD
};

struct server {
    /*
     * The hooks through which a lower layer reaches a higher one, set by
     * rlockd.c: a frame read by a session goes to the dispatch, a session's
     * end to the lock logic.
     */
    void (*on_frame)(struct session *s, const uint8_t *data, size_t len);
    void (*on_session_end)(struct session *s);
    struct event_base *base;
    struct config *cfg;
    const char *config_path;
    struct rpool *pool;
    struct pubsub *pubsub;          /* release notices of other daemons, or NULL (pubsub.c) */
    struct sentinel *sentinel;      /* finds and follows the master, or NULL (sentinel.c) */
    struct listener *listeners;     /* singly linked */
    struct tls_server *tls;         /* [tls] listen: the context new TLS sessions get (tls.h) */
    struct http *http;              /* metrics and health endpoint, or NULL */
    struct sdnotify *sdnotify;      /* systemd notify socket, or NULL */
    struct session_list sessions;   /* live sessions */
    struct session_list closed;     /* ended, freed by reap_ev after this loop turn */
    struct session_list draining;   /* ended, still writing their last reply */
    struct session_list ending;     /* ended with more leases than one turn lets go of */
    struct event *end_ev;           /* lets go of the next LOCK_END_BATCH of them (lock.c) */
    struct session_list flushq;     /* with replies to write at the end of this loop turn */
    struct event *flush_ev;
    struct session_list resumeq;    /* stopped by the frame cap, go on next loop turn */
    struct event *resume_ev;        /* zero-delay timer: runs after the next poll */
    uint64_t resume_turn;
    uint8_t scratch[65536];         /* every session reads into it first (one loop, one reader) */
    uint32_t nsessions;             /* in sessions: pending ones (before Hello) included */
    struct session_list pending;    /* sessions before their Hello (pending_link) */
    uint32_t npending;
    struct peercount *peers;        /* of the pending ones, how many per TCP peer address */
    struct sessidx *sessidx;        /* live sessions by serial and id (admin requests) */
    struct restable *resources;     /* resource name -> struct resource */
    struct topk *top;               /* the most contended resources (contention.h), or NULL */
    struct cleanup_list *cleanups;  /* unconfirmed deletes to retry */
    struct relq *relqs;             /* releases nobody awaits, per Redis connection (relq.c) */
    uint32_t nrelqs;
    uint64_t relq_pending;
    uint64_t nleases;
    uint64_t nleases_shared;    /* of them: shared holds of read-write locks */
    uint64_t nleases_permits;   /* of them: semaphore places */
    uint64_t nleases_leader;    /* of them: election leaders (exclusive locks) */
    uint64_t nobserved;         /* elections sessions here observe (election.c) */
    uint64_t nwaiters;
    uint64_t nacquires;             /* acquire requests alive: waiting, or in Redis */
    uint64_t foreign_waits;         /* resources whose head waits behind a foreign key (lock.c) */
    struct server_counters ctr;
    struct metrics mx;              /* the counters behind the labelled metrics */
    struct util_rng rng;            /* tokens and session ids */
    int resume;                     /* sessions may resume: resume_key is loaded */
    struct seal_key resume_key;     /* seals session secrets and locks (seal.h) */
    uint8_t hash_key[UTIL_HASH_KEY_BYTES]; /* per-process key of the resource table's hash */
    int64_t start_ms;
    struct event *watchdog_ev;      /* the lease timers' timerfd (watchdog.c) */
    int watchdog_fd;
    int64_t watchdog_armed_ms;
    int64_t watchdog_due_ms;        /* when that firing is due: armed_ms, or when armed if later */
    int64_t watchdog_late_warned_ms; /* the last warning that the loop ran timers late */
    int watchdog_firing;           /* in watchdog_fire: re-armed once, at its end */
    struct twheel lease_timers;     /* every held lease, at its next event */
    struct renewq *renewqs;         /* leases due for renewal, per Redis connection */
    uint32_t nrenewqs;
    struct event *reap_ev;
    struct event *signal_evs[RLOCKD_SIGNALS]; /* the signals rlockd.c handles */
    struct event *stop_ev;
    int stopping;
    int handing_over;               /* SIGTERM with shutdown = handover, sessions leaving */
    int64_t handover_deadline_ms;
    struct event *handover_ev;
    struct event *auth_grace_ev; /* ends tokenless sessions after auth.tokenless_grace */
    int finishing;                  /* nothing left to wait for: the loop ends soon */
    int freeing;                    /* rlockd_free runs: queues send nothing more */
    uint32_t background;            /* requests in Redis with no session to answer */
    uint32_t ncleanups;             /* entries of the cleanup list (kept by cleanup.c) */
    struct quota_table quotas;      /* per auth token: its locks and waiters (quota.h) */
};

/* Stopping, and no Redis work left to wait for: end the loop (at most once). */
void server_check_stopped(struct server *srv);
/* A session-less request (release, orphan) finished; shutdown waits for the last. */
void server_background_done(struct server *srv);

#endif
