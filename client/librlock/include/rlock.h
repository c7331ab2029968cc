/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlock.h — C client for rlockd, the distributed lock daemon.
 *
 * A client is one connection to rlockd, and one session: while it is open
 * the library keeps it alive and the daemon renews the locks it holds; when
 * it closes, or the process dies, the daemon releases them at once.
 *
 *     struct rlock_client *c;
 *     char err[256];
 *     if (rlock_connect("127.0.0.1:7483", NULL, &c, err, sizeof err) != RLOCK_OK)
 *         die(err);
 *     struct rlock_lock *l;
 *     struct rlock_acquire_opts o = { .ttl_ms = 30000, .wait_ms = 5000 };
 *     if (rlock_acquire(c, "orders/42", &o, 2000, &l) == RLOCK_OK) {
 *         use_resource(rlock_lock_fence(l));   // pass the fence to storage
 *         rlock_release(l, 2000);
 *         rlock_lock_free(l);
 *     }
 *     rlock_close(c);
 *
 * Owners. Re-entry is per owner, not per client: by default the owner is the
 * calling thread, so threads sharing one client exclude each other (a second
 * thread's acquire waits, or fails with RLOCK_ERR_NOT_ACQUIRED when it does
 * not wait), while a thread that acquires a lock it already holds gets the
 * same lock back with a higher hold count. rlock_acquire_opts.owner names an
 * owner explicitly (to hand a lock between threads, or for coroutines);
 * no_reentry refuses a second acquire by the owner instead of re-entering.
 *
 * Threads. Every function may be called from any thread, and any number of
 * threads may share one blocking client. A lock handle may be used by one
 * thread at a time. The library runs two threads per process whatever the
 * number of clients: one does all socket I/O and keepalives, the other runs
 * the callbacks, lost locks' and elections' (all signals are blocked in both).
 * Asynchronous clients (below) use neither: the application drives them.
 *
 * Callbacks run on the library's callback thread, one at a time for the whole
 * process. They may call the non-blocking functions (getters, rlock_lock_free,
 * rlock_cancel, rlock_shutdown, rlock_close, async submissions); a blocking
 * call from a callback returns RLOCK_ERR_IN_CALLBACK at once. rlock_close
 * does not return while a callback of that client runs (from inside its own
 * callback it returns at once and the client is freed when the callback
 * returns).
 *
 * Timeouts: every blocking call takes timeout_ms, the longest it waits for
 * the daemon's answer (for acquire: on top of the requested wait). 0 selects
 * RLOCK_DEFAULT_TIMEOUT_MS. A call that runs out of time returns
 * RLOCK_ERR_DEADLINE, which always means: the outcome on the daemon is
 * unknown and the library has closed the session, so the daemon releases
 * everything the session held (every handle of the client is LOST).
 *
 * Errors: functions return an enum rlock_err. The detail of the calling
 * thread's latest failed call (the daemon's message, a retry hint) is in
 * rlock_last_error(); it is per thread, like errno.
 *
 * fork(): a child process inherits the parent's clients only as memory. In
 * the child every inherited client reports its session ended (calls return
 * RLOCK_ERR_CLOSED, handles are LOST) and rlock_close frees it without
 * touching the connection, so the parent's session and locks are unaffected.
 */
#ifndef RLOCK_H
#define RLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLOCK_DEFAULT_TIMEOUT_MS 5000u
#define RLOCK_DEFAULT_ADDRESS "127.0.0.1:7483"

/* Results. Values 1..15 mirror the daemon's status codes (docs/protocol.md). */
enum rlock_err {
    RLOCK_OK = 0,
    RLOCK_ERR_NOT_ACQUIRED = 1,      /* try-acquire: held by another owner */
    RLOCK_ERR_TIMEOUT = 2,           /* the wait expired */
    RLOCK_ERR_NOT_HELD = 3,          /* release/extend of a lock not held */
    RLOCK_ERR_INVALID = 4,           /* the daemon refused a field */
    RLOCK_ERR_UNAUTHENTICATED = 5,   /* connect: the daemon wants a valid auth_token */
    RLOCK_ERR_PERMISSION_DENIED = 6, /* an operator's request from a client without the admin role */
    RLOCK_ERR_LIMIT_EXCEEDED = 7,    /* a daemon limit; try again later */
    RLOCK_ERR_UNAVAILABLE = 8,       /* the daemon cannot reach Redis; retry later */
    RLOCK_ERR_SHUTTING_DOWN = 9,
    RLOCK_ERR_INTERNAL = 10,
    RLOCK_ERR_CANCELLED = 11,        /* the acquire was cancelled (rlock_cancel) */
    RLOCK_ERR_ALREADY_HELD = 12,     /* no_reentry: this owner holds the lock already */
    RLOCK_ERR_NOT_FOUND = 13,        /* rlock_kill_session: no such session */
    RLOCK_ERR_WRONG_KIND = 14,       /* exclusive asked by an owner holding it shared (no upgrade),
                                        or a semaphore and a lock on one name */
    RLOCK_ERR_DEADLOCK = 15,         /* the wait would close a cycle of clients of the daemon
                                        waiting for each other; nothing is held (the message
                                        names the cycle) */
    RLOCK_ERR_ARG = 100,             /* bad argument to a library call */
    RLOCK_ERR_NOMEM = 101,
    RLOCK_ERR_CONNECT = 102,         /* could not connect or say Hello */
    RLOCK_ERR_CLOSED = 103,          /* the session has ended */
    RLOCK_ERR_DEADLINE = 104,        /* no answer in time: outcome unknown, session closed */
    RLOCK_ERR_PROTOCOL = 105,        /* the daemon sent something unexpected */
    RLOCK_ERR_IN_CALLBACK = 106,     /* a blocking call from a library callback */
};

