/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * chaos_worker.c — one worker of the chaos test: a careful application of
 * librlock, logging everything it does.
 *
 *   rlock-chaos --worker DIR SLOT ADDRESS SEED
 *
 * Loop until the driver says stop: acquire (waiting) one of a few resources;
 * check the lock is HELD with validity to spare; enter the referee; check
 * again; then, while the lock stays HELD with validity to spare, write to the
 * fenced store with the lock's fence and work a little; leave; release.
 *
 * "Careful" means what docs/client.md asks of an application: act only while
 * rlock_lock_state() says HELD and rlock_lock_valid_until() leaves room for
 * the step about to be taken; on RLOCK_UNCERTAIN wait briefly for news and
 * give up if none comes; work in slices that end at once when the lost-lock
 * descriptor fires; after the session ends, close the client and connect a
 * new one. The one gap it cannot close is between its last check and the
 * moment its write lands: that is what fencing is for, and the gap is made
 * visible (phase CHECKED, a few ms) so that the nemesis can pause a worker
 * inside it and produce stale writes on purpose.
 *
 * Resource choices exercise the acquire options: odd resources ask for
 * lock_delay (CHAOS_LOCK_DELAY_MS), the last one for max_hold
 * (CHAOS_MAX_HOLD_MS) and is sometimes held past it on purpose. A few holds
 * on the others last longer than a ttl (writing and working in slices), so
 * that faults of Redis and rlockd find holders that depend on renewals.
 * A share of the acquires ask for a shared hold (chaos_shared_pct: most of
 * them on resource 0, read-mostly, fewer elsewhere); a shared holder does
 * exactly what an exclusive one does, and enters the referee as shared.
 *
 * History lines (DIR/w<SLOT>.log, "<us> <pid> EVENT fields..."):
 *   START / EXIT code / CONNECT rc / SESSION_END rc why (why the session ended, from a ping)
 *   ACQ res ttl mode              (an acquire starts; mode x exclusive, s shared)
 *   ACQFAIL res rc
 *   GRANT res fence ttl valid_left_ms token mode
 *   SKIP res fence state          (not usable right after the grant)
 *   VOID res fence seq state      (entered, but the post-entry check failed)
 *   ENTER res fence seq redis_epoch mode
 *   OVERLAP res fence seq other_slot other_pid other_fence kind other_valid_left_ms
 *           mode other_mode
 *   UNCERTAIN res fence           (waited for news)
 *   WRITE res fence verdict believed highest
 *   NOTICE res fence state reason (stopped acting: not HELD, or validity too short)
 *   LEAVE res fence seq
 *   RELEASE res fence rc / DROP res fence state reason
 *   LOSTCB res fence reason       (on_lost callback)
 */
#include "chaos.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rlock.h"

#define W_ACQUIRE_WAIT_MS 3000u
#define W_CALL_TIMEOUT_MS 2000u
#define W_CONNECT_TIMEOUT_MS 1000u
#define W_UNCERTAIN_WAIT_MS 500
/* How long a release refused UNAVAILABLE (a session moving) is tried again. */
#define W_RELEASE_RETRY_MS 5000
#define W_STORE_TIMEOUT_S 5
/* Long holds: past max_hold on the last resource; elsewhere longer than a ttl,
 * so that Redis and rlockd faults find holders whose leases need renewing. */
#define W_LONG_HOLD_PCT 6
#define W_LONG_HOLD_MAX_HOLD_MS 1300
#define W_LONG_HOLD_MIN_MS 2000
#define W_LONG_HOLD_MAX_MS 4000

struct worker {
    struct chaos_shm *m;
    struct chaos_slot *slot;
    int slot_idx;
    int pid;
    int log;
    const char *addr;
    char dir[256];
    struct chaos_rng rng;
    struct rlock_client *c;
    int store_fd;
    struct rlock_cancel *cancel;
    uint32_t backoff_ms;
};

static void w_on_lost(struct rlock_client *c, const char *resource, const char *token,
                      uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c;
    (void)token;
    struct worker *w = arg;
    chaos_log(w->log, "%d LOSTCB %s %" PRIu64 " %s", w->pid, resource, fence,
              rlock_lost_reason_str(reason));
}

/* The stop flag is in shared memory; a blocked acquire learns of it through the token. */
static void *w_watch_stop(void *arg)
{
    struct worker *w = arg;
    while (!atomic_load(&w->m->stop))
        chaos_sleep_ms(20);
    rlock_cancel(w->cancel);
    return NULL;
}

