/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_semaphore.c — semaphores: rlock_acquire_opts.limit / permits, Acquire.limit /
 * permits, `rlockctl run --limit N [--permits K]` (docs/protocol.md §6.2 "Semaphores",
 * §6.8; docs/design-kinds.md). Real redis-server and rlockd processes.
 *
 *  - rlockctl_limit: twelve `rlockctl run --limit 3` jobs started at once; each makes a pid
 *    file in one directory while inside and fails itself on seeing more than 3 there, and
 *    logs its entry and exit with a CLOCK_MONOTONIC time: never more than 3 inside (the
 *    jobs' own counts, the log's order and its intervals), 3 inside together at some
 *    moment, all twelve run and exit 0, distinct fences; Redis's "used" never above 3;
 *  - kill9: `rlockctl run --limit 1 --ttl 60s` killed with SIGKILL, and a process with a
 *    librlock client of its own holding 2 of 3 permits killed so: a waiter gets in within
 *    10 s, far before the 60 s lease would have ended — freed by the session's end;
 *  - paused_holder: a process holding a permit with a 1.5 s session timeout is stopped
 *    (SIGSTOP): a waiter gets in long before the 60 s lease ends; once resumed (SIGCONT)
 *    the holder finds its lock LOST (reason session) and its lost callback called;
 *  - permits_fifo: limit 5, A takes 3; B asks 3 and waits; C asks 2 (which would fit)
 *    with a wait and is held back behind B; a try for 3 is refused; A's release lets B
 *    in, then C; fences A < B < C; the permits HASH's "used" is the sum of the holders'
 *    permits at every step; the keys go with the last release;
 *  - kinds: WRONG_KIND for another limit, an exclusive or shared request on the
 *    semaphore's name, a semaphore request on a name held exclusive or shared (another
 *    client, and the holding client itself); INVALID for permits > limit, permits without
 *    a limit, a shared semaphore, a limit above 1000000;
 *  - one_session: re-entry by the holding owner keeps the token, fence and permits (the
 *    HASH counts them once), asking more than it holds is WRONG_KIND, another owner of the
 *    client gets NOT_ACQUIRED or waits for the owner's last release (then a new grant,
 *    higher fence); the copied `SET key token NX PX ttl` fails while the semaphore is held
 *    and a compare-and-delete with a foreign token (or a holder's) deletes nothing;
 *  - listing: ListLocks shows each holder (two librlock clients and a raw session) with
 *    limit and permits, a lock with limit 0, a re-entered holder once with hold count 2;
 *    AcquireReply says limit, permits and mode EXCLUSIVE.
 *
 * No assertion depends on how fast anything happens: "not granted" is checked by watching
 * a while, "granted" with generous deadlines, and the kill -9 / pause bounds are a fraction
 * of the 60 s lease that would otherwise have kept the permit.
 *
 * This program is also its own helper: `itest_semaphore --mono` prints CLOCK_MONOTONIC in
 * microseconds (for the jobs' logs), and `itest_semaphore --sem-holder ...` holds permits
 * with a librlock client of its own (see holder_main).
 */
#include "harness.h"
#include "harness_peer.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CALL_MS 5000u
#define WAIT_MS 30000u   /* a waiter's wait: far longer than any step here takes */
#define GRANT_MS 20000   /* deadline for a grant that must come */
#define QUIET_MS 700     /* how long "still not granted" is watched */
#define LONG_TTL_MS 60000u /* the lease of holders that are killed or stopped */
#define FREED_WITHIN_MS 10000 /* a killed holder's permits are back well before its lease ends */

static char self_exe[512]; /* this program, for the helper modes */

/* --- keys ------------------------------------------------------------------ */

struct keys {
    char lock[256];    /* PREFIX{r}: "group:sem:N" */
    char holders[272]; /* PREFIX{r}:holders: ZSET token -> lease end */
    char permits[272]; /* PREFIX{r}:permits: HASH token -> k, "used" -> sum */
};

static void keys_of(const struct h_env *e, const char *resource, struct keys *k)
{
    h_lock_key(e, resource, k->lock, sizeof k->lock);
    snprintf(k->holders, sizeof k->holders, "%s:holders", k->lock);
    snprintf(k->permits, sizeof k->permits, "%s:permits", k->lock);
}

static void assert_marker(redisContext *r, const struct keys *k, unsigned limit, const char *what)
{
    char want[32], val[256] = "";
    snprintf(want, sizeof want, "group:sem:%u", limit);
    int got = h_get(r, k->lock, val, sizeof val);
    ck_assert_msg(got == 1 && strcmp(val, want) == 0,
                  "%s: key %s holds \"%s\" (GET returned %d), not \"%s\"", what, k->lock, val, got,
                  want);
}

/* The permits HASH: "used", the sum of the other fields and their number. */
struct hash_view {
    long long used;  /* -1: no "used" field */
    long long sum;
    int holders;
};

static struct hash_view read_hash(redisContext *r, const struct keys *k)
{
    struct hash_view v = {.used = -1};
    redisReply *rep = redisCommand(r, "HGETALL %s", k->permits);
    ck_assert_msg(rep != NULL, "HGETALL %s: %s", k->permits, r->errstr);
    ck_assert_msg(rep->type == REDIS_REPLY_ARRAY, "HGETALL %s: reply type %d", k->permits,
                  rep->type);
    for (size_t i = 0; i + 1 < rep->elements; i += 2) {
        long long n = strtoll(rep->element[i + 1]->str, NULL, 10);
        if (strcmp(rep->element[i]->str, "used") == 0) {
            v.used = n;
        } else {
            v.sum += n;
            v.holders++;
        }
    }
    freeReplyObject(rep);
    return v;
}

/* The HASH's "used" is want and the sum of its holders' permits; holders entries. */
static void assert_used(redisContext *r, const struct keys *k, long long want, int holders,
                        const char *what)
{
    struct hash_view v = read_hash(r, k);
    ck_assert_msg(v.used == want && v.sum == want && v.holders == holders,
                  "%s: %s has used=%lld, %d holders with %lld permits in all; want used=%lld, "
                  "%d holders", what, k->permits, v.used, v.holders, v.sum, want, holders);
    long long zc = h_redis_int(r, "ZCARD %s", k->holders);
    ck_assert_msg(zc == holders, "%s: %s has %lld members, want %d", what, k->holders, zc,
                  holders);
}

/* HGET permits token: the permits Redis counts for a holder (0: none). */
static long long hash_permits(redisContext *r, const struct keys *k, const char *token)
{
    redisReply *rep = redisCommand(r, "HGET %s %s", k->permits, token);
    ck_assert_msg(rep != NULL, "HGET: %s", r->errstr);
    long long n = rep->type == REDIS_REPLY_STRING ? strtoll(rep->str, NULL, 10) : 0;
    ck_assert_msg(rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_NIL,
                  "HGET %s %s: reply type %d", k->permits, token, rep->type);
    freeReplyObject(rep);
    return n;
}

static int in_zset(redisContext *r, const struct keys *k, const char *token)
{
    redisReply *rep = redisCommand(r, "ZSCORE %s %s", k->holders, token);
    ck_assert_msg(rep != NULL, "ZSCORE: %s", r->errstr);
    int found = rep->type == REDIS_REPLY_STRING;
    freeReplyObject(rep);
    return found;
}

static void assert_keys_gone(redisContext *r, const struct keys *k, const char *what)
{
    ck_assert_msg(h_key_exists(r, k->lock) == 0, "%s: %s still exists", what, k->lock);
    ck_assert_msg(h_key_exists(r, k->holders) == 0, "%s: %s still exists", what, k->holders);
    ck_assert_msg(h_key_exists(r, k->permits) == 0, "%s: %s still exists", what, k->permits);
}

/* --- acquiring ----------------------------------------------------------------- */

static enum rlock_err sem_acq(struct rlock_client *c, const char *resource, uint32_t limit,
                              uint32_t permits, uint32_t wait_ms, uint64_t owner,
                              struct rlock_lock **out)
{
    struct rlock_acquire_opts o = {.wait_ms = wait_ms, .owner = owner, .limit = limit,
                                   .permits = permits};
    *out = NULL;
    return rlock_acquire(c, resource, &o, CALL_MS, out);
}

static struct rlock_lock *sem_ok(struct rlock_client *c, const char *resource, uint32_t limit,
                                 uint32_t permits, uint64_t owner, const char *what)
{
    struct rlock_lock *l;
    enum rlock_err rc = sem_acq(c, resource, limit, permits, 0, owner, &l);
    char msg[320];
    ck_assert_msg(rc == RLOCK_OK, "%s: %u of %u permits of %s: %s", what, permits, limit,
                  resource, h_rlock_err(c, rc, msg, sizeof msg));
    ck_assert_ptr_nonnull(l);
    return l;
}

/* An acquire (a try, or with wait_ms) that must fail with want at once. */
static void opts_refused(struct rlock_client *c, const char *resource,
                         const struct rlock_acquire_opts *o, enum rlock_err want,
                         const char *what)
{
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(c, resource, o, CALL_MS, &l);
    char msg[320];
    h_rlock_err(c, rc, msg, sizeof msg);
    printf("  %s: %s\n", what, msg);
    fflush(stdout);
    ck_assert_msg(rc == want, "%s (%s): %s, want %s", what, resource, msg, rlock_strerror(want));
    ck_assert_ptr_null(l);
}

static void sem_refused(struct rlock_client *c, const char *resource, uint32_t limit,
                        uint32_t permits, uint32_t wait_ms, enum rlock_err want, const char *what)
{
    struct rlock_acquire_opts o = {.wait_ms = wait_ms, .limit = limit, .permits = permits};
    opts_refused(c, resource, &o, want, what);
}

static void release_ok(struct rlock_client *c, struct rlock_lock *l, const char *what)
{
    enum rlock_err rc = rlock_release(l, CALL_MS);
    char msg[320];
    ck_assert_msg(rc == RLOCK_OK, "%s: release of %s: %s", what, rlock_lock_resource(l),
                  h_rlock_err(c, rc, msg, sizeof msg));
}

/* Fences of one resource, in grant order: each must be above all before it. */
struct fences {
    uint64_t last;
    int n;
};

static void fence_next(struct fences *f, uint64_t fence, const char *what)
{
    ck_assert_msg(fence > f->last, "%s: fence %" PRIu64 " not above the previous grant's %" PRIu64,
                  what, fence, f->last);
    f->last = fence;
    f->n++;
}

/* --- a waiting acquire on a thread of its own ------------------------------------ */

struct sem_waiter {
    const char *name;
    struct rlock_client *c;
    int own_client;
    const char *resource;
    uint32_t limit, permits;
    uint64_t owner;
    enum rlock_err rc;
    struct rlock_lock *l;
    int64_t granted_ms; /* h_now_ms() when rlock_acquire returned */
    struct h_thread t;
};

static void *sem_waiter_main(void *arg)
{
    struct sem_waiter *w = arg;
    struct rlock_acquire_opts o = {.wait_ms = WAIT_MS, .limit = w->limit, .permits = w->permits,
                                   .owner = w->owner};
    w->rc = rlock_acquire(w->c, w->resource, &o, CALL_MS, &w->l);
    w->granted_ms = h_now_ms();
    return NULL;
}

/* Start waiting on client c (NULL: a new client of e, closed by sem_waiter_close). */
static void sem_waiter_start(struct sem_waiter *w, struct h_env *e, struct rlock_client *c,
                             const char *name, const char *resource, uint32_t limit,
                             uint32_t permits, uint64_t owner)
{
    memset(w, 0, sizeof *w);
    w->name = name;
    if (c == NULL) {
        struct rlock_options o = {.client_name = name};
        c = h_client_or_fail(e, &o);
        w->own_client = 1;
    }
    w->c = c;
    w->resource = resource;
    w->limit = limit;
    w->permits = permits;
    w->owner = owner;
    h_thread_start(&w->t, sem_waiter_main, w);
}

/* Wait (timeout_ms at most) for its acquire to return, and assert it got the permits. */
static void sem_waiter_granted(struct sem_waiter *w, int timeout_ms)
{
    char fail[160];
    snprintf(fail, sizeof fail, "%s: not granted within %d ms", w->name, timeout_ms);
    h_thread_join(&w->t, h_now_ms() + timeout_ms, fail);
    w->t.fn = NULL; /* joined */
    char msg[320];
    ck_assert_msg(w->rc == RLOCK_OK, "%s: acquire returned %s", w->name,
                  h_rlock_err(w->c, w->rc, msg, sizeof msg));
    ck_assert_ptr_nonnull(w->l);
}

/* Assert that its acquire has not returned, for QUIET_MS. */
static void sem_waiter_still_waits(struct sem_waiter *w, const char *why)
{
    int64_t end = h_now_ms() + QUIET_MS;
    do {
        ck_assert_msg(!h_thread_done(&w->t), "%s: acquire returned (%s) %s", w->name,
                      rlock_strerror(w->rc), why);
        h_sleep_ms(20);
    } while (h_now_ms() < end);
}

static void sem_waiter_close(struct sem_waiter *w)
{
    if (w->t.fn != NULL) { /* not joined yet: a shutdown ends its acquire */
        rlock_shutdown(w->c);
        h_thread_join(&w->t, h_now_ms() + 10000, "a waiter did not stop");
        w->t.fn = NULL;
    }
    if (w->l != NULL && rlock_lock_state(w->l) == RLOCK_HELD)
        rlock_release(w->l, CALL_MS);
    rlock_lock_free(w->l);
    w->l = NULL;
    if (w->own_client)
        rlock_close(w->c);
    w->c = NULL;
}

/* Poll the Stats of e until waiters == n (timeout_ms at most); fails the test otherwise. */
static void wait_waiters(struct h_env *e, uint64_t n, int timeout_ms, const char *what)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    struct rlock_stats st;
    for (;;) {
        memset(&st, 0, sizeof st);
        h_stats_or_fail(e, &st);
        if (st.waiters == n)
            return;
        ck_assert_msg(h_now_ms() < deadline, "%s: %" PRIu64 " waiters after %d ms, want %" PRIu64,
                      what, st.waiters, timeout_ms, n);
        h_sleep_ms(20);
    }
}

/* --- the helper modes -------------------------------------------------------------- */

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static atomic_int holder_lost_calls;
static atomic_int holder_lost_reason;

static void holder_lost_cb(struct rlock_client *c, const char *resource, const char *token,
                           uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c;
    (void)resource;
    (void)token;
    (void)fence;
    (void)arg;
    atomic_store(&holder_lost_reason, (int)reason);
    atomic_fetch_add(&holder_lost_calls, 1);
}

/*
 * itest_semaphore --sem-holder ADDR RESOURCE LIMIT PERMITS TTL_MS SESSION_TIMEOUT_MS
 * Connects (with that session timeout; 0 = the daemon's), takes PERMITS of the semaphore
 * (waiting 30 s at most), prints "HELD <fence> <token>", then watches the lock's state
 * every 20 ms. Once it is neither HELD nor UNCERTAIN it waits up to 2 s for the lost
 * callback and prints "LOST <reason> state=<state> callbacks=<n> cb_reason=<reason>
 * uncertain_seen=<0|1> alive=<rlock_client_alive>", then exits 3. Exit 2 ("FAIL ...") when
 * the connect or the acquire fails, 64 on bad arguments.
 */
static int holder_main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s --sem-holder ADDR RESOURCE LIMIT PERMITS TTL_MS SESSION_MS\n",
                argv[0]);
        return 64;
    }
    uint32_t limit = (uint32_t)strtoul(argv[4], NULL, 10);
    uint32_t permits = (uint32_t)strtoul(argv[5], NULL, 10);
    uint32_t ttl = (uint32_t)strtoul(argv[6], NULL, 10);
    uint32_t session = (uint32_t)strtoul(argv[7], NULL, 10);
    struct rlock_options o = {.client_name = "sem-holder", .session_timeout_ms = session,
                              .on_lost = holder_lost_cb};
    struct rlock_client *c;
    char err[256] = "";
    enum rlock_err rc = rlock_connect(argv[2], &o, &c, err, sizeof err);
    if (rc != RLOCK_OK) {
        printf("FAIL connect %s: %s\n", rlock_strerror(rc), err);
        fflush(stdout);
        return 2;
    }
    struct rlock_acquire_opts ao = {.ttl_ms = ttl, .wait_ms = WAIT_MS, .limit = limit,
                                    .permits = permits};
    struct rlock_lock *l = NULL;
    rc = rlock_acquire(c, argv[3], &ao, 0, &l);
    if (rc != RLOCK_OK) {
        rlock_errmsg(c, err, sizeof err);
        printf("FAIL acquire %s: %s\n", rlock_strerror(rc), err);
        fflush(stdout);
        rlock_close(c);
        return 2;
    }
    printf("HELD %" PRIu64 " %s\n", rlock_lock_fence(l), rlock_lock_token(l));
    fflush(stdout);
    int uncertain = 0;
    enum rlock_lock_state st;
    while ((st = rlock_lock_state(l)) == RLOCK_HELD || st == RLOCK_UNCERTAIN) {
        uncertain |= st == RLOCK_UNCERTAIN;
        h_sleep_ms(20);
    }
    for (int i = 0; i < 100 && atomic_load(&holder_lost_calls) == 0; i++)
        h_sleep_ms(20);
    printf("LOST %s state=%d callbacks=%d cb_reason=%s uncertain_seen=%d alive=%d\n",
           rlock_lost_reason_str(rlock_lock_lost_reason(l)), (int)st,
           atomic_load(&holder_lost_calls),
           rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&holder_lost_reason)),
           uncertain, rlock_client_alive(c));
    fflush(stdout);
    rlock_close(c);
    return 3;
}