enum rlock_lock_state {
    RLOCK_HELD = 0,
    RLOCK_LOST = 1,      /* the daemon lost it, or the session ended */
    RLOCK_RELEASED = 2,  /* this hold was released by rlock_release */
    RLOCK_UNCERTAIN = 3, /* no news from the daemon past the lock's valid-until time:
                            it may be lost; becomes HELD again if news confirms it */
};

/* Why a lock was lost; values mirror LostReason in proto/rlock.proto. */
enum rlock_lost_reason {
    RLOCK_LOST_UNSPECIFIED = 0,
    RLOCK_LOST_EXPIRED = 1,  /* not renewed in time (Redis unreachable), or lease over */
    RLOCK_LOST_STOLEN = 2,   /* the key holds another token */
    RLOCK_LOST_MISSING = 3,  /* the key vanished */
    RLOCK_LOST_FORCED = 4,   /* an operator released it */
    RLOCK_LOST_SESSION = 5,  /* the session ended (connection lost or timed out) */
    RLOCK_LOST_MAX_HOLD = 6, /* held for its max_hold_ms: no longer renewed */
};

struct rlock_client;
struct rlock_lock;
struct rlock_cancel;

/* Detail of a failed call. */
struct rlock_error {
    enum rlock_err code;
    uint32_t retry_after_ms; /* the daemon's hint, with RLOCK_ERR_UNAVAILABLE */
    char message[256];       /* the daemon's text, or the library's */
};

/*
 * Called once for each lock of the client that is lost while held (not for
 * locks of a session the application itself closed or shut down). resource
 * and token are valid only during the call. See "Callbacks" above.
 */
typedef void (*rlock_lost_fn)(struct rlock_client *c, const char *resource, const char *token,
                              uint64_t fence, enum rlock_lost_reason reason, void *arg);

/*
 * Called for each change of an election the client observes (rlock_observe),
 * in the order of the daemon's LeaderChanged events: never a lower term than
 * an earlier call for that election. elected = 0 when the leader left without
 * a successor yet (term is then the last leader's). Changes that came and went
 * between two looks of the daemon may be skipped: the terms show it. resource
 * and value are valid only during the call. Runs where on_lost runs (the
 * library's callback thread; rlock_async_process for an asynchronous client),
 * in one order with the lost-lock callbacks of the client. See "Callbacks".
 *
 * elected = 0 with term = 0 (no leader's term is 0) is the last call for that
 * observation: the library stopped observing the election because the daemon
 * the session moved to refused to observe it (see rlock_observe); value holds
 * the refusal ("LIMIT_EXCEEDED: ..."). rlock_observe observes it afresh.
 */
typedef void (*rlock_leader_fn)(struct rlock_client *c, const char *resource, int elected,
                                uint64_t term, const char *value, void *arg);

struct rlock_options {
    const char *client_name;      /* shown in the daemon's logs; NULL = "librlock" */
    uint32_t session_timeout_ms;  /* 0 = the daemon's default */
    uint32_t connect_timeout_ms;  /* 0 = RLOCK_DEFAULT_TIMEOUT_MS */
    rlock_lost_fn on_lost;        /* may be NULL */
    void *on_lost_arg;
    const char *auth_token;       /* sent in Hello when the daemon requires tokens; NULL = none.
                                     Copied: need not outlive rlock_connect */
    /* TLS, for the addresses written tls://HOST:PORT or tls://unix:PATH (rlockd's [tls]
     * listen). The paths are read by rlock_connect; all may be NULL. */
    const char *tls_ca_file;      /* CA certificates (PEM) the daemon's certificate must chain
                                     to; NULL = the system's */
    const char *tls_cert_file;    /* this client's certificate chain (PEM), for a daemon that
                                     asks for one (mTLS); with tls_key_file */
    const char *tls_key_file;     /* its private key (PEM, no passphrase) */
    const char *tls_server_name;  /* the name the daemon's certificate must be issued for;
                                     NULL = the address's host (its IP address when numeric;
                                     no name check for tls://unix:) */
    rlock_leader_fn on_leader;    /* changes of observed elections; may be NULL */
    void *on_leader_arg;
};

/* The owner bit the library sets on thread owners; explicit owners stay below it. */
#define RLOCK_OWNER_THREAD_BIT (UINT64_C(1) << 63)

