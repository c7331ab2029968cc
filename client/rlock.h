/*
 * rlock.h — C client for rlockd, the distributed lock daemon.
 *
 * A client is one connection to rlockd, and one session: while it is open
 * (the library pings the daemon from a background thread) the daemon renews
 * the locks it holds; when it closes, or the process dies, the daemon
 * releases them at once.
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
 * Thread safety: every function may be called from any thread, and several
 * threads may share one client (requests are multiplexed by id). A lock
 * handle may be used by one thread at a time. The lost-lock callback runs on
 * the library's background thread; it must return quickly and must not call
 * blocking functions (acquire, release, extend, ping, stats) of the same
 * client; it may close it (see rlock_close). There is no global state:
 * clients are independent.
 *
 * Timeouts: every blocking call takes timeout_ms, the longest it waits for
 * the daemon's answer (for acquire: on top of the requested wait). 0 selects
 * RLOCK_DEFAULT_TIMEOUT_MS. A call that runs out of time returns
 * RLOCK_ERR_DEADLINE; its outcome on the server is then unknown, and the
 * library closes the session so that the daemon releases whatever it held.
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

/* Results. Values 1..10 mirror the daemon's status codes (docs/protocol.md). */
enum rlock_err {
    RLOCK_OK = 0,
    RLOCK_ERR_NOT_ACQUIRED = 1,      /* try-acquire: held by someone else */
    RLOCK_ERR_TIMEOUT = 2,           /* the wait expired */
    RLOCK_ERR_NOT_HELD = 3,          /* release/extend of a lock not held */
    RLOCK_ERR_INVALID = 4,           /* the daemon refused a field */
    RLOCK_ERR_UNAUTHENTICATED = 5,
    RLOCK_ERR_PERMISSION_DENIED = 6,
    RLOCK_ERR_LIMIT_EXCEEDED = 7,
    RLOCK_ERR_UNAVAILABLE = 8,       /* the daemon cannot reach Redis; retry later */
    RLOCK_ERR_SHUTTING_DOWN = 9,
    RLOCK_ERR_INTERNAL = 10,
    RLOCK_ERR_ARG = 100,             /* bad argument to a library call */
    RLOCK_ERR_NOMEM = 101,
    RLOCK_ERR_CONNECT = 102,         /* could not connect or say Hello */
    RLOCK_ERR_CLOSED = 103,          /* the session has ended (connection lost) */
    RLOCK_ERR_DEADLINE = 104,        /* no answer within timeout_ms */
    RLOCK_ERR_PROTOCOL = 105,        /* the daemon sent something unexpected */
};

enum rlock_lock_state {
    RLOCK_HELD = 0,
    RLOCK_LOST = 1,     /* the daemon lost it, or the session ended */
    RLOCK_RELEASED = 2, /* released by rlock_release */
};

/* Why a lock was lost; values mirror LostReason in proto/rlock.proto. */
enum rlock_lost_reason {
    RLOCK_LOST_UNSPECIFIED = 0,
    RLOCK_LOST_EXPIRED = 1,  /* not renewed in time (Redis unreachable) */
    RLOCK_LOST_STOLEN = 2,   /* the key holds another token */
    RLOCK_LOST_MISSING = 3,  /* the key vanished */
    RLOCK_LOST_FORCED = 4,   /* an operator released it (reserved: not sent yet) */
    RLOCK_LOST_SESSION = 5,  /* the session ended (connection lost or timed out) */
};

struct rlock_client;
struct rlock_lock;

/*
 * Called on the background thread once for each held lock that is lost.
 * resource and token are valid only during the call.
 */
typedef void (*rlock_lost_fn)(struct rlock_client *c, const char *resource, const char *token,
                              uint64_t fence, enum rlock_lost_reason reason, void *arg);

struct rlock_options {
    const char *client_name;      /* shown in the daemon's logs; NULL = "librlock" */
    uint32_t session_timeout_ms;  /* 0 = the daemon's default */
    uint32_t connect_timeout_ms;  /* 0 = RLOCK_DEFAULT_TIMEOUT_MS */
    rlock_lost_fn on_lost;        /* may be NULL */
    void *on_lost_arg;
};