/* A --sem-holder child, its stdout in DIR/<name>.out. */
struct sem_holder {
    pid_t pid;
    char out[320];
    char line[256];
    uint64_t fence;
    char token[128];
};

static void sem_holder_start(struct sem_holder *h, struct h_env *e, const char *name,
                             const char *resource, uint32_t limit, uint32_t permits,
                             uint32_t ttl_ms, uint32_t session_ms)
{
    memset(h, 0, sizeof *h);
    char file[64], lim[16], per[16], ttl[16], ses[16], res[256];
    snprintf(file, sizeof file, "%s.out", name);
    h_env_path(e, file, h->out, sizeof h->out);
    snprintf(lim, sizeof lim, "%u", limit);
    snprintf(per, sizeof per, "%u", permits);
    snprintf(ttl, sizeof ttl, "%u", ttl_ms);
    snprintf(ses, sizeof ses, "%u", session_ms);
    snprintf(res, sizeof res, "%s", resource);
    char *argv[] = {self_exe, "--sem-holder", e->rlockd_addr, res, lim, per, ttl, ses, NULL};
    h->pid = h_spawn(argv, h->out);
    ck_assert_int_gt(h->pid, 0);
    ck_assert_msg(h_wait_line(h->out, "HELD ", h->pid, GRANT_MS, h->line, sizeof h->line) == 0,
                  "%s did not report HELD within %d ms", name, GRANT_MS);
    ck_assert_msg(sscanf(h->line, "HELD %" SCNu64 " %127s", &h->fence, h->token) == 2,
                  "%s said \"%s\"", name, h->line);
}