struct rlock_acquire_opts {
    uint32_t ttl_ms;   /* lease; 0 = the daemon's default_ttl */
    uint32_t wait_ms;  /* 0 = try once; > 0 = wait up to this long */
    int watchdog_off;  /* 0 (default): the daemon renews the lease while the session lives */
    uint64_t owner;    /* 0 = the calling thread; else an id of yours below RLOCK_OWNER_THREAD_BIT */
    int no_reentry;    /* refuse (RLOCK_ERR_ALREADY_HELD) instead of re-entering */
    struct rlock_cancel *cancel; /* NULL, or a token that cancels this acquire (below) */
    uint32_t max_hold_ms;   /* lost (RLOCK_LOST_MAX_HOLD) after held this long, renewed or
                               not; 0 = the daemon's max_hold (none by default) */
    uint32_t lock_delay_ms; /* if the session ends uncleanly (crash, timeout), nobody gets the
                               lock for this long; 0 = the daemon's lock_delay (0 by default) */
    int shared;             /* 1: a shared (read) hold: any number at once, none while an
                               exclusive one is held; FIFO with exclusive waiters (no writer
                               starvation). In one client a resource is one lock: a shared
                               acquire while it holds the lock shared adds a hold, whatever the
                               owner; an exclusive acquire by an owner holding it shared gets
                               RLOCK_ERR_WRONG_KIND (no upgrade: release, then acquire) */
    uint32_t limit;         /* > 0: the resource is a semaphore of limit permits (shared must
                               be 0): every holder names the same limit, and the permits held
                               sum to at most limit. A crashed holder's permits come back
                               when its session ends. In one client a semaphore is held once
                               (its owner re-enters; other owners wait). RLOCK_ERR_WRONG_KIND
                               when the name is held as a lock or with another limit */
    uint32_t permits;       /* with limit: the permits to take, all or none; 0 = 1 */
    const char *campaign_value; /* not NULL: this acquire is a campaign in the election
                               named by the resource, with this value (at most
                               RLOCK_VALUE_MAX bytes; "" is allowed). An exclusive lock
                               (shared and limit must be 0) whose grant also makes value
                               the leader's, atomically: the lock's fence is the leader's
                               term. Releasing the lock resigns; losing it is losing the
                               leadership. Usually with a wait. Not for rlock_acquire_all */
    const char *trace_id;   /* NULL or "": none. Else your trace id for this lock (a W3C
                               traceparent, or an opaque id; at most RLOCK_TRACE_MAX printable
                               ASCII bytes without space, quote or backslash): the daemon
                               writes it on every log line about the lock — its wait, grant,
                               refusal, release, loss, failed renewals */
};
/* The longest trace id (rlock_acquire_opts.trace_id). */
#define RLOCK_TRACE_MAX 128
/* The largest semaphore limit the daemon takes. */
#define RLOCK_LIMIT_MAX 1000000u
/* The longest campaign value, in bytes (without the NUL). */
#define RLOCK_VALUE_MAX 1024u

struct rlock_stats {
    uint64_t sessions;
    uint64_t held_locks;
    uint64_t waiters;
    uint32_t redis_connections;
    uint32_t redis_connections_ready;
    int redis_up;
    uint64_t script_reloads;
    uint64_t acquires;
    uint64_t grants;
    uint64_t locks_lost;
    uint64_t redis_errors;
    uint64_t uptime_ms;
    char server_version[64];
};

/* --- clients ----------------------------------------------------------------- */

/*
 * Connect to address ("HOST:PORT" with a numeric or resolvable host, or
 * "unix:/path"; either behind "tls://" for a TLS listener, with opts'
 * tls_* fields) and open a session. address may list several daemons on the
 * same Redis, comma-separated (at most 16): the client starts at a random one,
 * so that clients spread over them, and tries the others in turn until one
 * accepts, each within an equal share of connect_timeout_ms; a host name that
 * resolves to several addresses tries each. A malformed entry anywhere is
 * RLOCK_ERR_ARG. opts may be NULL. On success stores the client in *out. On
 * failure returns the error and, if errbuf is not NULL, a message in errbuf.
 */
enum rlock_err rlock_connect(const char *address, const struct rlock_options *opts,
                             struct rlock_client **out, char *errbuf, size_t errlen);

/*
 * End the session now, cleanly (the daemon releases every lock it still holds
 * at once, without lock_delay) without freeing the client: every blocked call returns RLOCK_ERR_CLOSED, every
 * handle becomes LOST, no lost-lock callback is called, and later calls
 * return RLOCK_ERR_CLOSED. Lets one thread stop others blocked on c; free it
 * with rlock_close once they have returned. Accepts NULL.
 */
void rlock_shutdown(struct rlock_client *c);

/*
 * rlock_shutdown, then wait until no call on c is still returning and no
 * callback of c runs, and free the client and every lock handle not yet
 * freed. Accepts NULL. Neither the client nor its handles may be used after.
 */
void rlock_close(struct rlock_client *c);

/* Session id given by the daemon (a UUID string), valid until rlock_close. */
const char *rlock_session_id(const struct rlock_client *c);
/* Effective session timeout the daemon granted. */
uint32_t rlock_session_timeout_ms(const struct rlock_client *c);
/*
 * How many times the session moved to another connection and was resumed
 * there (docs/client.md, "When the daemon goes away"): its daemon died, was
 * restarted or went silent, or asked it to move. 0 for a session that never
 * moved.
 */
uint64_t rlock_session_resumes(struct rlock_client *c);
/*
 * 1 while the session is open, 0 once it has ended. A session that nothing
 * was written to or heard from for a whole session timeout (the process was
 * stopped, the machine suspended) is ended by this check; so are the lock
 * state getters below.
 */
int rlock_client_alive(struct rlock_client *c);

/*
 * A descriptor (eventfd) that becomes readable when a lock of c is lost or
 * the session ends, for programs that wait in poll/epoll. Read 8 bytes from
 * it to clear it, then look at the locks (rlock_foreach_lock). Owned by c;
 * -1 on failure.
 */
int rlock_lost_fd(struct rlock_client *c);

/* --- locks ------------------------------------------------------------------- */

/*
 * Acquire resource. opts may be NULL (defaults: server ttl, no wait, watchdog
 * on, the calling thread as owner). On RLOCK_OK stores a new lock handle in
 * *out. Acquiring a resource the same owner already holds returns another
 * handle to the same lock (same token and fence, hold count + 1).
 */
