/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_restart.c — Redis killed with SIGKILL and started again under load.
 *
 * A holder session keeps three watchdog-renewed locks with a short lease while
 * two load threads take and give back locks. Redis is then killed (-9) and,
 * after an outage, started again empty on the same socket (no persistence).
 *
 * The scenario runs twice: with an outage longer than the lease (the locks'
 * validity runs out while Redis is down) and with a short one (the locks are
 * still valid when Redis comes back, and only their missing keys tell).
 *
 * Expected: while Redis is down every call answers quickly (UNAVAILABLE, never
 * a grant and never a hang); once Redis is back the daemon reconnects by
 * itself and grants again; the holder's locks, whose keys vanished with the
 * restart, are reported lost; the sessions themselves survive the outage.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define LOADERS 2
#define HELD 3
#define HELD_TTL_MS 2000u
#define RESUME_LIMIT_MS 5000
#define CALL_LIMIT_MS 1000
#define CALL_TIMEOUT_MS 3000u

/* Moments of the scenario, ms on CLOCK_MONOTONIC; 0 until reached. */
struct marks {
    _Atomic int64_t kill_at;    /* just before SIGKILL */
    _Atomic int64_t down;       /* Redis reaped */
    _Atomic int64_t restart_at; /* just before starting Redis again */
    _Atomic int64_t up;         /* Redis accepts connections again */
    _Atomic int64_t resumed;    /* the first grant after the restart */
    atomic_int stop;
};

/* Results of one thread's calls, judged against the marks. */
struct tally {
    int64_t max_ms;
    long calls;
    long pre_pairs;       /* pairs that completed before the kill */
    long outage_calls;    /* calls that ran entirely while Redis was down */
    long outage_unavailable;
    long outage_not_acquired;
    long grants_after_resume;
    long bad;             /* calls breaking the rules; the first is described */
    char first_bad[300];
};

struct loader {
    struct rlock_client *c;
    int id;
    struct marks *m;
    struct tally t;
    struct h_thread thread;
    atomic_int granted_again; /* set once a grant followed the restart */
};

static void note_bad(struct tally *t, const char *fmt, const char *what, enum rlock_err rc,
                     int64_t dt)
{
    if (t->bad++ == 0)
        snprintf(t->first_bad, sizeof t->first_bad, fmt, what, rlock_strerror(rc), (long long)dt);
}

/*
 * Judge one call that ran from t0 to t1. Any time: it must answer within
 * CALL_LIMIT_MS with OK, NOT_ACQUIRED, UNAVAILABLE or (release) NOT_HELD, and
 * a failed acquire must not hand out a lock. Before the kill: OK only. While
 * Redis is down: never a grant.
 */
static void judge(struct tally *t, const struct marks *m, int is_acquire, enum rlock_err rc,
                  const struct rlock_lock *l, int64_t t0)
{
    const char *what = is_acquire ? "acquire" : "release";
    int64_t t1 = h_now_ms(), dt = t1 - t0;
    int64_t down = atomic_load(&m->down), resumed = atomic_load(&m->resumed);
    t->calls++;
    if (dt > t->max_ms)
        t->max_ms = dt;
    if (dt >= CALL_LIMIT_MS)
        note_bad(t, "%s took too long: %s after %lld ms", what, rc, dt);
    if (rc != RLOCK_OK && rc != RLOCK_ERR_NOT_ACQUIRED && rc != RLOCK_ERR_UNAVAILABLE &&
        !(rc == RLOCK_ERR_NOT_HELD && !is_acquire))
        note_bad(t, "%s: unexpected %s after %lld ms", what, rc, dt);
    if (is_acquire && rc != RLOCK_OK && l != NULL)
        note_bad(t, "%s: %s but a lock handle was returned (%lld ms)", what, rc, dt);
    if (atomic_load(&m->kill_at) == 0 && rc != RLOCK_OK)
        note_bad(t, "%s before the kill: %s after %lld ms", what, rc, dt);
    if (down != 0 && t0 >= down && atomic_load(&m->restart_at) == 0) {
        t->outage_calls++;
        t->outage_unavailable += rc == RLOCK_ERR_UNAVAILABLE;
        t->outage_not_acquired += rc == RLOCK_ERR_NOT_ACQUIRED;
        if (is_acquire && rc == RLOCK_OK)
            note_bad(t, "%s granted while Redis was down: %s after %lld ms", what, rc, dt);
    }
    if (is_acquire && rc == RLOCK_OK && resumed != 0 && t0 >= resumed)
        t->grants_after_resume++;
}