/* --- (b1) twelve rlockctl run --limit 3 jobs ------------------------------------------ */

#define JOBS 12
#define JOB_LIMIT 3

/*
 * sh -c JOB_SCRIPT sh DIR NAME MONO. Inside the semaphore: make the pid file DIR/in/$$,
 * count DIR/in (more than 3: log "! NAME COUNT", exit 4), log "+ NAME T FENCE COUNT" (T:
 * CLOCK_MONOTONIC in us, by MONO --mono), mark DIR/ready/NAME; then stay until 3 jobs are
 * marked ready at once, or no job is left to come (the jobs done and inside make 12), or
 * about 5 s passed, counting DIR/in all along; then log "- NAME T MOST" (MOST: the most
 * ready ones seen), mark DIR/done/NAME and remove the marks and the pid file. The ready
 * mark goes after the "+" line and before the "-" line, so that jobs that see 3 ready at
 * once have log intervals that overlap.
 */
static const char job_script[] =
    "d=$1; n=$2; mono=$3; lim=3; all=12\n"
    "count() { set -- \"$d/$1\"/*; if [ -e \"$1\" ]; then c=$#; else c=0; fi; }\n"
    "check() { count in; if [ $c -gt $lim ]; then echo \"! $n $c\" >> \"$d/sem.log\"; "
    "rm -f \"$d/in/$$\"; exit 4; fi; }\n"
    ": > \"$d/in/$$\"\n"
    "check; first=$c\n"
    "t=$(\"$mono\" --mono)\n"
    "echo \"+ $n $t $RLOCK_FENCE $first\" >> \"$d/sem.log\"\n"
    ": > \"$d/ready/$n\"\n"
    "most=0; i=0\n"
    "while :; do\n"
    "  check; count ready; r=$c\n"
    "  [ $r -gt $most ] && most=$r\n"
    "  [ $most -ge $lim ] && break\n"
    "  count done; dn=$c; count in\n"
    "  [ $((dn + c)) -ge $all ] && break\n"
    "  i=$((i+1)); [ $i -ge 250 ] && break\n"
    "  sleep 0.02\n"
    "done\n"
    "sleep 0.05; check\n"
    "t=$(\"$mono\" --mono)\n"
    "echo \"- $n $t $most\" >> \"$d/sem.log\"\n"
    ": > \"$d/done/$n\"; rm -f \"$d/ready/$n\" \"$d/in/$$\"\n";

struct job_rec {
    int enter_line, exit_line; /* line numbers in the log (0: none) */
    long long t_in, t_out;
    unsigned long long fence;
    int first, most;
};

START_TEST(test_rlockctl_limit)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    const char *res = "sem/jobs";
    struct keys k;
    keys_of(&f.e, res, &k);
    static const char *const subdirs[] = {"in", "ready", "done"};
    for (size_t i = 0; i < H_LEN(subdirs); i++) {
        char p[400];
        snprintf(p, sizeof p, "%s/%s", f.e.dir, subdirs[i]);
        ck_assert_msg(mkdir(p, 0700) == 0, "mkdir %s: %s", p, strerror(errno));
    }
    char ctl[512];
    h_bin("rlockctl", ctl, sizeof ctl);
    pid_t pids[JOBS];
    char names[JOBS][8], errs[JOBS][400];
    int64_t t0 = h_now_ms();
    for (int j = 0; j < JOBS; j++) {
        snprintf(names[j], sizeof names[j], "j%02d", j);
        snprintf(errs[j], sizeof errs[j], "%s/%s.err", f.e.dir, names[j]);
        char *argv[] = {ctl, "--server", f.e.rlockd_addr, "run", "--limit", "3", "--wait", "60s",
                        (char *)res, "--", "/bin/sh", "-c", (char *)job_script, "sh", f.e.dir,
                        names[j], self_exe, NULL};
        pids[j] = h_spawn_io(argv, NULL, errs[j]);
        ck_assert_int_gt(pids[j], 0);
    }

    /* Meanwhile: Redis never counts more than 3 permits used, nor more than 3 holders. */
    long long most_used = 0, most_holders = 0;
    char redis_bad[200] = "";
    int looks = 0, left = JOBS;
    int statuses[JOBS];
    int done[JOBS] = {0};
    while (left > 0 && h_now_ms() - t0 < 60000) {
        struct hash_view v = read_hash(f.r, &k);
        long long zc = h_redis_int(f.r, "ZCARD %s", k.holders);
        /* Judged after the jobs' own counts and the log: the first bad look only. */
        if (redis_bad[0] == '\0' && (v.used > JOB_LIMIT || zc > JOB_LIMIT || v.sum > JOB_LIMIT))
            snprintf(redis_bad, sizeof redis_bad,
                     "Redis counted used=%lld, %lld holders (sum of permits %lld): limit 3",
                     v.used, zc, v.sum);
        if (redis_bad[0] == '\0' && v.used != -1 && v.used != v.sum)
            snprintf(redis_bad, sizeof redis_bad,
                     "the permits HASH had used=%lld, but its holders %lld", v.used, v.sum);
        if (v.used > most_used)
            most_used = v.used;
        if (zc > most_holders)
            most_holders = zc;
        looks++;
        for (int j = 0; j < JOBS; j++)
            if (!done[j] && h_wait_exit(pids[j], 0, &statuses[j]) == 0) {
                done[j] = 1;
                left--;
            }
        h_assert_env_alive(&f.e);
        h_sleep_ms(10);
    }
    if (left > 0) {
        for (int j = 0; j < JOBS; j++)
            if (!done[j])
                h_stop_pid(pids[j], SIGKILL, 1000, "an rlockctl run job", NULL);
        ck_abort_msg("%d of %d jobs still running after 60 s", left, JOBS);
    }
    int64_t took = h_now_ms() - t0;

    char path[400];
    snprintf(path, sizeof path, "%s/sem.log", f.e.dir);
    char *log = h_read_file(path);
    ck_assert_ptr_nonnull(log);
    printf("rlockctl --limit 3: 12 jobs in %lld ms; log:\n%s", (long long)took, log);
    fflush(stdout);
    for (int j = 0; j < JOBS; j++) {
        char st[64];
        if (!WIFEXITED(statuses[j]) || WEXITSTATUS(statuses[j]) != 0)
            h_print_tail(errs[j], 10);
        ck_assert_msg(WIFEXITED(statuses[j]) && WEXITSTATUS(statuses[j]) == 0,
                      "job %s: rlockctl run ended with %s (4: it saw more than 3 inside)",
                      names[j], h_status_str(statuses[j], st, sizeof st));
    }

    /* The log, in its order (appends: the order they happened in). */
    struct job_rec rec[JOBS];
    memset(rec, 0, sizeof rec);
    int inside = 0, most_inside = 0, lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(log, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        lines++;
        char sign = 0;
        int j = -1, a = 0;
        long long t = 0;
        unsigned long long fence = 0;
        int n = sscanf(line, "%c j%d %lld %llu %d", &sign, &j, &t, &fence, &a);
        ck_assert_msg(sign != '!', "a job saw more than 3 pid files: \"%s\"", line);
        ck_assert_msg(j >= 0 && j < JOBS && ((sign == '+' && n == 5) || (sign == '-' && n == 4)),
                      "log line \"%s\"", line);
        struct job_rec *r = &rec[j];
        if (sign == '+') {
            ck_assert_msg(r->enter_line == 0, "job %d entered twice", j);
            r->enter_line = lines;
            r->t_in = t;
            r->fence = fence;
            r->first = a;
            inside++;
            if (inside > most_inside)
                most_inside = inside;
            ck_assert_msg(inside <= JOB_LIMIT, "log line %d \"%s\": %d jobs inside", lines, line,
                          inside);
            ck_assert_msg(a >= 1 && a <= JOB_LIMIT, "log line \"%s\": %d pid files", line, a);
        } else {
            ck_assert_msg(r->enter_line != 0 && r->exit_line == 0,
                          "job %d left without entering, or twice", j);
            r->exit_line = lines;
            r->t_out = t;
            r->most = (int)fence;
            inside--;
        }
    }
    free(log);
    ck_assert_int_eq(lines, 2 * JOBS);
    int most_seen = 0;
    for (int j = 0; j < JOBS; j++) {
        ck_assert_msg(rec[j].enter_line && rec[j].exit_line, "job %d did not log both lines", j);
        ck_assert_msg(rec[j].fence > 0, "job %d: no RLOCK_FENCE", j);
        ck_assert_msg(rec[j].t_in <= rec[j].t_out, "job %d: left at %lld before entering at %lld",
                      j, rec[j].t_out, rec[j].t_in);
        if (rec[j].most > most_seen)
            most_seen = rec[j].most;
        for (int i = 0; i < j; i++)
            ck_assert_msg(rec[i].fence != rec[j].fence, "jobs %d and %d: both fence %llu", i, j,
                          rec[j].fence);
    }
    /* The intervals on the monotonic clock: at each entry, how many were inside. */
    int most_at_once = 0;
    for (int j = 0; j < JOBS; j++) {
        int at_once = 0;
        for (int i = 0; i < JOBS; i++)
            at_once += rec[i].t_in <= rec[j].t_in && rec[j].t_in <= rec[i].t_out;
        ck_assert_msg(at_once <= JOB_LIMIT,
                      "job %d entered at %lld us while %d jobs' intervals were open", j,
                      rec[j].t_in, at_once - 1);
        if (at_once > most_at_once)
            most_at_once = at_once;
    }
    printf("rlockctl --limit 3: most inside at once: %d by the log's order, %d by its times, %d "
           "seen by a job; Redis (%d looks): used at most %lld, holders at most %lld\n",
           most_inside, most_at_once, most_seen, looks, most_used, most_holders);
    fflush(stdout);
    ck_assert_msg(most_inside == JOB_LIMIT && most_at_once == JOB_LIMIT && most_seen == JOB_LIMIT,
                  "never 3 jobs inside together (by order %d, by times %d, seen %d): the limit "
                  "was not used", most_inside, most_at_once, most_seen);
    ck_assert_msg(redis_bad[0] == '\0', "while the jobs ran: %s", redis_bad);
    assert_keys_gone(f.r, &k, "after the last job");
    h_fixture_stop(&f);
}
END_TEST

