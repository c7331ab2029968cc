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
 * Two more resources, when the run has them: the semaphore (chaos/sem, its
 * limit from --semaphore; 1 permit, sometimes 2, a third of the acquires with
 * lock_delay and a third with max_hold), whose holders enter the referee with
 * their permits and judge the limit (w_judge_sem); and the election
 * (chaos/leader), campaigned for with the value "worker-SLOT-PID": the grant is
 * an exclusive lock whose fence is the term, the release resigns. Every client
 * of the worker observes the election (rlock_observe, on_leader), and now and
 * then reads its leader once (rlock_leader); all of it goes to the history for
 * the offline check (README.md "Elections").
 *
 * History lines (DIR/w<SLOT>.log, "<us> <pid> EVENT fields..."):
 *   START / EXIT code / CONNECT rc / SESSION_END rc why (why the session ended, from a ping)
 *   ACQ res ttl mode [permits]    (an acquire starts; mode x exclusive, s shared,
 *                                  p a semaphore's permits, l a campaign)
 *   ACQFAIL res rc
 *   GRANT res fence ttl valid_left_ms token mode [permits]
 *   SKIP res fence state          (not usable right after the grant)
 *   VOID res fence seq state      (entered, but the post-entry check failed)
 *   ENTER res fence seq redis_epoch mode
 *         [permits holders permits_inside live_holders live_permits]   (p: who was
 *                                  inside with it, itself included; live: neither
 *                                  paused in that hold nor being killed)
 *   OVERLAP res fence seq other_slot other_pid other_fence kind other_valid_left_ms
 *           mode other_mode
 *   SEMOVER res fence seq permits_inside limit kind slot/pid/permits/class...
 *                                 (a semaphore entrant found more than the limit inside,
 *                                  itself included; kind enum chaos_overlap; class of
 *                                  each occupant: live, paused, killed, lost)
 *   OBSERVE gen rc elected term value      (rlock_observe's answer on client gen)
 *   LEADER gen elected term value          (an on_leader callback of client gen)
 *   LEADERREAD gen rc elected term value before   (rlock_leader; before: the highest
 *                                  term client gen had been shown when it was called)
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
/* Per cent of loop turns that read the election's leader once (rlock_leader). */
#define W_LEADER_READ_PCT 5

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
    char value[64];             /* its campaign value, "worker-SLOT-PID" */
    struct w_client *wc;        /* the on_leader context of the client c */
    int gen;                    /* clients connected so far: names c's stream of changes */
    int observing;              /* c observes the election */
};

/* What the on_leader callback of one client needs: its generation, the highest term shown. */
struct w_client {
    struct worker *w;
    int gen;
    _Atomic uint64_t shown; /* the highest term reported to this client (answer or change) */
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

static void w_on_leader(struct rlock_client *c, const char *resource, int elected, uint64_t term,
                        const char *value, void *arg)
{
    (void)c;
    (void)resource;
    struct w_client *wc = arg;
    struct worker *w = wc->w;
    atomic_fetch_add(&w->m->leader_events, 1);
    uint64_t shown = atomic_load(&wc->shown);
    while (term > shown && !atomic_compare_exchange_weak(&wc->shown, &shown, term)) {
    }
    chaos_log(w->log, "%d LEADER %d %d %" PRIu64 " %s", w->pid, wc->gen, elected, term,
              value && value[0] ? value : "-");
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
                         uint32_t permits, enum rlock_lock_state believed, uint64_t *highest)
{
    struct chaos_write msg = { .slot = (uint32_t)w->slot_idx, .pid = w->pid, .res = (uint32_t)res,
                               .believed = (int32_t)believed, .fence = fence, .hold_seq = seq,
                               .shared = shared, .permits = permits };
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

/*
 * Enter the referee for res: returns the occupant word as it was before (the others
 * inside, chaos_occupant_bit; on the semaphore also the permits they held, in the low
 * bits). permits > 0: a semaphore's holder, entering as one of the group.
 */
static uint64_t w_enter(struct worker *w, int res, uint64_t fence, uint64_t seq, int shared,
                        uint32_t permits)
{
    atomic_store(&w->slot->hold_seq, seq);
    atomic_store(&w->slot->enter_epoch, atomic_load(&w->m->redis_epoch));
    atomic_store(&w->slot->fence, fence);
    atomic_store(&w->slot->shared, shared);
    atomic_store(&w->slot->permits, permits);
    atomic_store(&w->slot->inside, res);
    atomic_store(&w->slot->phase, CHAOS_PH_INSIDE);
    if (permits > 0)
        return atomic_fetch_add(&w->m->occupants[res], chaos_sem_word(w->slot_idx, permits));
    uint64_t bit = chaos_occupant_bit(w->slot_idx, shared);
    return atomic_fetch_or(&w->m->occupants[res], bit) & ~bit;
}

static void w_leave(struct worker *w, int res, int shared, uint32_t permits)
{
    /* The bit goes first: an entrant that still sees it must find this hold's fields. */
    if (permits > 0)
        atomic_fetch_sub(&w->m->occupants[res], chaos_sem_word(w->slot_idx, permits));
    else
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

/* What a semaphore entrant saw inside, itself included (the ENTER line's fields). */
struct w_sem_view {
    int holders, live_holders;
    uint32_t permits, live_permits;
};

/*
 * Judge a semaphore's entry: the permits inside, its own included, exact from the
 * occupant word before its add, must not exceed the limit. An excess is explained,
 * in this order, by the permits of occupants the nemesis paused during their hold,
 * then of those it was killing, then of those whose places a Redis restart lost
 * during their hold; what none of these explains is a violation (the same classes
 * as an overlap of locks, README.md "Semaphores"). Each occupant's class is read
 * from its slot, as for locks.
 */
static void w_judge_sem(struct worker *w, int res, uint64_t fence, uint64_t seq, uint32_t permits,
                        uint64_t before, struct w_sem_view *v)
{
    uint32_t limit = (uint32_t)w->m->sem_limit;
    uint32_t total = CHAOS_SEM_PERMITS(before) + permits;
    uint32_t paused_p = 0, killed_p = 0, lost_p = 0;
    char desc[640] = "";
    size_t off = 0;
    *v = (struct w_sem_view){ .holders = 1, .live_holders = 1, .permits = total,
                              .live_permits = total };
    uint64_t cur_epoch = atomic_load(&w->m->redis_epoch);
    for (int j = 0; j < CHAOS_SHARED_SHIFT; j++) {
        if (!(before & chaos_occupant_bit(j, 1)))
            continue;
        struct chaos_slot *o = &w->m->slots[j];
        uint32_t p = atomic_load(&o->permits);
        uint64_t hs = atomic_load(&o->hold_seq);
        uint64_t ps = atomic_load(&o->paused_seq);
        const char *cls = "live";
        v->holders++;
        if (ps != 0 && ps == hs) {
            cls = "paused";
            paused_p += p;
        } else if (atomic_load(&o->killed)) {
            cls = "killed";
            killed_p += p;
        } else if (atomic_load(&o->enter_epoch) != cur_epoch) {
            cls = "lost";
            lost_p += p;
        }
        if (cls[0] == 'p' || cls[0] == 'k') {
            v->live_permits -= p < v->live_permits ? p : v->live_permits;
        } else {
            v->live_holders++;
        }
        if (off < sizeof desc - 64)
            off += (size_t)snprintf(desc + off, sizeof desc - off, " %d/%d/%u/%s", j,
                                    atomic_load(&o->pid), p, cls);
    }
    if (total <= limit)
        return;
    enum chaos_overlap kind = total - paused_p <= limit                      ? CHAOS_OV_PAUSED
                              : total - paused_p - killed_p <= limit         ? CHAOS_OV_KILLED
                              : total - paused_p - killed_p - lost_p <= limit ? CHAOS_OV_REDIS_LOST
                                                                             : CHAOS_OV_VIOLATION;
    atomic_fetch_add(&w->m->overlaps[kind], 1);
    chaos_log(w->log, "%d SEMOVER %d %" PRIu64 " %" PRIu64 " %u %u %d%s", w->pid, res, fence, seq,
              total, limit, (int)kind, desc);
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
    free(w->wc);
    w->wc = NULL;
    w->observing = 0;
}

/* Observe the election on the current client: its answer starts the client's stream. */
static void w_observe(struct worker *w)
{
    char name[64];
    chaos_res_name(w->m, w->m->elect_res, name, sizeof name);
    struct rlock_leader now;
    memset(&now, 0, sizeof now);
    enum rlock_err rc = rlock_observe(w->c, name, W_CALL_TIMEOUT_MS, &now);
    if (rc == RLOCK_OK) {
        w->observing = 1;
        uint64_t shown = atomic_load(&w->wc->shown);
        while (now.term > shown && !atomic_compare_exchange_weak(&w->wc->shown, &shown, now.term)) {
        }
    }
    chaos_log(w->log, "%d OBSERVE %d %d %d %" PRIu64 " %s", w->pid, w->gen, (int)rc, now.elected,
              now.term, now.value[0] ? now.value : "-");
    if (!rlock_client_alive(w->c))
        w_drop_client(w);
}

/* Read the election's leader once; before: the highest term this client had been shown. */
static void w_read_leader(struct worker *w)
{
    char name[64];
    chaos_res_name(w->m, w->m->elect_res, name, sizeof name);
    uint64_t before = atomic_load(&w->wc->shown);
    struct rlock_leader now;
    memset(&now, 0, sizeof now);
    enum rlock_err rc = rlock_leader(w->c, name, W_CALL_TIMEOUT_MS, &now);
    chaos_log(w->log, "%d LEADERREAD %d %d %d %" PRIu64 " %s %" PRIu64, w->pid, w->gen, (int)rc,
              now.elected, now.term, now.value[0] ? now.value : "-", before);
    if (!rlock_client_alive(w->c))
        w_drop_client(w);
}

static void w_hold_once(struct worker *w)
{
    struct chaos_shm *m = w->m;
    int res = (int)chaos_rng_range(&w->rng, 0, (uint32_t)m->nres_all - 1);
    char name[64];
    chaos_res_name(m, res, name, sizeof name);
    int is_sem = res == m->sem_res, is_elect = res == m->elect_res;
    int shared = 0;
    uint32_t permits = 0, lock_delay = 0, max_hold = 0;
    if (is_sem) {
        /* 1 permit, sometimes 2; a third of them with lock_delay (a place kept after an
         * unclean end), a third with max_hold (a place lost while held). */
        permits = m->sem_limit >= 2 && chaos_rng_range(&w->rng, 1, 100) <= CHAOS_SEM_TWO_PCT ? 2
                                                                                             : 1;
        uint32_t opt = chaos_rng_range(&w->rng, 0, 2);
        lock_delay = opt == 1 ? CHAOS_LOCK_DELAY_MS : 0;
        max_hold = opt == 2 ? CHAOS_MAX_HOLD_MS : 0;
    } else if (!is_elect) {
        /* No draw when the run asks for no shared holds: the other draws stay as they were. */
        int shared_pct = chaos_shared_pct(m->shared_pct, res);
        shared = shared_pct > 0 && (int)chaos_rng_range(&w->rng, 1, 100) <= shared_pct;
        lock_delay = (res & 1) ? CHAOS_LOCK_DELAY_MS : 0;
        max_hold = res == m->nres - 1 ? CHAOS_MAX_HOLD_MS : 0;
    }
    /* In the referee a semaphore's holders are a group, like shared holders. */
    int group = shared || is_sem;
    char mode = is_sem ? 'p' : is_elect ? 'l' : shared ? 's' : 'x';
    char permits_text[16] = "";
    if (is_sem)
        snprintf(permits_text, sizeof permits_text, " %u", permits);
    struct rlock_acquire_opts o = {
        .ttl_ms = chaos_rng_range(&w->rng, CHAOS_TTL_MIN_MS, CHAOS_TTL_MAX_MS),
        .wait_ms = W_ACQUIRE_WAIT_MS,
        .no_reentry = 1,
        .cancel = w->cancel,
        .lock_delay_ms = lock_delay,
        .max_hold_ms = max_hold,
        .shared = shared,
        .limit = is_sem ? (uint32_t)m->sem_limit : 0,
        .permits = permits,
        .campaign_value = is_elect ? w->value : NULL,
    };
    struct rlock_lock *l = NULL;
    chaos_log(w->log, "%d ACQ %d %u %c%s", w->pid, res, o.ttl_ms, mode, permits_text);
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
    if (is_sem)
        atomic_fetch_add(&m->sem_grants, 1);
    if (is_elect)
        atomic_fetch_add(&m->leader_grants, 1);
    chaos_log(w->log, "%d GRANT %d %" PRIu64 " %u %lld %s %c%s", w->pid, res, fence, o.ttl_ms,
              (long long)(rlock_lock_valid_until(l) - chaos_now_ms()), rlock_lock_token(l), mode,
              permits_text);
    w_drain_lost(w);

    enum rlock_lock_state st;
    if (!w_usable(w, l, res, &st)) {
        chaos_log(w->log, "%d SKIP %d %" PRIu64 " %d", w->pid, res, fence, (int)st);
        goto release;
    }
    uint64_t seq = atomic_fetch_add(&m->seq, 1) + 1;
    uint64_t others = w_enter(w, res, fence, seq, shared, permits);
    if (!w_usable(w, l, res, &st)) {
        /* Never acted on: an entry that does not count, overlapping or not. */
        w_leave(w, res, shared, permits);
        chaos_log(w->log, "%d VOID %d %" PRIu64 " %" PRIu64 " %d", w->pid, res, fence, seq,
                  (int)st);
        goto release;
    }
    if (is_sem) {
        struct w_sem_view v;
        w_judge_sem(w, res, fence, seq, permits, others, &v);
        chaos_log(w->log, "%d ENTER %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %c %u %d %u %d %u",
                  w->pid, res, fence, seq, atomic_load(&m->redis_epoch), mode, permits, v.holders,
                  v.permits, v.live_holders, v.live_permits);
    } else {
        chaos_log(w->log, "%d ENTER %d %" PRIu64 " %" PRIu64 " %" PRIu64 " %c", w->pid, res,
                  fence, seq, atomic_load(&m->redis_epoch), mode);
        if (others)
            w_judge_overlap(w, res, fence, seq, shared, others);
    }

    int long_hold = chaos_rng_range(&w->rng, 1, 100) <= W_LONG_HOLD_PCT;
    int writes = long_hold ? 1000 : (int)chaos_rng_range(&w->rng, 1, 3);
    int64_t hold_ms = max_hold ? W_LONG_HOLD_MAX_HOLD_MS
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
        int verdict = w_store_write(w, res, fence, seq, group, permits, st, &highest);
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
    w_leave(w, res, shared, permits);
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
    /* Each client reports its own stream of election changes, named by its generation. */
    w->wc = calloc(1, sizeof *w->wc);
    if (!w->wc) {
        fprintf(stderr, "chaos worker %d: out of memory\n", w->slot_idx);
        exit(3);
    }
    w->wc->w = w;
    w->wc->gen = ++w->gen;
    w->observing = 0;
    struct rlock_options o = {
        .client_name = "rlock-chaos-worker",
        .session_timeout_ms = CHAOS_SESSION_TIMEOUT_MS,
        .connect_timeout_ms = W_CONNECT_TIMEOUT_MS,
        .on_lost = w_on_lost,
        .on_lost_arg = w,
        .on_leader = w->m->elect_res >= 0 ? w_on_leader : NULL,
        .on_leader_arg = w->wc,
    };
    char err[256] = "";
    enum rlock_err rc = rlock_connect(w->addr, &o, &w->c, err, sizeof err);
    chaos_log(w->log, "%d CONNECT %d %d", w->pid, (int)rc, w->gen);
    if (rc == RLOCK_OK) {
        w->backoff_ms = 50;
        return;
    }
    w->c = NULL;
    free(w->wc);
    w->wc = NULL;
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
    snprintf(w.value, sizeof w.value, "worker-%d-%d", w.slot_idx, w.pid);
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
        if (!w.c) {
            w_connect(&w);
        } else {
            /* Observe on each new client (again after a failure, before each hold). */
            if (w.m->elect_res >= 0 && !w.observing)
                w_observe(&w);
            if (w.c)
                w_hold_once(&w);
            /* No draw without an election: the draws stay as they were. */
            if (w.c && w.m->elect_res >= 0 && !atomic_load(&w.m->stop) &&
                chaos_rng_range(&w.rng, 1, 100) <= W_LEADER_READ_PCT)
                w_read_leader(&w);
        }
    }
    /* A clean close: the daemon releases what is left at once, without lock_delay. */
    if (w.c)
        rlock_close(w.c);
    free(w.wc);
    pthread_join(watcher, NULL);
    rlock_cancel_free(w.cancel);
    chaos_log(w.log, "%d EXIT 0", w.pid);
    return 0;
}