enum rlock_err rlock_acquire(struct rlock_client *c, const char *resource,
                             const struct rlock_acquire_opts *opts, uint32_t timeout_ms,
                             struct rlock_lock **out);

/* The most resources rlock_acquire_all takes at once. */
#define RLOCK_ACQUIRE_ALL_MAX 16

/*
 * Acquire every one of resources[0..n-1] (1 <= n <= RLOCK_ACQUIRE_ALL_MAX, no
 * name twice), or none. The locks are taken one at a time in the byte order of
 * their names, each waiting in its own queue, within one budget of
 * opts->wait_ms for the whole set (timeout_ms applies to each request, as for
 * rlock_acquire); the other options apply to each lock. Because every caller
 * takes them in that one order, two programs naming the same resources in
 * different orders never deadlock. On RLOCK_OK, out[i] is the handle of
 * resources[i] (each an ordinary lock: renewed, fenced, released on its own).
 * On failure every lock taken on the way has been released again, out[] is
 * all NULL, and rlock_last_error() names the resource that stopped it; a lock
 * lost while later ones were awaited fails the call with
 * RLOCK_ERR_NOT_ACQUIRED. On a Redis Cluster the resources may live on any
 * masters.
 */
enum rlock_err rlock_acquire_all(struct rlock_client *c, const char *const *resources, size_t n,
                                 const struct rlock_acquire_opts *opts, uint32_t timeout_ms,
                                 struct rlock_lock **out);

/* How one resource of rlock_acquire_all_kinds is taken: as rlock_acquire_opts's fields. */
struct rlock_kind {
    int shared;        /* 1: a shared hold */
    uint32_t limit;    /* > 0: a semaphore of limit permits (shared must be 0) */
    uint32_t permits;  /* with limit: the permits to take; 0 = 1 */
};

/*
 * rlock_acquire_all with a kind per resource: kinds[i] says how resources[i] is
 * taken (shared, or a semaphore's permits), overriding opts's shared, limit and
 * permits; kinds NULL takes every one as opts says. The one order of names
 * keeps any mix of kinds from deadlocking: whatever each lock's kind, every
 * caller waits for the names in the same order.
 */
enum rlock_err rlock_acquire_all_kinds(struct rlock_client *c, const char *const *resources,
                                       const struct rlock_kind *kinds, size_t n,
                                       const struct rlock_acquire_opts *opts,
                                       uint32_t timeout_ms, struct rlock_lock **out);

/* Release one hold of the lock. The handle stays valid (state RELEASED) until freed. */
enum rlock_err rlock_release(struct rlock_lock *l, uint32_t timeout_ms);

/* Renew the lease to ttl_ms from now (0 = its own ttl), which becomes the lock's ttl. Meant for
 * watchdog-off locks, whose lease the daemon does not renew; works on any held lock. */
enum rlock_err rlock_extend(struct rlock_lock *l, uint32_t ttl_ms, uint32_t timeout_ms);

/* Free a lock handle. Does not release it (the session's end will). Accepts NULL. */
void rlock_lock_free(struct rlock_lock *l);

enum rlock_lock_state rlock_lock_state(const struct rlock_lock *l);
enum rlock_lost_reason rlock_lock_lost_reason(const struct rlock_lock *l);
const char *rlock_lock_resource(const struct rlock_lock *l);
const char *rlock_lock_token(const struct rlock_lock *l);
uint64_t rlock_lock_fence(const struct rlock_lock *l);
uint64_t rlock_lock_owner(const struct rlock_lock *l);
uint32_t rlock_lock_ttl_ms(const struct rlock_lock *l);
/* The lock's hold count (shared by all its handles; a RELEASED handle shows the holds
 * its lock still has), 0 once the lock is no longer held. */
uint32_t rlock_lock_hold_count(const struct rlock_lock *l);
/*
 * Until when (milliseconds on CLOCK_MONOTONIC) the lock is surely still held,
 * if no LockLost arrives: the send time of the latest request whose answer
 * vouched for it (the acquire, an extend, or a keepalive answered by the
 * daemon) plus the validity the daemon reported with it, which already has
 * the daemon's loss margin taken off. Past it without news the state is
 * RLOCK_UNCERTAIN. 0 for a lock not held.
 */
int64_t rlock_lock_valid_until(const struct rlock_lock *l);

/* One held lock as rlock_foreach_lock reports it; strings valid during the visit only. */
struct rlock_lock_info {
    const char *resource;
    const char *token;
    uint64_t fence;
    uint64_t owner;
    uint32_t ttl_ms;
    uint32_t hold_count;
    int watchdog;
    enum rlock_lock_state state; /* HELD or UNCERTAIN */
    int64_t valid_until;         /* as rlock_lock_valid_until */
};
/*
 * Call visit for every lock c holds (one call per lock, whatever the number of
 * handles), from a snapshot taken first: visit may call the library. A
 * non-zero return stops the walk. Returns the number of locks visited.
 */
size_t rlock_foreach_lock(struct rlock_client *c,
                          int (*visit)(const struct rlock_lock_info *info, void *arg),
                          void *arg);

/* --- leader elections ---------------------------------------------------------- */
/*
 * An election is a name that candidates campaign for: rlock_acquire with
 * rlock_acquire_opts.campaign_value (see there), usually with a wait. The
 * winner holds an exclusive lock on the name whose fence is its term: terms
 * only grow, so a store that refuses writes with a term below the highest it
 * has seen never takes one from a deposed leader. The leader resigns by
 * releasing the lock (rlock_release); a leader that crashes, or whose session
 * ends, leaves when its session does, and the next candidate waiting is
 * granted with a higher term.
 */