/* --- (b2) kill -9 of a holder frees its permits at once ----------------------------- */

/* Read "PID TOKEN" from path once it is there (0 before). */
static pid_t read_pid_token(const char *path, char *token, size_t len)
{
    char *text = h_read_file(path);
    pid_t pid = 0;
    if (text != NULL && strchr(text, '\n') != NULL) {
        char tok[128] = "";
        int p = 0;
        if (sscanf(text, "%d %127s", &p, tok) == 2) {
            pid = (pid_t)p;
            snprintf(token, len, "%s", tok);
        }
    }
    free(text);
    return pid;
}

START_TEST(test_kill9)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);

    /* rlockctl run --limit 1 with a 60 s lease, killed with SIGKILL. */
    const char *res = "sem/kill-ctl";
    struct keys k;
    keys_of(&f.e, res, &k);
    char ctl[512], info[320], err[320];
    h_bin("rlockctl", ctl, sizeof ctl);
    h_env_path(&f.e, "job.info", info, sizeof info);
    h_env_path(&f.e, "job.err", err, sizeof err);
    char *argv[] = {ctl, "--server", f.e.rlockd_addr, "run", "--limit", "1", "--ttl", "60s",
                    (char *)res, "--", "/bin/sh", "-c",
                    "echo \"$$ $RLOCK_TOKEN\" > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; exec sleep 120",
                    info, NULL};
    pid_t ctl_pid = h_spawn_io(argv, NULL, err);
    ck_assert_int_gt(ctl_pid, 0);
    char token[128] = "";
    pid_t job = 0;
    int64_t deadline = h_now_ms() + GRANT_MS;
    while ((job = read_pid_token(info, token, sizeof token)) == 0) {
        if (!h_alive(ctl_pid) || h_now_ms() > deadline) {
            h_print_tail(err, 10);
            ck_abort_msg("rlockctl run --limit 1 did not start its command");
        }
        h_sleep_ms(10);
    }
    assert_marker(f.r, &k, 1, "rlockctl run --limit 1");
    ck_assert_msg(in_zset(f.r, &k, token), "the job's token %s is not in %s", token, k.holders);
    ck_assert_int_eq(hash_permits(f.r, &k, token), 1);
    assert_used(f.r, &k, 1, 1, "rlockctl run --limit 1");
    long long pttl = h_pttl(f.r, k.lock);
    ck_assert_msg(pttl > 40000, "the marker's PTTL is %lld ms: not the 60 s lease", pttl);

    struct sem_waiter w;
    sem_waiter_start(&w, &f.e, NULL, "waiter", res, 1, 1, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "the waiter queued");
    sem_waiter_still_waits(&w, "while rlockctl holds the only permit");
    ck_assert_msg(h_alive(ctl_pid), "rlockctl exited while holding");
    int64_t t_kill = h_now_ms();
    ck_assert_int_eq(kill(ctl_pid, SIGKILL), 0);
    int status;
    ck_assert_msg(h_wait_exit(ctl_pid, 5000, &status) == 0, "rlockctl not reaped after SIGKILL");
    sem_waiter_granted(&w, GRANT_MS);
    int64_t after = w.granted_ms - t_kill;
    /* The job's command is ours to stop: rlockctl's SIGKILL leaves it running. */
    kill(job, SIGKILL);
    printf("kill -9 rlockctl run --limit 1 (ttl 60 s): the waiter got in %lld ms after the kill\n",
           (long long)after);
    fflush(stdout);
    ck_assert_msg(after < FREED_WITHIN_MS,
                  "the waiter got in %lld ms after the kill: the permit was not freed by the "
                  "session's end (lease 60 s)", (long long)after);
    ck_assert_msg(!in_zset(f.r, &k, token), "the killed job's token is still in %s", k.holders);
    ck_assert_int_eq(hash_permits(f.r, &k, token), 0);
    ck_assert_msg(in_zset(f.r, &k, rlock_lock_token(w.l)), "the waiter's token is not in %s",
                  k.holders);
    assert_used(f.r, &k, 1, 1, "the waiter in");
    sem_waiter_close(&w);
    assert_keys_gone(f.r, &k, "after the waiter's release");
    deadline = h_now_ms() + 5000;
    while (!h_pid_gone(job) && h_now_ms() < deadline)
        h_sleep_ms(10);

    /* A process with a librlock client of its own holds 2 of 3 permits; a waiter asks 2. */
    res = "sem/kill-client";
    keys_of(&f.e, res, &k);
    struct sem_holder h;
    sem_holder_start(&h, &f.e, "holder", res, 3, 2, LONG_TTL_MS, 0);
    assert_marker(f.r, &k, 3, "the holder's 2 permits");
    ck_assert_int_eq(hash_permits(f.r, &k, h.token), 2);
    assert_used(f.r, &k, 2, 1, "the holder's 2 permits");
    struct rlock_client *c = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *one = sem_ok(c, res, 3, 1, 0, "1 permit beside the holder's 2");
    assert_used(f.r, &k, 3, 2, "all 3 permits");
    release_ok(c, one, "the 1 permit");
    rlock_lock_free(one);
    sem_waiter_start(&w, &f.e, NULL, "waiter for 2", res, 3, 2, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "the waiter for 2 queued");
    sem_waiter_still_waits(&w, "while the holder has 2 of 3 permits");
    assert_used(f.r, &k, 2, 1, "the holder alone, the waiter queued");
    t_kill = h_now_ms();
    ck_assert_int_eq(kill(h.pid, SIGKILL), 0);
    ck_assert_msg(h_wait_exit(h.pid, 5000, &status) == 0, "the holder not reaped after SIGKILL");
    sem_waiter_granted(&w, GRANT_MS);
    after = w.granted_ms - t_kill;
    printf("kill -9 of a client holding 2 of 3 permits (ttl 60 s): the waiter for 2 got in %lld "
           "ms after the kill\n", (long long)after);
    fflush(stdout);
    ck_assert_msg(after < FREED_WITHIN_MS,
                  "the waiter got in %lld ms after the kill: the permits were not freed by the "
                  "session's end (lease 60 s)", (long long)after);
    ck_assert_msg(!in_zset(f.r, &k, h.token), "the killed holder's token is still in %s",
                  k.holders);
    ck_assert_int_eq(hash_permits(f.r, &k, rlock_lock_token(w.l)), 2);
    assert_used(f.r, &k, 2, 1, "the waiter's 2 permits");
    sem_waiter_close(&w);
    assert_keys_gone(f.r, &k, "after the waiter's release");
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