static int w_store_connect(struct worker *w)
{
    char path[512];
    snprintf(path, sizeof path, "%s/store.sock", w->dir);
    int64_t deadline = chaos_now_ms() + 5000;
    for (;;) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof sa.sun_path) {
            fprintf(stderr, "chaos worker: socket path too long: %s\n", path);
            return -1;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            struct timeval tv = { W_STORE_TIMEOUT_S, 0 };
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            return fd;
        }
        if (fd >= 0)
            close(fd);
        if (chaos_now_ms() >= deadline) {
            fprintf(stderr, "chaos worker: connect %s: %s\n", path, strerror(errno));
            return -1;
        }
        chaos_sleep_ms(50);
    }
}

/* Send one write to the store; the verdict, or -1 when the store did not answer. */
static int w_store_write(struct worker *w, int res, uint64_t fence, uint64_t seq, int shared,
                         enum rlock_lock_state believed, uint64_t *highest)
{
    struct chaos_write msg = { .slot = (uint32_t)w->slot_idx, .pid = w->pid, .res = (uint32_t)res,
                               .believed = (int32_t)believed, .fence = fence, .hold_seq = seq,
                               .shared = shared };
    if (send(w->store_fd, &msg, sizeof msg, MSG_NOSIGNAL) != (ssize_t)sizeof msg)
        return -1;
    struct chaos_reply rep;
    ssize_t got;
    do {
        got = recv(w->store_fd, &rep, sizeof rep, 0);
    } while (got < 0 && errno == EINTR);
    if (got != (ssize_t)sizeof rep)
        return -1;
    *highest = rep.highest;
    return rep.verdict;
}

/* Clear the lost-lock descriptor (read only when poll says it is readable). */
static void w_drain_lost(struct worker *w)
{
    int fd = rlock_lost_fd(w->c);
    struct pollfd p = { .fd = fd, .events = POLLIN };
    uint64_t v;
    if (fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
        ssize_t r = read(fd, &v, sizeof v);
        (void)r;
    }
}

/* Sleep up to ms, returning early when a lock of the client is lost. */
static void w_work(struct worker *w, int ms)
{
    int fd = rlock_lost_fd(w->c);
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int64_t until = chaos_now_ms() + ms;
    for (;;) {
        int64_t left = until - chaos_now_ms();
        if (left <= 0)
            return;
        int rc = fd >= 0 ? poll(&p, 1, (int)left) : (chaos_sleep_ms((int)left), 0);
        if (rc > 0 || (rc < 0 && errno != EINTR))
            return;
    }
}

/*
 * Whether the lock may be acted on now: HELD, with at least
 * CHAOS_VALID_MARGIN_MS of validity left. UNCERTAIN (or HELD with too little
 * validity) waits up to W_UNCERTAIN_WAIT_MS for news: a keepalive answer may
 * vouch for the lock again. *state gets the last state seen.
 */
static int w_usable(struct worker *w, struct rlock_lock *l, int res,
                    enum rlock_lock_state *state)
{
    int64_t give_up = chaos_now_ms() + W_UNCERTAIN_WAIT_MS;
    int logged = 0;
    for (;;) {
        enum rlock_lock_state st = rlock_lock_state(l);
        int64_t vu = rlock_lock_valid_until(l);
        int64_t now = chaos_now_ms();
        *state = st;
        if (st == RLOCK_HELD && vu - now >= CHAOS_VALID_MARGIN_MS) {
            atomic_store(&w->slot->valid_until_ms, vu);
            return 1;
        }
        if (st == RLOCK_LOST || st == RLOCK_RELEASED || now >= give_up)
            return 0;
        if (!logged) {
            chaos_log(w->log, "%d UNCERTAIN %d %" PRIu64 " %d %lld", w->pid, res,
                      rlock_lock_fence(l), (int)st, (long long)(vu - now));
            logged = 1;
        }
        w_work(w, 20);
    }
}