/* Who leads an election. Plain data: nothing to free. */
struct rlock_leader {
    int elected;        /* 1: a candidate leads now */
    uint64_t term;      /* its term (its grant's fence); 0 when none leads */
    uint32_t ttl_ms;    /* its lease left in Redis (renewed while its session lives) */
    char value[RLOCK_VALUE_MAX + 1]; /* its campaign value, NUL-terminated; "" when none */
};

/* Who leads the election name now, as Redis says (candidates of every daemon count). */
enum rlock_err rlock_leader(struct rlock_client *c, const char *name, uint32_t timeout_ms,
                            struct rlock_leader *out);

/*
 * Observe the election name: now (may be NULL) gets who leads it now, and
 * from then on every change is reported to rlock_options.on_leader, until
 * rlock_observe_stop or the session's end. Observing an election already
 * observed only reads its leader again. A session that moves to another
 * daemon (docs/client.md, "When the daemon goes away") observes its
 * elections there again, and a change that happened meanwhile is reported
 * (once, with the leader found there). A change may be reported before
 * rlock_observe returns: compare terms.
 *
 * When that daemon refuses to observe one again, the library asks again after
 * a pause (100 ms, doubling up to 2 s) for as long as the error may pass
 * (RLOCK_ERR_UNAVAILABLE, RLOCK_ERR_SHUTTING_DOWN, RLOCK_ERR_INTERNAL,
 * RLOCK_ERR_TIMEOUT; and
 * RLOCK_ERR_LIMIT_EXCEEDED for 5 s, since a resume sends every Observe at
 * once and the limit may be on reads in flight), until it is observed, the
 * application stops observing it, or the session ends. Any other refusal, or
 * LIMIT_EXCEEDED past 5 s, ends the observation: on_leader is called once
 * with elected = 0 and term = 0, and the election is no longer observed.
 */
enum rlock_err rlock_observe(struct rlock_client *c, const char *name, uint32_t timeout_ms,
                             struct rlock_leader *now);

/*
 * Stop observing the election name: no change that reaches the client after
 * this is sent is reported (a call for one that came before may still run).
 * An Observe of name sent before it and answered after it (asynchronous
 * clients, other threads) does not observe it again: the daemon took the stop
 * last. RLOCK_ERR_NOT_HELD: the daemon had nothing to stop (never observed, or
 * the library was still asking it again after a move); either way the
 * election is no longer observed.
 */
enum rlock_err rlock_observe_stop(struct rlock_client *c, const char *name, uint32_t timeout_ms);

/* --- cancellation ------------------------------------------------------------ */

/*
 * A cancellation token. Pass it in rlock_acquire_opts.cancel; rlock_cancel
 * (from any thread, or a callback) makes every acquire watching it return
 * RLOCK_ERR_CANCELLED at once, unless it completed first (then it returns
 * its own result). The daemon withdraws the waiter; a grant that raced the
 * cancel is released by the library, never leaked. A fired token stays fired.
 */
struct rlock_cancel *rlock_cancel_new(void);
void rlock_cancel(struct rlock_cancel *k);
int rlock_cancel_fired(const struct rlock_cancel *k);
/* Free k; no call may still be watching it. Accepts NULL. */
void rlock_cancel_free(struct rlock_cancel *k);

/* --- other requests ---------------------------------------------------------- */

/* Round trip to the daemon; server_time_ms may be NULL. */
enum rlock_err rlock_ping(struct rlock_client *c, uint32_t timeout_ms, uint64_t *server_time_ms);

/* Daemon-wide counters. */
enum rlock_err rlock_stats(struct rlock_client *c, uint32_t timeout_ms, struct rlock_stats *out);

/* --- operators' requests ------------------------------------------------------ */
/*
 * Views and actions for operators (rlockctl sessions, locks, release --force,
 * kill-session, info). When the daemon has auth tokens they need a client
 * connected with an admin token, else RLOCK_ERR_PERMISSION_DENIED; without,
 * any client may send them. Blocking clients only (an asynchronous client
 * gets RLOCK_ERR_ARG).
 *
 * Listings come in pages of at most limit entries (0 = the daemon's default,
 * 100; at most RLOCK_LIST_LIMIT_MAX), and the daemon may return fewer, even
 * none, before the end. Pass NULL or "" as cursor for the first page, then
 * the next_cursor the previous call returned, until it comes back "". A
 * session or lock that exists from the first page to the last is listed once
 * (docs/protocol.md says when a lock may show twice); what comes or goes
 * meanwhile may or may not be.
 */

/* Room for a cursor, its NUL included. */
#define RLOCK_CURSOR_BYTES 64
#define RLOCK_LIST_LIMIT_MAX 1000u

enum rlock_session_state {
    RLOCK_SESSION_ACCEPTED = 0, /* connected, no Hello yet */
    RLOCK_SESSION_ACTIVE = 1,
};

/* What a session may do, as its Hello's token decided. */
enum rlock_role {
    RLOCK_ROLE_OPEN = 0,   /* the daemon had no tokens: everything */
    RLOCK_ROLE_CLIENT = 1, /* no operators' requests */
    RLOCK_ROLE_ADMIN = 2,
    RLOCK_ROLE_NONE = 3,   /* not authenticated yet (before Hello) */
};