/* --- (b3) a paused holder loses its permit at its session's end -------------------- */

#define PAUSE_SESSION_MS 1500u

START_TEST(test_paused_holder)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    const char *res = "sem/paused";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct sem_holder h;
    sem_holder_start(&h, &f.e, "paused", res, 1, 1, LONG_TTL_MS, PAUSE_SESSION_MS);
    assert_marker(f.r, &k, 1, "the paused holder's permit");
    assert_used(f.r, &k, 1, 1, "the paused holder's permit");
    ck_assert_int_eq(hash_permits(f.r, &k, h.token), 1);

    struct sem_waiter w;
    sem_waiter_start(&w, &f.e, NULL, "waiter", res, 1, 1, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "the waiter queued");
    /* More than a session timeout: the running holder keeps its session alive. */
    int64_t end = h_now_ms() + (int64_t)PAUSE_SESSION_MS + 500;
    while (h_now_ms() < end) {
        ck_assert_msg(!h_thread_done(&w.t), "the waiter got in (%s) while the holder runs",
                      rlock_strerror(w.rc));
        h_sleep_ms(20);
    }
    ck_assert_msg(h_alive(h.pid), "the holder exited while holding");

    int64_t t_stop = h_now_ms();
    h_sigstop(h.pid, "the holder");
    sem_waiter_granted(&w, GRANT_MS);
    int64_t after = w.granted_ms - t_stop;
    printf("paused: the waiter got in %lld ms after SIGSTOP (session timeout %u ms, lease %u ms)\n",
           (long long)after, PAUSE_SESSION_MS, LONG_TTL_MS);
    fflush(stdout);
    ck_assert_msg(after < GRANT_MS, "granted %lld ms after the stop", (long long)after);
    ck_assert_msg(!in_zset(f.r, &k, h.token), "the paused holder's token is still in %s",
                  k.holders);
    ck_assert_int_eq(hash_permits(f.r, &k, h.token), 0);
    assert_used(f.r, &k, 1, 1, "the waiter in");

    /* Resumed, the holder learns that its permit is gone. */
    int64_t t_cont = h_now_ms();
    h_sigcont(h.pid, "the holder");
    char line[256];
    ck_assert_msg(h_wait_line(h.out, "LOST ", h.pid, 10000, line, sizeof line) == 0,
                  "the resumed holder did not report its permit lost within 10 s");
    int status;
    ck_assert_msg(h_wait_exit(h.pid, 5000, &status) == 0, "the holder still runs after LOST");
    printf("paused: %lld ms after SIGCONT the holder said \"%s\"\n",
           (long long)(h_now_ms() - t_cont), line);
    fflush(stdout);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 3, "the holder ended with 0x%x",
                  status);
    char reason[32] = "", cb_reason[32] = "";
    int state = -1, calls = -1, uncertain = -1, alive = -1;
    ck_assert_msg(sscanf(line, "LOST %31s state=%d callbacks=%d cb_reason=%31s uncertain_seen=%d "
                               "alive=%d", reason, &state, &calls, cb_reason, &uncertain,
                         &alive) == 6, "the holder said \"%s\"", line);
    ck_assert_msg(state == RLOCK_LOST, "the resumed holder's lock is in state %d, not LOST", state);
    ck_assert_msg(strcmp(reason, "session") == 0, "lost for \"%s\", want session", reason);
    ck_assert_msg(calls == 1 && strcmp(cb_reason, "session") == 0,
                  "the lost callback: %d calls, reason %s; want one, session", calls, cb_reason);
    ck_assert_msg(alive == 0, "the holder's client still says its session is alive");
    sem_waiter_close(&w);
    assert_keys_gone(f.r, &k, "after the waiter's release");
    h_fixture_stop(&f);
}
END_TEST

/* --- (b4) permits and FIFO ---------------------------------------------------------- */

START_TEST(test_permits_fifo)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const char *res = "sem/fifo";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct fences fs = {0};
    struct rlock_client *d = h_client_or_fail(&f.e, NULL);

    struct rlock_lock *a = sem_ok(f.c, res, 5, 3, 0, "A");
    fence_next(&fs, rlock_lock_fence(a), "A");
    assert_marker(f.r, &k, 5, "A holds 3 of 5");
    ck_assert_int_eq(hash_permits(f.r, &k, rlock_lock_token(a)), 3);
    assert_used(f.r, &k, 3, 1, "A holds 3 of 5");

    struct sem_waiter b, c;
    sem_waiter_start(&b, &f.e, NULL, "B (3 permits)", res, 5, 3, 0);
    wait_waiters(&f.e, 1, GRANT_MS, "B queued");
    sem_waiter_still_waits(&b, "while A holds 3 of 5 permits");
    sem_waiter_start(&c, &f.e, NULL, "C (2 permits)", res, 5, 2, 0);
    wait_waiters(&f.e, 2, GRANT_MS, "C queued behind B");
    /* 2 permits are free, but B, before C in the queue, needs 3. */
    sem_waiter_still_waits(&c, "though 2 permits are free: B, before it, waits for 3");
    sem_waiter_still_waits(&b, "while A holds 3 of 5 permits");
    assert_used(f.r, &k, 3, 1, "A holds 3, B and C wait");
    /* A try for 3 does not fit. */
    sem_refused(d, res, 5, 3, 0, RLOCK_ERR_NOT_ACQUIRED, "a try for 3 while 2 are free");
    /* Nor does a try for 2 that would fit: B and C wait before it (first come, first
     * served; a stream of small tries would otherwise keep B out for ever). */
    sem_refused(d, res, 5, 2, 0, RLOCK_ERR_NOT_ACQUIRED, "a try for 2 while B waits for 3");
    assert_used(f.r, &k, 3, 1, "after the refused try");

    release_ok(f.c, a, "A");
    sem_waiter_granted(&b, GRANT_MS);
    fence_next(&fs, rlock_lock_fence(b.l), "B");
    sem_waiter_granted(&c, GRANT_MS);
    fence_next(&fs, rlock_lock_fence(c.l), "C, granted after B");
    printf("fifo: fences A %" PRIu64 ", B %" PRIu64 ", C %" PRIu64 "; C returned %lld ms after "
           "B\n", rlock_lock_fence(a), rlock_lock_fence(b.l), rlock_lock_fence(c.l),
           (long long)(c.granted_ms - b.granted_ms));
    fflush(stdout);
    ck_assert_int_eq(hash_permits(f.r, &k, rlock_lock_token(b.l)), 3);
    ck_assert_int_eq(hash_permits(f.r, &k, rlock_lock_token(c.l)), 2);
    ck_assert_int_eq(hash_permits(f.r, &k, rlock_lock_token(a)), 0);
    assert_used(f.r, &k, 5, 2, "B and C hold 3 + 2 of 5");
    ck_assert_msg(strcmp(rlock_lock_token(b.l), rlock_lock_token(c.l)) != 0,
                  "B and C have one token");
    /* Full: even one permit is refused. */
    sem_refused(d, res, 5, 1, 0, RLOCK_ERR_NOT_ACQUIRED, "a try for 1 with all 5 taken");

    /* B leaves: 3 free; D gets 3 at once, and the HASH follows. */
    release_ok(b.c, b.l, "B");
    assert_used(f.r, &k, 2, 1, "C alone");
    struct rlock_lock *dl = sem_ok(d, res, 5, 3, 0, "D takes the 3 B gave back");
    fence_next(&fs, rlock_lock_fence(dl), "D");
    assert_used(f.r, &k, 5, 2, "C and D");
    release_ok(c.c, c.l, "C");
    assert_used(f.r, &k, 3, 1, "D alone");
    assert_marker(f.r, &k, 5, "D alone");
    release_ok(d, dl, "D");
    assert_keys_gone(f.r, &k, "after the last release");
    /* And a fresh grant continues the fence sequence. */
    struct rlock_lock *e5 = sem_ok(d, res, 5, 5, 0, "all 5 at once");
    fence_next(&fs, rlock_lock_fence(e5), "all 5");
    assert_used(f.r, &k, 5, 1, "one holder of all 5");
    release_ok(d, e5, "all 5");
    assert_keys_gone(f.r, &k, "after all 5 went");

    rlock_lock_free(a);
    rlock_lock_free(dl);
    rlock_lock_free(e5);
    sem_waiter_close(&c);
    sem_waiter_close(&b);
    rlock_close(d);
    h_fixture_stop(&f);
}
END_TEST