/* One timed try-acquire of res (and its release when granted). Returns the acquire's result. */
static enum rlock_err timed_pair(struct rlock_client *c, const char *res, struct tally *t,
                                 const struct marks *m)
{
    struct rlock_acquire_opts o = {.ttl_ms = 2000, .wait_ms = 0};
    struct rlock_lock *l = NULL;
    int64_t t0 = h_now_ms();
    enum rlock_err rc = rlock_acquire(c, res, &o, CALL_TIMEOUT_MS, &l);
    judge(t, m, 1, rc, l, t0);
    if (rc != RLOCK_OK)
        return rc;
    t0 = h_now_ms();
    enum rlock_err rel = rlock_release(l, CALL_TIMEOUT_MS);
    judge(t, m, 0, rel, NULL, t0);
    if (rel == RLOCK_OK && atomic_load(&m->kill_at) == 0)
        t->pre_pairs++;
    rlock_lock_free(l);
    return rc;
}

/* A fresh resource name for every pair, so a lock stranded by a failed release is never re-entered. */
static void *loader_main(void *arg)
{
    struct loader *ld = arg;
    for (long n = 0; !atomic_load(&ld->m->stop); n++) {
        char res[64];
        snprintf(res, sizeof res, "restart/load/%d/%ld", ld->id, n);
        if (timed_pair(ld->c, res, &ld->t, ld->m) == RLOCK_OK && ld->t.grants_after_resume > 0)
            atomic_store(&ld->granted_again, 1);
        h_sleep_ms(2);
    }
    return NULL;
}

/* The holder's lost-lock log (written on the client's background thread). */
struct lost_log {
    atomic_int n;
    int reason[8];
    int64_t at[8];
};

static void on_lost(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    struct lost_log *log = arg;
    (void)c;
    (void)resource;
    (void)token;
    (void)fence;
    int i = atomic_load(&log->n);
    if (i < 8) {
        log->reason[i] = (int)reason;
        log->at[i] = h_now_ms();
    }
    atomic_store(&log->n, i + 1);
}

struct held {
    struct rlock_lock *l[HELD];
    struct lost_log *log;
};

static int all_lost(void *arg)
{
    struct held *h = arg;
    for (int i = 0; i < HELD; i++)
        if (rlock_lock_state(h->l[i]) != RLOCK_LOST)
            return 0;
    return atomic_load(&h->log->n) >= HELD;
}

struct probe {
    struct rlock_client *c;
    struct marks *m;
    struct tally t;
    long n;
};

static int probe_granted(void *arg)
{
    struct probe *p = arg;
    char res[64];
    snprintf(res, sizeof res, "restart/probe/%ld", p->n++);
    return timed_pair(p->c, res, &p->t, p->m) == RLOCK_OK;
}

static int loaders_granted(void *arg)
{
    struct loader *ld = arg;
    for (int i = 0; i < LOADERS; i++)
        if (!atomic_load(&ld[i].granted_again) && !h_thread_done(&ld[i].thread))
            return 0;
    return 1;
}

static void holder_take(struct rlock_client *c, struct held *h)
{
    for (int i = 0; i < HELD; i++) {
        char res[64];
        snprintf(res, sizeof res, "restart/held/%d", i);
        struct rlock_acquire_opts o = {.ttl_ms = HELD_TTL_MS, .wait_ms = 0};
        enum rlock_err rc = rlock_acquire(c, res, &o, CALL_TIMEOUT_MS, &h->l[i]);
        ck_assert_msg(rc == RLOCK_OK, "holder's acquire of %s: %s", res, rlock_strerror(rc));
    }
}

/*
 * Whether each held lock's key holds a token in Redis: all must equal want. A
 * key Redis lost under a still-valid lease gets a tombstone until that
 * lease's promise is over: that holds no token.
 */
static void expect_held_keys(struct h_env *e, int want)
{
    redisContext *r = h_redis(e);
    ck_assert_ptr_nonnull(r);
    for (int i = 0; i < HELD; i++) {
        char res[64], key[512];
        snprintf(res, sizeof res, "restart/held/%d", i);
        h_lock_key(e, res, key, sizeof key);
        int held = !h_key_unheld(r, key);
        ck_assert_msg(held == want, "%s: held %d, want %d", key, held, want);
    }
    redisFree(r);
}

/* Outage per test case (the loop index). */
static const int outage_ms[] = {2000, 400};