/* One session of the daemon; strings valid during the visit only. */
struct rlock_session_entry {
    const char *id;
    const char *client_name;
    const char *peer;              /* "IP:PORT", or "unix" */
    enum rlock_session_state state;
    enum rlock_role role;          /* RLOCK_ROLE_NONE before Hello */
    uint64_t connected_at_ms;      /* the daemon's wall clock, ms since the epoch */
    uint64_t idle_ms;              /* since its last frame reached the daemon */
    uint32_t locks_held;
    uint32_t waiting;              /* its acquires queued for a lock */
    uint32_t in_flight;            /* its requests in progress, waiting ones included */
    uint32_t requested_timeout_ms; /* as asked in its Hello (0 = the default) */
    uint32_t timeout_ms;           /* effective; 0 before Hello */
    int resumed;                   /* opened by a Resume: it came from another connection
                                      (another daemon, or this one before a restart) */
};

/* One lock held through the daemon; strings valid during the visit only. */
struct rlock_lock_entry {
    const char *resource;
    const char *session_id;  /* the holder */
    const char *client_name;
    uint64_t owner;
    uint64_t fence;
    const char *token;       /* the value of its key in Redis */
    uint64_t acquired_at_ms; /* the daemon's wall clock at the grant */
    uint32_t ttl_ms;
    uint32_t ttl_left_ms;    /* validity left, as the daemon counts it */
    int watchdog;            /* renewed by the daemon */
    uint32_t hold_count;
    uint32_t waiters;        /* acquires of this daemon queued on the resource */
    int shared;              /* a shared (read) hold: one entry per holding session */
    uint32_t limit;          /* a semaphore's limit (0: a lock); one entry per holder */
    uint32_t permits;        /* the permits this holder has */
    int leader;              /* a campaign's grant: the holder leads the election of that name */
};

/* Which locks to list; NULL or empty members match everything. */
struct rlock_lock_filter {
    const char *prefix;     /* resource names starting with these bytes */
    const char *session_id; /* locks of this session */
};

/*
 * Visitors of a page, called on the calling thread, in the daemon's order,
 * before the listing call returns; they may call the library. A non-zero
 * return skips the rest of the page (next_cursor is still that of the page).
 */
typedef int (*rlock_session_visit_fn)(const struct rlock_session_entry *e, void *arg);
typedef int (*rlock_lock_visit_fn)(const struct rlock_lock_entry *e, void *arg);

/*
 * One page of the daemon's sessions, in the order they connected: visit
 * (may be NULL) is called for each, and the cursor of the next page is
 * copied to next_cursor (len >= RLOCK_CURSOR_BYTES; "" after the last page).
 */
enum rlock_err rlock_list_sessions(struct rlock_client *c, const char *cursor, uint32_t limit,
                                   rlock_session_visit_fn visit, void *arg, char *next_cursor,
                                   size_t len, uint32_t timeout_ms);

/* One page of the locks held through the daemon that match filter (may be NULL); as above. */
enum rlock_err rlock_list_locks(struct rlock_client *c, const struct rlock_lock_filter *filter,
                                const char *cursor, uint32_t limit, rlock_lock_visit_fn visit,
                                void *arg, char *next_cursor, size_t len, uint32_t timeout_ms);

/* Whose lock rlock_force_release took away. */
struct rlock_forced {
    char session_id[64];
    char client_name[136];
    uint64_t owner;
    uint64_t fence;
    uint32_t waiters; /* acquires of this daemon queued on the resource */
};

/*
 * Take resource away from the session of this daemon that holds it: that
 * session gets the loss (RLOCK_LOST_FORCED), the key is deleted at once and
 * the first waiter of this daemon tries at once. RLOCK_ERR_NOT_HELD when no
 * session of this daemon holds it (another daemon or application may).
 * out (may be NULL) says whose lock it was.
 */
enum rlock_err rlock_force_release(struct rlock_client *c, const char *resource,
                                   uint32_t timeout_ms, struct rlock_forced *out);

/*
 * End the daemon's session session_id (it may be c's own): it is told
 * (SessionClosing), its locks are released at once and its connection
 * closed. RLOCK_ERR_NOT_FOUND when there is no such session.
 * locks_released (may be NULL) gets the number of locks it held.
 */
enum rlock_err rlock_kill_session(struct rlock_client *c, const char *session_id,
                                  uint32_t timeout_ms, uint32_t *locks_released);

/* The daemon's description (docs/protocol.md, ServerInfoReply). */
struct rlock_server_info {
    char server_version[64];
    uint32_t protocol_version;
    uint32_t pid;
    uint64_t started_at_ms;          /* wall clock, ms since the epoch */
    uint64_t uptime_ms;
    char config_file[1024];          /* "" = started without -c */
    char listen[1024];
    char redis_address[1024];
    uint32_t redis_database;
    char key_prefix[136];
    int redis_up;
    uint32_t redis_connections;
    uint32_t redis_connections_ready;
    uint64_t sessions;
    uint64_t held_locks;
    uint64_t waiters;
    uint32_t max_sessions;
    uint32_t max_locks;
    uint32_t max_locks_per_session;
    uint32_t max_waiters;
    uint32_t max_frame_bytes;
    uint32_t max_resource_bytes;
    uint32_t default_ttl_ms;
    uint32_t min_ttl_ms;
    uint32_t max_ttl_ms;
    uint32_t max_wait_ms;
    uint32_t session_timeout_ms;
    uint32_t min_session_timeout_ms;
    uint32_t max_session_timeout_ms;
    int auth;                        /* clients need a token */
    uint32_t admin_tokens;
    uint32_t client_tokens;
    uint64_t auth_failures;          /* Hellos refused for their token */
    uint64_t permission_denied;      /* operators' requests refused */
    char redis_topology[16];         /* "single", "sentinel" or "cluster" */
    char redis_master[80];           /* where commands go now ("" = no master known yet) */
    uint64_t redis_failovers;        /* master changes followed (Sentinel, cluster failovers) */
    int redis_pubsub_connected;      /* the release-notice connection is ready */
    uint32_t redis_nodes;            /* cluster: nodes known, seeds included (else 0) */
    int resume;                      /* sessions may resume here (a resume key is loaded) */
    char shutdown[16];               /* what SIGTERM does: "handover" or "release" */
    uint64_t sessions_resumed;       /* Resumes accepted */
    uint64_t resumes_refused;        /* Resumes refused */
    uint64_t locks_adopted;          /* locks resumed sessions took over */
    uint64_t adopts_refused;         /* claims refused for their seal */
    uint64_t sessions_handed_over;   /* sessions that left during a handover */
};
enum rlock_err rlock_server_info(struct rlock_client *c, uint32_t timeout_ms,
                                 struct rlock_server_info *out);