/* --- (b4) kinds: WRONG_KIND and INVALID ------------------------------------------------ */

START_TEST(test_kinds)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *o = h_client_or_fail(&f.e, NULL);
    const char *res = "sem/kinds";
    struct keys k;
    keys_of(&f.e, res, &k);

    /* A semaphore of 5 held by f.c: every other kind, or another limit, is WRONG_KIND. */
    struct rlock_lock *s = sem_ok(f.c, res, 5, 1, 0, "the semaphore");
    sem_refused(o, res, 4, 1, 0, RLOCK_ERR_WRONG_KIND, "limit 4 on a semaphore of 5 (try)");
    sem_refused(o, res, 4, 1, 2000, RLOCK_ERR_WRONG_KIND, "limit 4 on a semaphore of 5 (wait)");
    sem_refused(o, res, 6, 6, 0, RLOCK_ERR_WRONG_KIND, "limit 6 on a semaphore of 5");
    struct rlock_acquire_opts excl = {0}, excl_wait = {.wait_ms = 2000}, shared = {.shared = 1},
                              shared_wait = {.shared = 1, .wait_ms = 2000};
    opts_refused(o, res, &excl, RLOCK_ERR_WRONG_KIND, "exclusive on a semaphore (try)");
    opts_refused(o, res, &excl_wait, RLOCK_ERR_WRONG_KIND, "exclusive on a semaphore (wait)");
    opts_refused(o, res, &shared, RLOCK_ERR_WRONG_KIND, "shared on a semaphore (try)");
    opts_refused(o, res, &shared_wait, RLOCK_ERR_WRONG_KIND, "shared on a semaphore (wait)");
    /* The holding client itself. */
    sem_refused(f.c, res, 4, 1, 0, RLOCK_ERR_WRONG_KIND, "limit 4 by the holding client");
    opts_refused(f.c, res, &excl, RLOCK_ERR_WRONG_KIND, "exclusive by the holding client");
    opts_refused(f.c, res, &shared, RLOCK_ERR_WRONG_KIND, "shared by the holding client");
    /* Nothing changed; the same limit still joins. */
    assert_marker(f.r, &k, 5, "after the refusals");
    assert_used(f.r, &k, 1, 1, "after the refusals");
    struct rlock_lock *s2 = sem_ok(o, res, 5, 4, 0, "4 more, limit 5");
    assert_used(f.r, &k, 5, 2, "1 + 4 of 5");
    release_ok(o, s2, "the 4");
    release_ok(f.c, s, "the semaphore");
    assert_keys_gone(f.r, &k, "the semaphore released");

    /* A name held exclusive: a semaphore request is WRONG_KIND (another client, itself). */
    res = "sem/kinds-lock";
    keys_of(&f.e, res, &k);
    struct rlock_lock *x = h_acquire_ok(f.c, res, NULL);
    sem_refused(o, res, 3, 1, 0, RLOCK_ERR_WRONG_KIND, "a semaphore on an exclusive lock (try)");
    sem_refused(o, res, 3, 1, 2000, RLOCK_ERR_WRONG_KIND,
                "a semaphore on an exclusive lock (wait)");
    sem_refused(f.c, res, 3, 1, 0, RLOCK_ERR_WRONG_KIND, "a semaphore by the lock's holder");
    h_assert_key_token(f.r, k.lock, rlock_lock_token(x));
    ck_assert_int_eq(h_key_exists(f.r, k.permits), 0);
    h_release_gone(&f, f.c, x);

    /* A name held shared: likewise. */
    res = "sem/kinds-shared";
    keys_of(&f.e, res, &k);
    struct rlock_lock *r = h_acquire_ok(f.c, res, &shared);
    sem_refused(o, res, 3, 1, 0, RLOCK_ERR_WRONG_KIND, "a semaphore on a shared lock (try)");
    sem_refused(o, res, 3, 1, 2000, RLOCK_ERR_WRONG_KIND, "a semaphore on a shared lock (wait)");
    sem_refused(f.c, res, 3, 1, 0, RLOCK_ERR_WRONG_KIND, "a semaphore by the shared holder");
    char val[64] = "";
    ck_assert_int_eq(h_get(f.r, k.lock, val, sizeof val), 1);
    ck_assert_str_eq(val, "group:rw");
    ck_assert_int_eq(h_key_exists(f.r, k.permits), 0);
    release_ok(f.c, r, "the shared hold");
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);

    /* Bad combinations: INVALID from the daemon, nothing taken. */
    res = "sem/kinds-invalid";
    keys_of(&f.e, res, &k);
    sem_refused(o, res, 2, 3, 0, RLOCK_ERR_INVALID, "permits 3 > limit 2");
    sem_refused(o, res, 2, 3, 2000, RLOCK_ERR_INVALID, "permits 3 > limit 2 (wait)");
    sem_refused(o, res, 0, 2, 0, RLOCK_ERR_INVALID, "permits without a limit");
    sem_refused(o, res, RLOCK_LIMIT_MAX + 1, 1, 0, RLOCK_ERR_INVALID, "limit 1000001");
    struct rlock_acquire_opts shared_sem = {.shared = 1, .limit = 3};
    opts_refused(o, res, &shared_sem, RLOCK_ERR_INVALID, "a shared semaphore");
    ck_assert_int_eq(h_key_exists(f.r, k.lock), 0);
    ck_assert_int_eq(h_key_exists(f.r, k.permits), 0);
    /* The largest limit is fine. */
    struct rlock_lock *big = sem_ok(o, res, RLOCK_LIMIT_MAX, RLOCK_LIMIT_MAX, 0, "limit 1000000");
    assert_used(f.r, &k, RLOCK_LIMIT_MAX, 1, "all 1000000 permits");
    release_ok(o, big, "limit 1000000");
    assert_keys_gone(f.r, &k, "limit 1000000 released");

    rlock_lock_free(s);
    rlock_lock_free(s2);
    rlock_lock_free(x);
    rlock_lock_free(r);
    rlock_lock_free(big);
    rlock_close(o);
    h_fixture_stop(&f);
}
END_TEST

/* --- (b4) one client, one semaphore hold; the copied scripts ------------------------------ */