/* Enter the referee for res: returns the occupants already inside (chaos_occupant_bit). */
static uint64_t w_enter(struct worker *w, int res, uint64_t fence, uint64_t seq, int shared)
{
    atomic_store(&w->slot->hold_seq, seq);
    atomic_store(&w->slot->enter_epoch, atomic_load(&w->m->redis_epoch));
    atomic_store(&w->slot->fence, fence);
    atomic_store(&w->slot->shared, shared);
    atomic_store(&w->slot->inside, res);
    atomic_store(&w->slot->phase, CHAOS_PH_INSIDE);
    uint64_t bit = chaos_occupant_bit(w->slot_idx, shared);
    return atomic_fetch_or(&w->m->occupants[res], bit) & ~bit;
}

static void w_leave(struct worker *w, int res, int shared)
{
    /* The bit goes first: an entrant that still sees it must find this hold's fields. */
    atomic_fetch_and(&w->m->occupants[res], ~chaos_occupant_bit(w->slot_idx, shared));
    atomic_store(&w->slot->phase, CHAOS_PH_IDLE);
    atomic_store(&w->slot->inside, -1);
}

/*
 * Judge and record every occupant found inside on entry. An exclusive holder
 * must be alone: any occupant, of either mode, next to an exclusive entrant, and
 * an exclusive occupant next to a shared entrant, is judged as before (paused,
 * killed, or a violation). Two shared holders at once are what shared mode
 * allows: counted apart (CHAOS_OV_SHARED), to show that the mix exercised it.
 */
static void w_judge_overlap(struct worker *w, int res, uint64_t fence, uint64_t seq, int shared,
                            uint64_t others)
{
    for (int b = 0; b < 64; b++) {
        if (!(others & (UINT64_C(1) << b)))
            continue;
        int j = b % CHAOS_SHARED_SHIFT;
        int other_shared = b >= CHAOS_SHARED_SHIFT;
        struct chaos_slot *o = &w->m->slots[j];
        int killed = atomic_load(&o->killed);
        uint64_t hs = atomic_load(&o->hold_seq);
        uint64_t ps = atomic_load(&o->paused_seq);
        uint64_t epoch = atomic_load(&o->enter_epoch);
        int paused = ps != 0 && ps == hs;
        enum chaos_overlap kind = shared && other_shared ? (killed || paused
                                                                ? CHAOS_OV_SHARED_FAULTED
                                                                : CHAOS_OV_SHARED)
                                  : killed ? CHAOS_OV_KILLED
                                  : paused ? CHAOS_OV_PAUSED
                                  : epoch != atomic_load(&w->m->redis_epoch)
                                      ? CHAOS_OV_REDIS_LOST
                                      : CHAOS_OV_VIOLATION;
        atomic_fetch_add(&w->m->overlaps[kind], 1);
        chaos_log(w->log, "%d OVERLAP %d %" PRIu64 " %" PRIu64 " %d %d %" PRIu64 " %d %lld %c %c",
                  w->pid, res, fence, seq, j, atomic_load(&o->pid), atomic_load(&o->fence),
                  (int)kind, (long long)(atomic_load(&o->valid_until_ms) - chaos_now_ms()),
                  shared ? 's' : 'x', other_shared ? 's' : 'x');
    }
}

/* After the session ended or a call timed out: drop the client; the loop reconnects. */
static void w_drop_client(struct worker *w)
{
    /* A call on an ended session answers with the reason it ended: keep it in the history. */
    enum rlock_err rc = rlock_ping(w->c, 100, NULL);
    chaos_log(w->log, "%d SESSION_END %d %s", w->pid, (int)rc,
              rc == RLOCK_OK ? "-" : rlock_last_error()->message);
    rlock_close(w->c);
    w->c = NULL;
}