/* --- errors and names -------------------------------------------------------- */

/* The calling thread's latest failed call (code RLOCK_OK before any). Never NULL. */
const struct rlock_error *rlock_last_error(void);
/* rlock_last_error()->message copied into buf; c is not used (kept for old callers). */
void rlock_errmsg(struct rlock_client *c, char *buf, size_t len);

/*
 * Who held the resource of an acquire answered RLOCK_ERR_NOT_ACQUIRED or
 * RLOCK_ERR_TIMEOUT, as far as the daemon knew (docs/protocol.md, Holder).
 * rlock_last_error()->message says the same in words.
 */
struct rlock_holder {
    int here;                /* 1: a session of this daemon holds it (the fields up to
                                holders describe it); 0: held outside this daemon (another
                                rlockd, or a program's own SET NX): only ttl_left_ms and
                                foreign are set */
    char session_id[64];     /* the holder's session */
    char client_name[136];   /* its client name */
    uint64_t owner;
    int shared;              /* a shared (read) hold */
    uint32_t limit;          /* a semaphore's limit (0: a lock) */
    uint32_t permits;        /* the permits this holder has */
    uint64_t since_ms;       /* the daemon's wall clock at its grant, ms since the epoch */
    uint32_t holders;        /* sessions of this daemon holding it (1: exclusive); this is
                                the first of them */
    uint32_t ttl_left_ms;    /* here: its validity left; else the key's ttl left (0: not
                                known, or a key without expiry) */
    int foreign;             /* not here: the key's value was not made by rlockd */
};
/*
 * The holder named by the calling thread's latest failed call, when it was
 * an acquire answered NOT_ACQUIRED or TIMEOUT by a daemon that said who
 * holds the lock: copied into out, 0. Otherwise -1 (out untouched). In the
 * completion of an asynchronous acquire, that acquire's holder.
 */
int rlock_last_holder(struct rlock_holder *out);

/* The orders of rlock_top_resources, each highest first (docs/protocol.md, TopResources). */
enum rlock_top_order {
    RLOCK_TOP_WAIT = 0,      /* contention weight: microseconds waited, plus one per acquire
                                that found the lock taken */
    RLOCK_TOP_CONTENDED = 1, /* acquires that found the lock taken */
    RLOCK_TOP_TIMEOUTS = 2,  /* waits that ran out */
    RLOCK_TOP_HOLD = 3,      /* time held in all */
    RLOCK_TOP_WAITERS = 4,   /* acquires queued now, then the most queued at once */
    RLOCK_TOP_LOSSES = 5,    /* locks lost by their holders */
};

/*
 * One of the daemon's most contended resources: counted since the daemon's
 * summary took it in (weight overstated by at most weight_error; the rest
 * exact since). Times in microseconds; quantiles at most twice the truth.
 */
struct rlock_resource_stats {
    const char *resource;
    uint64_t weight, weight_error;
    uint64_t contended;   /* acquires that found it taken; of them: */
    uint64_t grants, timeouts, refusals, cancels;
    uint64_t wait_total_us, wait_p50_us, wait_p99_us, wait_max_us;
    uint64_t holds;       /* holds through the daemon that ended; of them lost: */
    uint64_t losses;
    uint64_t hold_total_us, hold_p50_us, hold_p99_us, hold_max_us;
    uint32_t waiters;     /* acquires of the daemon queued on it now */
    uint32_t waiters_max; /* the most queued at once */
    int held;             /* 1: a session of the daemon holds it now, named in holder */
    struct rlock_holder holder;
};

/* The daemon's summary as a whole. */
struct rlock_top_summary {
    uint32_t capacity;     /* resources it can follow (rlockd's metrics.top_resources) */
    uint32_t followed;     /* resources it follows now */
    uint64_t total_weight; /* the weight of every resource since the daemon started */
    uint64_t error_bound;  /* total_weight / capacity: every resource heavier is followed */
};

typedef int (*rlock_resource_visit_fn)(const struct rlock_resource_stats *r, void *arg);

/*
 * The daemon's most contended resources in order (limit: 0 = 10, at most
 * 1000): visit (may be NULL) is called for each, on the calling thread, as
 * for the listings; summary (may be NULL) gets the summary's totals. Needs
 * the admin role when the daemon has tokens.
 */
enum rlock_err rlock_top_resources(struct rlock_client *c, enum rlock_top_order order,
                                   uint32_t limit, rlock_resource_visit_fn visit, void *arg,
                                   struct rlock_top_summary *summary, uint32_t timeout_ms);