START_TEST(test_restart)
{
    const int outage = outage_ms[_i];
    printf("restart: outage of %d ms\n", outage);
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    static struct lost_log log;
    memset(&log, 0, sizeof log);
    atomic_init(&log.n, 0);
    struct rlock_options hopts = {.client_name = "restart-holder", .on_lost = on_lost,
                                  .on_lost_arg = &log};
    struct rlock_client *holder = h_client_or_fail(&e, &hopts);
    struct held h = {.log = &log};
    holder_take(holder, &h);

    static struct marks m;
    memset(&m, 0, sizeof m);
    static struct loader ld[LOADERS];
    for (int i = 0; i < LOADERS; i++) {
        memset(&ld[i], 0, sizeof ld[i]);
        ld[i].c = h_client_or_fail(&e, NULL);
        ld[i].id = i;
        ld[i].m = &m;
        atomic_init(&ld[i].granted_again, 0);
    }
    struct probe p = {.c = h_client_or_fail(&e, NULL), .m = &m};
    for (int i = 0; i < LOADERS; i++)
        h_thread_start(&ld[i].thread, loader_main, &ld[i]);

    /* Longer than the lease: the watchdog must have kept the holder's keys alive. */
    h_sleep_ms((int)HELD_TTL_MS + 500);
    expect_held_keys(&e, 1);
    ck_assert_int_eq(atomic_load(&log.n), 0);

    atomic_store(&m.kill_at, h_now_ms());
    ck_assert_int_eq(h_redis_kill(&e), 0);
    atomic_store(&m.down, h_now_ms());
    h_sleep_ms(outage);
    atomic_store(&m.restart_at, h_now_ms());
    ck_assert_int_eq(h_redis_start(&e), 0);
    atomic_store(&m.up, h_now_ms());

    int resumed = h_wait_for(probe_granted, &p, RESUME_LIMIT_MS);
    atomic_store(&m.resumed, h_now_ms());
    int64_t resume_ms = atomic_load(&m.resumed) - atomic_load(&m.up);
    printf("restart: redis down %lld ms; first grant %lld ms after redis was back (%s)\n",
           (long long)(atomic_load(&m.restart_at) - atomic_load(&m.down)), (long long)resume_ms,
           resumed ? "ok" : "NOT resumed");

    int lost = h_wait_for(all_lost, &h, RESUME_LIMIT_MS);
    int nlost = atomic_load(&log.n);
    for (int i = 0; i < nlost && i < 8; i++)
        printf("restart: on_lost #%d: %s, %lld ms after the kill, %lld ms after redis was back\n",
               i + 1, rlock_lost_reason_str((enum rlock_lost_reason)log.reason[i]),
               (long long)(log.at[i] - atomic_load(&m.kill_at)),
               (long long)(log.at[i] - atomic_load(&m.up)));

    /* Let the load threads see the daemon working again, then stop them. */
    h_wait_for(loaders_granted, ld, RESUME_LIMIT_MS);
    atomic_store(&m.stop, 1);
    int64_t stop_deadline = h_now_ms() + 15000;
    for (int i = 0; i < LOADERS; i++)
        h_thread_join(&ld[i].thread, stop_deadline, "load threads still blocked 15 s after stop");

    struct tally sum = p.t;
    for (int i = 0; i < LOADERS; i++) {
        const struct tally *t = &ld[i].t;
        printf("restart: loader %d: %ld calls, max %lld ms, %ld during the outage "
               "(%ld UNAVAILABLE, %ld NOT_ACQUIRED), %ld grants after resume, %ld bad%s%s\n",
               i, t->calls, (long long)t->max_ms, t->outage_calls, t->outage_unavailable,
               t->outage_not_acquired, t->grants_after_resume, t->bad, t->bad ? "; first: " : "",
               t->first_bad);
        sum.max_ms = t->max_ms > sum.max_ms ? t->max_ms : sum.max_ms;
        sum.calls += t->calls;
        sum.pre_pairs += t->pre_pairs;
        sum.outage_calls += t->outage_calls;
        sum.bad += t->bad;
        ck_assert_msg(t->grants_after_resume > 0, "loader %d got no grant after the restart", i);
    }
    printf("restart: probe: %ld calls, max %lld ms, %ld bad%s%s\n", p.t.calls,
           (long long)p.t.max_ms, p.t.bad, p.t.bad ? "; first: " : "", p.t.first_bad);
    printf("restart: all calls: %ld, slowest %lld ms, %ld during the outage, %ld bad\n", sum.calls,
           (long long)sum.max_ms, sum.outage_calls, sum.bad);
    fflush(stdout);

    ck_assert_msg(sum.pre_pairs > 0, "no acquire/release pair completed before the kill");
    ck_assert_msg(sum.outage_calls > 0, "no call ran while Redis was down");
    ck_assert_msg(sum.max_ms < CALL_LIMIT_MS, "slowest call took %lld ms", (long long)sum.max_ms);
    ck_assert_int_eq(sum.bad, 0);
    ck_assert_msg(resumed, "no grant within %d ms of Redis being back", RESUME_LIMIT_MS);
    ck_assert_msg(lost, "holder's locks not all reported lost (%d callbacks)", nlost);
    ck_assert_int_eq(nlost, HELD);
    expect_held_keys(&e, 0);
    /* The sessions outlived the outage. */
    ck_assert_int_eq(rlock_client_alive(holder), 1);
    ck_assert_int_eq(rlock_ping(holder, CALL_TIMEOUT_MS, NULL), RLOCK_OK);

    for (int i = 0; i < HELD; i++)
        rlock_lock_free(h.l[i]);
    for (int i = 0; i < LOADERS; i++)
        rlock_close(ld[i].c);
    rlock_close(p.c);
    rlock_close(holder);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("integration_restart");
    static const char *const names[] = {"long_outage", "short_outage"};
    for (int i = 0; i < (int)H_LEN(outage_ms); i++)
        tcase_add_loop_test(h_tcase(s, names[i], 90), test_restart, i, i + 1);
    return h_run_suite(s);
}