static void w_hold_once(struct worker *w)
{
    struct chaos_shm *m = w->m;
    int res = (int)chaos_rng_range(&w->rng, 0, (uint32_t)m->nres - 1);
    char name[64];
    chaos_res_name(res, name, sizeof name);
    /* No draw when the run asks for no shared holds: the other draws stay as they were. */
    int shared_pct = chaos_shared_pct(m->shared_pct, res);
    int shared = shared_pct > 0 && (int)chaos_rng_range(&w->rng, 1, 100) <= shared_pct;
    char mode = shared ? 's' : 'x';
    struct rlock_acquire_opts o = {
        .ttl_ms = chaos_rng_range(&w->rng, CHAOS_TTL_MIN_MS, CHAOS_TTL_MAX_MS),
        .wait_ms = W_ACQUIRE_WAIT_MS,
        .no_reentry = 1,
        .cancel = w->cancel,
        .lock_delay_ms = (res & 1) ? CHAOS_LOCK_DELAY_MS : 0,
        .max_hold_ms = res == m->nres - 1 ? CHAOS_MAX_HOLD_MS : 0,
        .shared = shared,
    };
    struct rlock_lock *l = NULL;
    chaos_log(w->log, "%d ACQ %d %u %c", w->pid, res, o.ttl_ms, mode);
    enum rlock_err rc = rlock_acquire(w->c, name, &o, W_CALL_TIMEOUT_MS, &l);
    if (rc != RLOCK_OK) {
        chaos_log(w->log, "%d ACQFAIL %d %d", w->pid, res, (int)rc);
        if (rc == RLOCK_ERR_UNAVAILABLE || rc == RLOCK_ERR_LIMIT_EXCEEDED ||
            rc == RLOCK_ERR_SHUTTING_DOWN || rc == RLOCK_ERR_INTERNAL) {
            uint32_t hint = rlock_last_error()->retry_after_ms;
            chaos_sleep_ms((int)(hint == 0 || hint > 500 ? 100 : hint));
        }
        if (!rlock_client_alive(w->c))
            w_drop_client(w);
        return;
    }
    uint64_t fence = rlock_lock_fence(l);
    atomic_fetch_add(&m->grants, 1);
    if (shared)
        atomic_fetch_add(&m->shared_grants, 1);
    chaos_log(w->log, "%d GRANT %d %" PRIu64 " %u %lld %s %c", w->pid, res, fence, o.ttl_ms,
              (long long)(rlock_lock_valid_until(l) - chaos_now_ms()), rlock_lock_token(l), mode);
    w_drain_lost(w);

    enum rlock_lock_state st;
    if (!w_usable(w, l, res, &st)) {
        chaos_log(w->log, "%d SKIP %d %" PRIu64 " %d", w->pid, res, fence, (int)st);
        goto release;
    }
    uint64_t seq = atomic_fetch_add(&m->seq, 1) + 1;
    uint64_t others = w_enter(w, res, fence, seq, shared);
    if (!w_usable(w, l, res, &st)) {
        /* Never acted on: an entry that does not count, overlapping or not. */
        w_leave(w, res, shared);
        chaos_log(w->log, "%d VOID %d %" PRIu64 " %" PRIu64 " %d", w->pid, res, fence, seq,
                  (int)st);
        goto release;
    }
    chaos_log(w->log, "%d ENTER %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %c", w->pid, res, fence,
              seq, atomic_load(&m->redis_epoch), mode);
    if (others)
        w_judge_overlap(w, res, fence, seq, shared, others);

    int long_hold = chaos_rng_range(&w->rng, 1, 100) <= W_LONG_HOLD_PCT;
    int writes = long_hold ? 1000 : (int)chaos_rng_range(&w->rng, 1, 3);
    int64_t hold_ms = res == m->nres - 1
                          ? W_LONG_HOLD_MAX_HOLD_MS
                          : chaos_rng_range(&w->rng, W_LONG_HOLD_MIN_MS, W_LONG_HOLD_MAX_MS);
    int64_t hold_until = chaos_now_ms() + (long_hold ? hold_ms : 0);
    atomic_store(&w->slot->long_hold, long_hold);
    for (int i = 0; i < writes; i++) {
        if (long_hold && chaos_now_ms() >= hold_until)
            break;
        if (i > 0 && !w_usable(w, l, res, &st)) {
            chaos_log(w->log, "%d NOTICE %d %" PRIu64 " %d %s", w->pid, res, fence, (int)st,
                      st == RLOCK_LOST ? rlock_lost_reason_str(rlock_lock_lost_reason(l))
                                       : "no-validity");
            break;
        }
        /* The unavoidable gap between the last check and the write landing. */
        atomic_store(&w->slot->phase, CHAOS_PH_CHECKED);
        chaos_sleep_ms((int)chaos_rng_range(&w->rng, 10, 30));
        uint64_t highest = 0;
        int verdict = w_store_write(w, res, fence, seq, shared, st, &highest);
        atomic_store(&w->slot->phase, CHAOS_PH_INSIDE);
        chaos_log(w->log, "%d WRITE %d %" PRIu64 " %d %d %" PRIu64, w->pid, res, fence, verdict,
                  (int)st, highest);
        if (verdict < 0) {
            fprintf(stderr, "chaos worker %d: the fenced store did not answer\n", w->slot_idx);
            exit(3);
        }
        w_work(w, (int)chaos_rng_range(&w->rng, 5, long_hold ? 60 : 30));
    }
    atomic_store(&w->slot->long_hold, 0);
    w_leave(w, res, shared);
    chaos_log(w->log, "%d LEAVE %d %" PRIu64 " %" PRIu64, w->pid, res, fence, seq);

release:
    st = rlock_lock_state(l);
    if (st == RLOCK_HELD || st == RLOCK_UNCERTAIN) {
        /* UNAVAILABLE while the session moves to another daemon: the lock stays
         * held (UNCERTAIN), so release it again once the session is back. */
        int64_t give_up = chaos_now_ms() + W_RELEASE_RETRY_MS;
        for (;;) {
            rc = rlock_release(l, W_CALL_TIMEOUT_MS);
            st = rlock_lock_state(l);
            if (rc != RLOCK_ERR_UNAVAILABLE || (st != RLOCK_HELD && st != RLOCK_UNCERTAIN) ||
                !rlock_client_alive(w->c) || chaos_now_ms() >= give_up)
                break;
            chaos_sleep_ms(50);
        }
        chaos_log(w->log, "%d RELEASE %d %" PRIu64 " %d", w->pid, res, fence, (int)rc);
    } else {
        chaos_log(w->log, "%d DROP %d %" PRIu64 " %d %s", w->pid, res, fence, (int)st,
                  rlock_lost_reason_str(rlock_lock_lost_reason(l)));
    }
    rlock_lock_free(l);
    if (!rlock_client_alive(w->c))
        w_drop_client(w);
}