/* Static text of an error ("wait timed out"). */
const char *rlock_strerror(enum rlock_err e);
/* Static name of a lost reason ("expired", "stolen", ...). */
const char *rlock_lost_reason_str(enum rlock_lost_reason r);
/* The owner id of the calling thread (what owner 0 means for its acquires). */
uint64_t rlock_thread_owner(void);
/* Library version string. */
const char *rlock_version(void);

/* --- asynchronous clients ---------------------------------------------------- */
/*
 * For programs with their own event loop. An asynchronous client has no
 * thread of the library: the application polls its descriptor and calls
 * rlock_async_process, which reads, writes, sends keepalives and runs the
 * completion and lost-lock callbacks on the application's thread. Any number
 * of requests may be in flight; completions come in whatever order the daemon
 * answers. Asynchronous clients are not thread-safe: use each from one thread
 * at a time. The blocking calls above return RLOCK_ERR_ARG on them; the
 * getters, rlock_lock_free, rlock_foreach_lock, rlock_shutdown and rlock_close
 * work on both kinds. rlock_event.h attaches a client to a libevent loop.
 */

/* What a request came to; valid only during the completion callback. */
struct rlock_result {
    enum rlock_err err;
    const struct rlock_error *error; /* detail when err != RLOCK_OK */
    uint64_t id;                     /* the request's id (as returned when submitted) */
    struct rlock_lock *lock;         /* acquire OK: a new handle, now owned by the application */
    uint32_t hold_count;             /* release: holds left */
    uint32_t ttl_ms;                 /* extend: the new lease */
    uint64_t server_time_ms;         /* ping */
    const struct rlock_leader *leader; /* leader and observe OK: who leads, else NULL */
};
/* Completion of an asynchronous request: runs exactly once, inside rlock_async_process
 * (or inside rlock_shutdown / rlock_close, with RLOCK_ERR_CLOSED). */
typedef void (*rlock_done_fn)(struct rlock_client *c, const struct rlock_result *r, void *arg);
/* Told when the client's wanted events or next deadline changed outside rlock_async_process. */
typedef void (*rlock_change_fn)(struct rlock_client *c, void *arg);

/*
 * Connect (the socket connect itself is bounded by connect_timeout_ms, name
 * resolution is blocking) and queue the Hello; returns at once. on_ready (may
 * be NULL) completes when the Hello is answered (err RLOCK_OK: the session is
 * open). Requests may be submitted right away: they follow the Hello.
 */
enum rlock_err rlock_async_connect(const char *address, const struct rlock_options *opts,
                                   rlock_done_fn on_ready, void *ready_arg,
                                   struct rlock_client **out, char *errbuf, size_t errlen);
/*
 * The descriptor to poll. A session that moves to another connection gets a
 * new one: read it again after every rlock_async_process (the change
 * callback runs when it changed).
 */
int rlock_async_fd(const struct rlock_client *c);
/* The poll events wanted now: POLLIN, plus POLLOUT while output is queued. */
int rlock_async_events(const struct rlock_client *c);
/* Milliseconds until rlock_async_process must run again even without events (-1: none). */
int64_t rlock_async_timeout_ms(const struct rlock_client *c);
/*
 * Do the work revents (from poll; 0 after a timeout) allows. Returns RLOCK_OK
 * while the session is open, RLOCK_ERR_CLOSED once it has ended.
 */
enum rlock_err rlock_async_process(struct rlock_client *c, int revents);
/* Call fn (may be NULL) whenever rlock_async_events / rlock_async_timeout_ms change by a submission. */
void rlock_async_on_change(struct rlock_client *c, rlock_change_fn fn, void *arg);

/*
 * Submit requests. Each returns RLOCK_OK and (where id is not NULL) the
 * request's id, and done runs later exactly once; or returns an error at once
 * and done never runs. opts->cancel is ignored here: use rlock_async_cancel.
 */
enum rlock_err rlock_async_acquire(struct rlock_client *c, const char *resource,
                                   const struct rlock_acquire_opts *opts, rlock_done_fn done,
                                   void *arg, uint64_t *id);
enum rlock_err rlock_async_release(struct rlock_lock *l, rlock_done_fn done, void *arg,
                                   uint64_t *id);
enum rlock_err rlock_async_extend(struct rlock_lock *l, uint32_t ttl_ms, rlock_done_fn done,
                                  void *arg, uint64_t *id);
enum rlock_err rlock_async_ping(struct rlock_client *c, rlock_done_fn done, void *arg,
                                uint64_t *id);
/* rlock_leader, rlock_observe and rlock_observe_stop, their answer in rlock_result.leader. */
enum rlock_err rlock_async_leader(struct rlock_client *c, const char *name, rlock_done_fn done,
                                  void *arg, uint64_t *id);
enum rlock_err rlock_async_observe(struct rlock_client *c, const char *name, rlock_done_fn done,
                                   void *arg, uint64_t *id);
enum rlock_err rlock_async_observe_stop(struct rlock_client *c, const char *name,
                                        rlock_done_fn done, void *arg, uint64_t *id);
/*
 * Withdraw the acquire with this id: its completion then reports
 * RLOCK_ERR_CANCELLED (a grant that raced the cancel is released). Returns
 * RLOCK_ERR_NOT_HELD when no such acquire is pending (it completed already).
 */
enum rlock_err rlock_async_cancel(struct rlock_client *c, uint64_t id);

#ifdef __cplusplus
}
#endif

#endif