struct rlock_acquire_opts {
    uint32_t ttl_ms;   /* lease; 0 = the daemon's default_ttl */
    uint32_t wait_ms;  /* 0 = try once; > 0 = wait up to this long */
    int watchdog_off;  /* 0 (default): the daemon renews the lease while the session lives */
};

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

/*
 * Connect to address ("HOST:PORT" with a numeric or resolvable host, or
 * "unix:/path") and open a session. opts may be NULL. On success stores the
 * client in *out. On failure returns the error and, if errbuf is not NULL,
 * a message in errbuf.
 */
enum rlock_err rlock_connect(const char *address, const struct rlock_options *opts,
                             struct rlock_client **out, char *errbuf, size_t errlen);

/*
 * End the session (the daemon releases every lock it still holds), stop the
 * background thread and free the client and every lock handle not yet freed.
 * Accepts NULL. Called from the lost-lock callback, it returns at once: no
 * further callback comes, and the background thread frees the client and
 * its handles once the callback has returned. Either way, neither the client
 * nor its handles may be used after the call.
 */
void rlock_close(struct rlock_client *c);

/* Session id given by the daemon (a UUID string), valid until rlock_close. */
const char *rlock_session_id(const struct rlock_client *c);
/* Effective session timeout and keepalive interval the daemon granted. */
uint32_t rlock_session_timeout_ms(const struct rlock_client *c);
/*
 * 1 while the session is open, 0 once it has ended. A session that nothing
 * was written to or heard from for a whole session timeout (the process was
 * stopped, the machine suspended) is ended by this check; so are the lock
 * state getters below.
 */
int rlock_client_alive(struct rlock_client *c);

/*
 * Acquire resource. opts may be NULL (defaults: server ttl, no wait, watchdog
 * on). On RLOCK_OK stores a new lock handle in *out. Acquiring a resource the
 * session already holds returns another handle to the same lock (same token
 * and fence, hold count + 1).
 */
enum rlock_err rlock_acquire(struct rlock_client *c, const char *resource,
                             const struct rlock_acquire_opts *opts, uint32_t timeout_ms,
                             struct rlock_lock **out);

/* Release one hold of the lock. The handle stays valid (state RELEASED) until freed. */
enum rlock_err rlock_release(struct rlock_lock *l, uint32_t timeout_ms);

/* Renew the lease to ttl_ms from now (0 = its own ttl); for watchdog-off locks. */
enum rlock_err rlock_extend(struct rlock_lock *l, uint32_t ttl_ms, uint32_t timeout_ms);

/* Free a lock handle. Does not release it (the session's end will). Accepts NULL. */
void rlock_lock_free(struct rlock_lock *l);

enum rlock_lock_state rlock_lock_state(const struct rlock_lock *l);
enum rlock_lost_reason rlock_lock_lost_reason(const struct rlock_lock *l);
const char *rlock_lock_resource(const struct rlock_lock *l);
const char *rlock_lock_token(const struct rlock_lock *l);
uint64_t rlock_lock_fence(const struct rlock_lock *l);
uint32_t rlock_lock_ttl_ms(const struct rlock_lock *l);
uint32_t rlock_lock_hold_count(const struct rlock_lock *l);

/* Round trip to the daemon; server_time_ms may be NULL. */
enum rlock_err rlock_ping(struct rlock_client *c, uint32_t timeout_ms, uint64_t *server_time_ms);

/* Daemon-wide counters. */
enum rlock_err rlock_stats(struct rlock_client *c, uint32_t timeout_ms, struct rlock_stats *out);

/*
 * Message of the latest failed call on c (the daemon's text or the library's),
 * copied into buf. With several threads it may belong to another thread's call.
 */
void rlock_errmsg(struct rlock_client *c, char *buf, size_t len);

/* Static name of an error ("RLOCK_ERR_TIMEOUT" -> "wait timed out"). */
const char *rlock_strerror(enum rlock_err e);
/* Static name of a lost reason ("expired", "stolen", ...). */
const char *rlock_lost_reason_str(enum rlock_lost_reason r);

/* Library version string. */
const char *rlock_version(void);

#ifdef __cplusplus
}
#endif

#endif