static void w_connect(struct worker *w)
{
    struct rlock_options o = {
        .client_name = "rlock-chaos-worker",
        .session_timeout_ms = CHAOS_SESSION_TIMEOUT_MS,
        .connect_timeout_ms = W_CONNECT_TIMEOUT_MS,
        .on_lost = w_on_lost,
        .on_lost_arg = w,
    };
    char err[256] = "";
    enum rlock_err rc = rlock_connect(w->addr, &o, &w->c, err, sizeof err);
    chaos_log(w->log, "%d CONNECT %d", w->pid, (int)rc);
    if (rc == RLOCK_OK) {
        w->backoff_ms = 50;
        return;
    }
    w->c = NULL;
    /* rlockd is down (killed by the nemesis): retry with a growing delay. */
    chaos_sleep_ms((int)chaos_rng_range(&w->rng, w->backoff_ms / 2, w->backoff_ms));
    if (w->backoff_ms < 500)
        w->backoff_ms *= 2;
}

int chaos_worker_main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: rlock-chaos --worker DIR SLOT ADDRESS SEED\n");
        return 64;
    }
    struct worker w = { .store_fd = -1, .backoff_ms = 50 };
    snprintf(w.dir, sizeof w.dir, "%s", argv[2]);
    w.slot_idx = atoi(argv[3]);
    w.addr = argv[4];
    w.pid = (int)getpid();
    chaos_rng_seed(&w.rng, strtoull(argv[5], NULL, 10) ^ ((uint64_t)w.pid << 32));
    w.m = chaos_shm_map(w.dir, 0);
    if (!w.m || w.slot_idx < 0 || w.slot_idx >= w.m->nworkers)
        return 64;
    w.slot = &w.m->slots[w.slot_idx];
    char name[32];
    snprintf(name, sizeof name, "w%d.log", w.slot_idx);
    w.log = chaos_log_open(w.dir, name);
    if (w.log < 0)
        return 1;
    chaos_log(w.log, "%d START", w.pid);
    w.store_fd = w_store_connect(&w);
    if (w.store_fd < 0)
        return 1;
    w.cancel = rlock_cancel_new();
    pthread_t watcher;
    if (!w.cancel || pthread_create(&watcher, NULL, w_watch_stop, &w) != 0)
        return 1;

    while (!atomic_load(&w.m->stop)) {
        if (!w.c)
            w_connect(&w);
        else
            w_hold_once(&w);
    }
    /* A clean close: the daemon releases what is left at once, without lock_delay. */
    if (w.c)
        rlock_close(w.c);
    pthread_join(watcher, NULL);
    rlock_cancel_free(w.cancel);
    chaos_log(w.log, "%d EXIT 0", w.pid);
    return 0;
}