START_TEST(test_one_session)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const char *res = "sem/session";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct fences fs = {0};
    struct rlock_client *o = h_client_or_fail(&f.e, NULL);

    struct rlock_lock *a1 = sem_ok(f.c, res, 5, 2, 0, "owner 0, 2 permits");
    fence_next(&fs, rlock_lock_fence(a1), "owner 0");
    /* Re-entry by the owner: the same lock, counted once in Redis. */
    struct rlock_lock *a2 = sem_ok(f.c, res, 5, 2, 0, "owner 0 again, 2 permits");
    struct rlock_lock *a3 = sem_ok(f.c, res, 5, 1, 0, "owner 0 again, 1 permit");
    ck_assert_str_eq(rlock_lock_token(a2), rlock_lock_token(a1));
    ck_assert_str_eq(rlock_lock_token(a3), rlock_lock_token(a1));
    ck_assert_uint_eq(rlock_lock_fence(a2), rlock_lock_fence(a1));
    ck_assert_uint_eq(rlock_lock_fence(a3), rlock_lock_fence(a1));
    ck_assert_uint_eq(rlock_lock_hold_count(a1), 3);
    assert_used(f.r, &k, 2, 1, "one owner, three holds of 2 permits");
    ck_assert_int_eq(hash_permits(f.r, &k, rlock_lock_token(a1)), 2);
    /* More than it holds: WRONG_KIND, holds unchanged. */
    sem_refused(f.c, res, 5, 3, 0, RLOCK_ERR_WRONG_KIND, "owner 0 asks 3, holding 2");
    ck_assert_uint_eq(rlock_lock_hold_count(a1), 3);
    /* Another owner of the client: NOT_ACQUIRED as a try, though 3 permits are free. */
    struct rlock_lock *l = NULL;
    enum rlock_err rc = sem_acq(f.c, res, 5, 1, 0, 77, &l);
    ck_assert_msg(rc == RLOCK_ERR_NOT_ACQUIRED, "owner 77's try: %s, want not acquired",
                  rlock_strerror(rc));
    /* Another client gets the 3 free ones. */
    struct rlock_lock *ol = sem_ok(o, res, 5, 3, 0, "another client, 3 permits");
    fence_next(&fs, rlock_lock_fence(ol), "another client");
    assert_used(f.r, &k, 5, 2, "2 + 3 of 5");
    release_ok(o, ol, "another client's 3");
    assert_used(f.r, &k, 2, 1, "owner 0's 2 left");

    /* The copied scripts meet the semaphore's marker. */
    redisReply *rep = redisCommand(f.r, "SET %s app-token NX PX 10000", k.lock);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->type == REDIS_REPLY_NIL, "SET NX on a semaphore's key: reply type %d (%s)",
                  rep->type, rep->type == REDIS_REPLY_STATUS ? rep->str : "");
    freeReplyObject(rep);
    static const char cad[] =
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) "
        "else return 0 end";
    const char *keys1[] = {k.lock};
    const char *args1[] = {"app-token"};
    rep = h_eval(f.r, cad, keys1, 1, args1, 1);
    ck_assert_msg(rep->type == REDIS_REPLY_INTEGER && rep->integer == 0,
                  "compare-and-delete with a foreign token: type %d integer %lld", rep->type,
                  rep->integer);
    freeReplyObject(rep);
    args1[0] = rlock_lock_token(a1);
    rep = h_eval(f.r, cad, keys1, 1, args1, 1);
    ck_assert_msg(rep->type == REDIS_REPLY_INTEGER && rep->integer == 0,
                  "compare-and-delete with a holder's token: type %d integer %lld", rep->type,
                  rep->integer);
    freeReplyObject(rep);
    assert_marker(f.r, &k, 5, "after the copied scripts");
    assert_used(f.r, &k, 2, 1, "after the copied scripts");

    /* Owner 77 with a wait: waits for owner 0's last release, then a new grant. */
    struct sem_waiter w;
    sem_waiter_start(&w, &f.e, f.c, "owner 77", res, 5, 1, 77);
    wait_waiters(&f.e, 1, GRANT_MS, "owner 77 queued");
    sem_waiter_still_waits(&w, "while owner 0 of its client holds the semaphore");
    release_ok(f.c, a3, "hold 3");
    release_ok(f.c, a2, "hold 2");
    sem_waiter_still_waits(&w, "while owner 0 still has a hold");
    assert_used(f.r, &k, 2, 1, "owner 0's last hold");
    release_ok(f.c, a1, "hold 1");
    sem_waiter_granted(&w, GRANT_MS);
    fence_next(&fs, rlock_lock_fence(w.l), "owner 77");
    ck_assert_msg(strcmp(rlock_lock_token(w.l), rlock_lock_token(a1)) != 0,
                  "owner 77 got owner 0's token");
    ck_assert_uint_eq(rlock_lock_hold_count(w.l), 1);
    assert_used(f.r, &k, 1, 1, "owner 77's permit");
    ck_assert_int_eq(hash_permits(f.r, &k, rlock_lock_token(w.l)), 1);
    printf("one session: %d grants, fences increasing up to %" PRIu64 "\n", fs.n, fs.last);
    fflush(stdout);
    sem_waiter_close(&w);
    assert_keys_gone(f.r, &k, "after owner 77's release");

    rlock_lock_free(a1);
    rlock_lock_free(a2);
    rlock_lock_free(a3);
    rlock_lock_free(ol);
    rlock_close(o);
    h_fixture_stop(&f);
}
END_TEST

/* --- (b5) the listing ------------------------------------------------------------------- */

/* A raw Acquire of permits of a semaphore of limit; the OK reply copied into g. */
static void raw_sem_acquire(struct h_peer *p, const char *resource, uint32_t limit,
                            uint32_t permits, struct h_grant *g, uint32_t *got_limit,
                            uint32_t *got_permits, Rlock__V1__LockMode *mode, const char *what)
{
    struct h_acq a = {.resource = resource};
    Rlock__V1__Acquire m = h_acquire_msg(&a);
    m.limit = limit;
    m.permits = permits;
    uint64_t id = h_peer_send(p, RLOCK__V1__REQUEST__BODY_ACQUIRE, &m);
    Rlock__V1__ServerMessage *msg = h_peer_response(p, id, what);
    const Rlock__V1__Response *r = msg->response;
    ck_assert_msg(r->status == H_ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_ACQUIRE,
                  "%s: %s, want an OK AcquireReply", what, h_msg_describe(msg));
    h_grant_copy(r->acquire, g);
    *got_limit = r->acquire->limit;
    *got_permits = r->acquire->permits;
    *mode = r->acquire->mode;
    h_raw_free(msg);
}

struct listed {
    char resource[64];
    char session[64];
    char token[64];
    uint32_t limit, permits, hold_count;
    Rlock__V1__LockMode mode;
};

/* ListLocks with prefix on p, every page: the entries into out (at most max); their count. */
static int raw_list(struct h_peer *p, const char *prefix, struct listed *out, int max)
{
    int n = 0;
    char cursor[RLOCK_CURSOR_BYTES] = "";
    do {
        Rlock__V1__ListLocks ll = RLOCK__V1__LIST_LOCKS__INIT;
        ll.prefix = (char *)prefix;
        ll.cursor = cursor;
        uint64_t id = h_peer_send(p, RLOCK__V1__REQUEST__BODY_LIST_LOCKS, &ll);
        Rlock__V1__ServerMessage *msg = h_peer_response(p, id, "ListLocks");
        const Rlock__V1__Response *r = msg->response;
        ck_assert_msg(r->status == H_ST(OK) && r->body_case == RLOCK__V1__RESPONSE__BODY_LIST_LOCKS,
                      "ListLocks: %s", h_msg_describe(msg));
        for (size_t i = 0; i < r->list_locks->n_locks; i++) {
            const Rlock__V1__LockInfo *li = r->list_locks->locks[i];
            ck_assert_msg(n < max, "more than %d locks listed", max);
            struct listed *e = &out[n++];
            snprintf(e->resource, sizeof e->resource, "%s", li->resource);
            snprintf(e->session, sizeof e->session, "%s", li->session_id);
            snprintf(e->token, sizeof e->token, "%s", li->token);
            e->limit = li->limit;
            e->permits = li->permits;
            e->hold_count = li->hold_count;
            e->mode = li->mode;
        }
        snprintf(cursor, sizeof cursor, "%s", r->list_locks->next_cursor);
        h_raw_free(msg);
    } while (cursor[0] != '\0');
    return n;
}

static const struct listed *find_token(const struct listed *l, int n, const char *token)
{
    for (int i = 0; i < n; i++)
        if (strcmp(l[i].token, token) == 0)
            return &l[i];
    return NULL;
}

struct api_seen {
    int n;
    char sessions[8][64];
    char tokens[8][64];
};

static int api_visit(const struct rlock_lock_entry *e, void *arg)
{
    struct api_seen *s = arg;
    if (s->n < 8) {
        snprintf(s->sessions[s->n], sizeof s->sessions[0], "%s", e->session_id);
        snprintf(s->tokens[s->n], sizeof s->tokens[0], "%s", e->token);
    }
    s->n++;
    return 0;
}

START_TEST(test_listing)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    const char *res = "sem/list";
    struct keys k;
    keys_of(&f.e, res, &k);
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *la = sem_ok(f.c, res, 6, 1, 0, "A, 1 of 6");
    struct rlock_lock *lb = sem_ok(b, res, 6, 2, 0, "B, 2 of 6");
    struct rlock_lock *lx = h_acquire_ok(f.c, "sem/list-lock", NULL);

    struct h_peer p;
    h_peer_open(&p, &f.e, "sem-raw");
    struct h_grant g, g2;
    uint32_t lim = 0, per = 0;
    Rlock__V1__LockMode mode;
    raw_sem_acquire(&p, res, 6, 3, &g, &lim, &per, &mode, "raw: 3 of 6");
    ck_assert_msg(lim == 6 && per == 3 && mode == RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE,
                  "AcquireReply of 3 of 6: limit %u, permits %u, mode %d", lim, per, (int)mode);
    raw_sem_acquire(&p, res, 6, 1, &g2, &lim, &per, &mode, "raw re-entry asking 1");
    ck_assert_msg(lim == 6 && per == 3, "the re-entry's AcquireReply: limit %u, permits %u "
                  "(the lock holds 3)", lim, per);
    ck_assert_str_eq(g2.token, g.token);
    ck_assert_uint_eq(g2.fence, g.fence);
    ck_assert_uint_eq(g2.hold_count, 2);
    assert_used(f.r, &k, 6, 3, "1 + 2 + 3 of 6");

    struct listed l[16];
    int n = raw_list(&p, "sem/list", l, (int)H_LEN(l));
    for (int i = 0; i < n; i++)
        printf("listing: %s session %s token %s limit %u permits %u holds %u mode %d\n",
               l[i].resource, l[i].session, l[i].token, l[i].limit, l[i].permits,
               l[i].hold_count, (int)l[i].mode);
    fflush(stdout);
    ck_assert_msg(n == 4, "%d locks listed under sem/list, want 4 (three holders and a lock)", n);
    const struct listed *ea = find_token(l, n, rlock_lock_token(la));
    const struct listed *eb = find_token(l, n, rlock_lock_token(lb));
    const struct listed *ep = find_token(l, n, g.token);
    const struct listed *ex = find_token(l, n, rlock_lock_token(lx));
    ck_assert_msg(ea && eb && ep && ex, "a holder is missing from the listing (A %d, B %d, raw "
                  "%d, the lock %d)", ea != NULL, eb != NULL, ep != NULL, ex != NULL);
    ck_assert_msg(strcmp(ea->resource, res) == 0 && ea->limit == 6 && ea->permits == 1 &&
                      ea->hold_count == 1 && strcmp(ea->session, rlock_session_id(f.c)) == 0,
                  "A listed as %s limit %u permits %u holds %u", ea->resource, ea->limit,
                  ea->permits, ea->hold_count);
    ck_assert_msg(strcmp(eb->resource, res) == 0 && eb->limit == 6 && eb->permits == 2 &&
                      eb->hold_count == 1 && strcmp(eb->session, rlock_session_id(b)) == 0,
                  "B listed as %s limit %u permits %u holds %u", eb->resource, eb->limit,
                  eb->permits, eb->hold_count);
    ck_assert_msg(strcmp(ep->resource, res) == 0 && ep->limit == 6 && ep->permits == 3 &&
                      ep->hold_count == 2,
                  "the raw session listed as %s limit %u permits %u holds %u", ep->resource,
                  ep->limit, ep->permits, ep->hold_count);
    ck_assert_msg(ea->mode == RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE &&
                      ep->mode == RLOCK__V1__LOCK_MODE__MODE_EXCLUSIVE,
                  "a semaphore's holders listed with mode %d, %d", (int)ea->mode, (int)ep->mode);
    ck_assert_msg(strcmp(ex->resource, "sem/list-lock") == 0 && ex->limit == 0 &&
                      ex->permits == 0,
                  "the lock listed as %s limit %u permits %u", ex->resource, ex->limit,
                  ex->permits);
    ck_assert_msg(strcmp(ea->session, eb->session) != 0 && strcmp(ea->session, ep->session) != 0 &&
                      strcmp(eb->session, ep->session) != 0,
                  "two holders listed with one session");

    /* The library's listing: each holder once, by its session and token. */
    struct api_seen seen = {0};
    struct rlock_lock_filter filt = {.prefix = res};
    char next[RLOCK_CURSOR_BYTES] = "";
    h_assert_ok(f.c, rlock_list_locks(f.c, &filt, NULL, 0, api_visit, &seen, next, sizeof next,
                                      CALL_MS));
    ck_assert_msg(seen.n == 4 && next[0] == '\0', "rlock_list_locks: %d locks (next \"%s\")",
                  seen.n, next);

    /* B leaves: the listing follows. */
    release_ok(b, lb, "B");
    n = raw_list(&p, res, l, (int)H_LEN(l));
    ck_assert_msg(n == 3 && find_token(l, n, rlock_lock_token(lb)) == NULL,
                  "after B's release: %d listed (B %s)", n,
                  find_token(l, n, rlock_lock_token(lb)) ? "still there" : "gone");
    assert_used(f.r, &k, 4, 2, "1 + 3 of 6");

    h_peer_release_ok(&p, res, g.token, 1, "raw release 1");
    h_peer_release_ok(&p, res, g.token, 0, "raw release 2");
    h_raw_close(&p.raw);
    release_ok(f.c, la, "A");
    release_ok(f.c, lx, "the lock");
    assert_keys_gone(f.r, &k, "everything released");
    rlock_lock_free(la);
    rlock_lock_free(lb);
    rlock_lock_free(lx);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/* --- faults: Redis loses the places; two tries of one session; max_hold ------------------ */

/*
 * Redis loses a semaphore's keys (FLUSHALL) while a client of this daemon
 * holds its only permit; another client's try then finds the semaphore free:
 * this daemon never has more holders than the limit — the holder is told its
 * permit is gone (MISSING), and the try is refused while the holder's promise
 * runs (its place kept as the tombstone).
 */
START_TEST(test_flushed_places)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = 60000, .limit = 1};
    struct rlock_lock *a = NULL;
    ck_assert_int_eq(rlock_acquire(f.c, "sem/flushed", &o, CALL_MS, &a), RLOCK_OK);
    redisReply *rep = redisCommand(f.r, "FLUSHALL");
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    sem_refused(b, "sem/flushed", 1, 1, 0, RLOCK_ERR_NOT_ACQUIRED,
                "a try of a 1-permit semaphore whose holder's place Redis lost");
    for (int64_t t0 = h_now_ms(); atomic_load(&f.lost.count) == 0; h_sleep_ms(20))
        ck_assert_msg(h_now_ms() - t0 < 5000, "the holder was not told its place was gone");
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_MISSING);
    ck_assert_int_eq(rlock_lock_state(a), RLOCK_LOST);
    /* Still held back: the holder was promised the permit for its lease. */
    h_sleep_ms(300);
    sem_refused(b, "sem/flushed", 1, 1, 0, RLOCK_ERR_NOT_ACQUIRED, "again, later");
    rlock_lock_free(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/*
 * Two tries of one session, by two owners, in flight at once (pipelined), on a
 * semaphore of 3: Redis has room for both, but a session holds a semaphore
 * once — the second is not a second lease: it waits for the first owner (a try:
 * NOT_ACQUIRED), and its place is given back.
 */
START_TEST(test_two_tries_one_session)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct h_peer p;
    h_peer_open(&p, &f.e, "two-tries");
    struct h_acq a1 = {.resource = "sem/two", .owner = 1, .limit = 3};
    struct h_acq a2 = {.resource = "sem/two", .owner = 2, .limit = 3};
    uint64_t id1 = h_peer_acquire(&p, &a1), id2 = h_peer_acquire(&p, &a2);
    Rlock__V1__ServerMessage *m1 = h_peer_response(&p, id1, "owner 1's try");
    ck_assert_msg(m1->response->status == H_ST(OK), "owner 1: %s", h_msg_describe(m1));
    h_raw_free(m1);
    h_peer_expect_status(&p, id2, H_ST(NOT_ACQUIRED), "owner 2's try, in flight with owner 1's");
    struct listed l[4];
    int n = raw_list(&p, "sem/two", l, 4);
    ck_assert_int_eq(n, 1);
    struct keys k;
    keys_of(&f.e, "sem/two", &k);
    for (int64_t t0 = h_now_ms(); read_hash(f.r, &k).used != 1; h_sleep_ms(20))
        ck_assert_msg(h_now_ms() - t0 < 5000, "the second place was not given back (used %lld)",
                      read_hash(f.r, &k).used);
    h_raw_close(&p.raw);
    h_fixture_stop(&f);
}
END_TEST

/*
 * A holder's max_hold passes (it is lost, MAX_HOLD, and its place kept till its
 * promise ends): the other permits of the semaphore stay free for others —
 * the tombstone against the semaphore's key is answered, not retried for a
 * whole ttl with every local acquire held back behind it.
 */
START_TEST(test_max_hold_others_free)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = 20000, .limit = 2, .max_hold_ms = 1000};
    struct rlock_lock *a = NULL;
    ck_assert_int_eq(rlock_acquire(f.c, "sem/maxhold", &o, CALL_MS, &a), RLOCK_OK);
    for (int64_t t0 = h_now_ms(); atomic_load(&f.lost.count) == 0; h_sleep_ms(20))
        ck_assert_msg(h_now_ms() - t0 < 10000, "max_hold never ended the hold");
    ck_assert_int_eq(atomic_load(&f.lost.reason), RLOCK_LOST_MAX_HOLD);
    h_sleep_ms(500); /* the tombstone's answer */
    struct rlock_client *b = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *l = sem_ok(b, "sem/maxhold", 2, 1, 0,
                                  "the other permit, while the lost holder's promise runs");
    release_ok(b, l, "the other permit");
    rlock_lock_free(l);
    rlock_lock_free(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--mono") == 0) {
        printf("%lld\n", (long long)mono_us());
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--sem-holder") == 0)
        return holder_main(argc, argv);
    ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (len <= 0) {
        fprintf(stderr, "readlink /proc/self/exe: %s\n", strerror(errno));
        return 1;
    }
    self_exe[len] = '\0';
    const TTest *tests[] = {test_rlockctl_limit, test_kill9,   test_paused_holder,
                            test_permits_fifo,   test_kinds,   test_one_session,
                            test_listing,        test_flushed_places, test_two_tries_one_session,
                            test_max_hold_others_free};
    return h_run_tests("semaphore", 120, tests, H_LEN(tests));
}
