/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_acquire_all.c — rlock_acquire_all: several locks, all or none, never a
 * deadlock (rlock.h; docs/design-kinds.md, "Multi-resource acquire"). Real
 * redis-server and rlockd processes.
 *
 *  - opposite orders: 4 clients on their own threads take {A, B} or {B, A}
 *    (in turn) with a wait, many times: none times out (a deadlock would hold
 *    both until the waits run out), each resource's occupancy counter never
 *    goes above one, and the plain counters guarded by A and by B end exact;
 *  - all or nothing: with B held elsewhere, a try of {A, B} fails NOT_ACQUIRED
 *    and a wait TIMEOUT naming B, and A is free again at once (its key gone,
 *    another client takes it without a wait); out[] is all NULL;
 *  - a lock lost while the next is awaited (its key deleted in Redis) fails
 *    the call, and the one granted after it is released;
 *  - one wait budget for the set: A freed 2 s into a 3 s wait, B never: the call
 *    times out at about 3 s, not 2 s + 3 s;
 *  - bad arguments: no resources, too many, a name twice, an empty name;
 *  - rlockctl run --also: 4 processes, half naming A then B, half B then A,
 *    each 15 jobs of read-sleep-write on one counter per resource: both end
 *    exact, no process fails (no deadlock within the 60 s waits), and each job
 *    sees RLOCK_FENCES with RESOURCE's fence first; a lost --also lock stops
 *    the job (exit 79), naming it.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#define CALL_TIMEOUT_MS 5000u
#define WORKERS 4
#define ROUNDS 150
#define WORKER_WAIT_MS 30000u

struct shared {
    struct h_env *e;
    atomic_int inside[2];   /* sessions inside A's and B's section */
    atomic_int max_inside;
    int counter[2];         /* read-sleep-write under the lock of each */
    atomic_int failures;
    char first_failure[256];
    pthread_mutex_t mu;
};

struct worker {
    struct shared *s;
    int index;
    struct rlock_client *c;
    struct h_thread t;
};

static void worker_fail(struct shared *s, const char *what, enum rlock_err e)
{
    pthread_mutex_lock(&s->mu);
    if (atomic_fetch_add(&s->failures, 1) == 0)
        snprintf(s->first_failure, sizeof s->first_failure, "%s: %d (%.200s)", what, (int)e,
                 rlock_last_error()->message);
    pthread_mutex_unlock(&s->mu);
}

static void enter(struct shared *s, int r)
{
    int now = atomic_fetch_add(&s->inside[r], 1) + 1;
    int max = atomic_load(&s->max_inside);
    while (now > max && !atomic_compare_exchange_weak(&s->max_inside, &max, now))
        ;
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    struct shared *s = w->s;
    /* Half the workers name A first, half B first; each also swaps every round. */
    for (int i = 0; i < ROUNDS && atomic_load(&s->failures) == 0; i++) {
        const char *names[2];
        int a_first = (w->index + i) % 2 == 0;
        names[0] = a_first ? "all/A" : "all/B";
        names[1] = a_first ? "all/B" : "all/A";
        struct rlock_lock *out[2];
        struct rlock_acquire_opts o = {.wait_ms = WORKER_WAIT_MS};
        enum rlock_err e = rlock_acquire_all(w->c, names, 2, &o, CALL_TIMEOUT_MS, out);
        if (e != RLOCK_OK) {
            worker_fail(s, "rlock_acquire_all", e);
            break;
        }
        enter(s, 0);
        enter(s, 1);
        int a = s->counter[0], b = s->counter[1];
        if ((i & 7) == 0)
            h_sleep_ms(1); /* widen the window a second holder would race in */
        s->counter[0] = a + 1;
        s->counter[1] = b + 1;
        atomic_fetch_sub(&s->inside[0], 1);
        atomic_fetch_sub(&s->inside[1], 1);
        for (int k = 0; k < 2; k++) {
            e = rlock_release(out[k], CALL_TIMEOUT_MS);
            if (e != RLOCK_OK)
                worker_fail(s, "rlock_release", e);
            rlock_lock_free(out[k]);
        }
    }
    return NULL;
}

START_TEST(test_opposite_orders)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct shared s = {.e = &f.e};
    pthread_mutex_init(&s.mu, NULL);
    struct worker w[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (struct worker){.s = &s, .index = i, .c = h_client_or_fail(&f.e, NULL)};
    }
    int64_t start = h_now_ms();
    for (int i = 0; i < WORKERS; i++)
        h_thread_start(&w[i].t, worker_run, &w[i]);
    for (int i = 0; i < WORKERS; i++)
        h_thread_join(&w[i].t, h_now_ms() + 300000, "a worker did not finish in 5 minutes");
    printf("opposite_orders: %d workers x %d rounds in %lld ms, at most %d inside\n", WORKERS,
           ROUNDS, (long long)(h_now_ms() - start), atomic_load(&s.max_inside));
    ck_assert_msg(atomic_load(&s.failures) == 0, "%d failures, the first: %s",
                  atomic_load(&s.failures), s.first_failure);
    ck_assert_int_eq(atomic_load(&s.max_inside), 1);
    ck_assert_int_eq(s.counter[0], WORKERS * ROUNDS);
    ck_assert_int_eq(s.counter[1], WORKERS * ROUNDS);
    for (int i = 0; i < WORKERS; i++)
        rlock_close(w[i].c);
    pthread_mutex_destroy(&s.mu);
    h_fixture_stop(&f);
}
END_TEST

/* Assert that c can take resource at once (nobody holds it), then release it. */
static void assert_free(struct h_fixture *f, struct rlock_client *c, const char *resource)
{
    char key[200];
    h_lock_key(&f->e, resource, key, sizeof key);
    ck_assert_msg(h_redis_int(f->r, "EXISTS %s", key) == 0, "%s's key is still in Redis",
                  resource);
    struct rlock_lock *l = h_acquire_ok(c, resource, NULL);
    ck_assert_int_eq(rlock_release(l, CALL_TIMEOUT_MS), RLOCK_OK);
    rlock_lock_free(l);
}

START_TEST(test_all_or_nothing)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *other = h_client_or_fail(&f.e, NULL);
    struct rlock_lock *b = h_acquire_ok(other, "aon/B", NULL);
    const char *names[] = { "aon/C", "aon/A", "aon/B" };
    struct rlock_lock *out[3] = { (void *)1, (void *)1, (void *)1 };

    /* A try: A and C (before B in byte order) are taken, B is not; both given back. */
    enum rlock_err e = rlock_acquire_all(f.c, names, 3, NULL, CALL_TIMEOUT_MS, out);
    ck_assert_int_eq(e, RLOCK_ERR_NOT_ACQUIRED);
    ck_assert_msg(strstr(rlock_last_error()->message, "aon/B") != NULL,
                  "the error does not name the busy resource: %s", rlock_last_error()->message);
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_null(out[i]);
    assert_free(&f, other, "aon/A");
    /* C sorts after B: never taken. */
    assert_free(&f, other, "aon/C");

    /* A wait: the same, as a timeout, after about the wait. */
    struct rlock_acquire_opts o = {.wait_ms = 300};
    int64_t t0 = h_now_ms();
    e = rlock_acquire_all(f.c, names, 3, &o, CALL_TIMEOUT_MS, out);
    ck_assert_int_eq(e, RLOCK_ERR_TIMEOUT);
    ck_assert_msg(h_now_ms() - t0 >= 250, "timed out after %lld ms of a 300 ms wait",
                  (long long)(h_now_ms() - t0));
    assert_free(&f, other, "aon/A");
    struct rlock_stats st;
    h_stats_or_fail(&f.e, &st);
    ck_assert_int_eq(st.held_locks, 1); /* B, by the other client */

    /* B released: all three, each an ordinary lock of its own name. */
    ck_assert_int_eq(rlock_release(b, CALL_TIMEOUT_MS), RLOCK_OK);
    rlock_lock_free(b);
    ck_assert_int_eq(rlock_acquire_all(f.c, names, 3, NULL, CALL_TIMEOUT_MS, out), RLOCK_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(rlock_lock_resource(out[i]), names[i]);
        ck_assert_int_eq(rlock_lock_state(out[i]), RLOCK_HELD);
    }
    ck_assert_msg(rlock_lock_fence(out[0]) > rlock_lock_fence(out[2]) &&
                      rlock_lock_fence(out[2]) > rlock_lock_fence(out[1]),
                  "fences not in the order the locks were taken (A, B, C)");
    for (int i = 0; i < 3; i++)
        h_release_gone(&f, f.c, out[i]);
    for (int i = 0; i < 3; i++)
        rlock_lock_free(out[i]);
    rlock_close(other);
    h_fixture_stop(&f);
}
END_TEST

struct taker {
    struct rlock_client *c;
    enum rlock_err rc;
    char msg[256];
    struct rlock_lock *out[2];
    struct h_thread t;
};

static void *taker_run(void *arg)
{
    struct taker *k = arg;
    const char *names[] = { "lost/A", "lost/B" };
    struct rlock_acquire_opts o = {.ttl_ms = 3000, .wait_ms = 20000};
    k->rc = rlock_acquire_all(k->c, names, 2, &o, CALL_TIMEOUT_MS, k->out);
    snprintf(k->msg, sizeof k->msg, "%s", rlock_last_error()->message);
    return NULL;
}

/* A, taken first, is lost (its key deleted) while B is awaited: the call fails once B comes,
 * and B is given back. */
START_TEST(test_lost_while_waiting)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *b = h_acquire_ok(f.c, "lost/B", NULL);
    struct taker k = {.c = h_client_or_fail(&f.e, NULL)};
    h_thread_start(&k.t, taker_run, &k);
    ck_assert_msg(h_wait_stats(&f.e, 2, 1, 10000, NULL) == 0,
                  "the taker did not hold A and wait for B");
    char key[200];
    h_lock_key(&f.e, "lost/A", key, sizeof key);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    /* The daemon's next renewal (within a third of the 3 s ttl) finds A's key gone. */
    ck_assert_msg(h_wait_stats(&f.e, 1, 1, 10000, NULL) == 0, "A's loss was not seen");
    ck_assert_int_eq(rlock_release(b, CALL_TIMEOUT_MS), RLOCK_OK);
    rlock_lock_free(b);
    h_thread_join(&k.t, h_now_ms() + 30000, "rlock_acquire_all did not return");
    ck_assert_int_eq(k.rc, RLOCK_ERR_NOT_ACQUIRED);
    ck_assert_msg(strstr(k.msg, "lost/A") != NULL && strstr(k.msg, "lost") != NULL,
                  "the error does not say A was lost: %s", k.msg);
    ck_assert_ptr_null(k.out[0]);
    ck_assert_ptr_null(k.out[1]);
    ck_assert_msg(h_wait_stats(&f.e, 0, 0, 10000, NULL) == 0, "B was not given back");
    assert_free(&f, f.c, "lost/B");
    rlock_close(k.c);
    h_fixture_stop(&f);
}
END_TEST

struct later_release {
    struct rlock_lock *l;
    int after_ms;
    enum rlock_err rc;
    struct h_thread t;
};

static void *later_release_run(void *arg)
{
    struct later_release *lr = arg;
    h_sleep_ms(lr->after_ms);
    lr->rc = rlock_release(lr->l, CALL_TIMEOUT_MS);
    return NULL;
}

START_TEST(test_one_budget)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *other = h_client_or_fail(&f.e, NULL);
    struct later_release lr = {.l = h_acquire_ok(other, "budget/A", NULL), .after_ms = 2000};
    struct rlock_lock *b = h_acquire_ok(other, "budget/B", NULL);
    const char *names[] = { "budget/A", "budget/B" };
    struct rlock_lock *out[2];
    struct rlock_acquire_opts o = {.wait_ms = 3000};
    int64_t t0 = h_now_ms();
    h_thread_start(&lr.t, later_release_run, &lr);
    enum rlock_err e = rlock_acquire_all(f.c, names, 2, &o, CALL_TIMEOUT_MS, out);
    int64_t took = h_now_ms() - t0;
    printf("one_budget: timed out after %lld ms of a 3000 ms budget (A freed at 2000 ms): %s\n",
           (long long)took, rlock_last_error()->message);
    ck_assert_int_eq(e, RLOCK_ERR_TIMEOUT);
    /* 5000 ms would be a budget per lock; 1.5 s of room for a loaded machine. */
    ck_assert_msg(took >= 2900 && took < 4500, "timed out after %lld ms", (long long)took);
    h_thread_join(&lr.t, h_now_ms() + 10000, "the release thread did not end");
    ck_assert_msg(lr.rc == RLOCK_OK, "the release of A failed: %d", (int)lr.rc);
    rlock_lock_free(lr.l);
    rlock_release(b, CALL_TIMEOUT_MS);
    rlock_lock_free(b);
    rlock_close(other);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_bad_arguments)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *out[RLOCK_ACQUIRE_ALL_MAX + 1];
    const char *many[RLOCK_ACQUIRE_ALL_MAX + 1];
    char names[RLOCK_ACQUIRE_ALL_MAX + 1][16];
    for (int i = 0; i <= RLOCK_ACQUIRE_ALL_MAX; i++) {
        snprintf(names[i], sizeof names[i], "bad/%d", i);
        many[i] = names[i];
    }
    ck_assert_int_eq(rlock_acquire_all(f.c, many, 0, NULL, 0, out), RLOCK_ERR_ARG);
    ck_assert_int_eq(rlock_acquire_all(f.c, many, RLOCK_ACQUIRE_ALL_MAX + 1, NULL, 0, out),
                     RLOCK_ERR_ARG);
    const char *twice[] = { "bad/x", "bad/y", "bad/x" };
    ck_assert_int_eq(rlock_acquire_all(f.c, twice, 3, NULL, 0, out), RLOCK_ERR_ARG);
    ck_assert_msg(strstr(rlock_last_error()->message, "bad/x") != NULL, "%s",
                  rlock_last_error()->message);
    /* out[] all NULL after an argument's refusal too (it held garbage before). */
    const char *empty[] = { "bad/x", "", "bad/z" };
    for (int i = 0; i < 3; i++)
        out[i] = (struct rlock_lock *)(uintptr_t)0x1;
    ck_assert_int_eq(rlock_acquire_all(f.c, empty, 3, NULL, 0, out), RLOCK_ERR_ARG);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(out[i] == NULL, "out[%d] left as it was after a refused argument", i);
    struct rlock_acquire_opts campaign = {.campaign_value = "me"};
    out[0] = (struct rlock_lock *)(uintptr_t)0x1;
    ck_assert_int_eq(rlock_acquire_all(f.c, twice, 2, &campaign, 0, out), RLOCK_ERR_ARG);
    ck_assert_ptr_null(out[0]);
    /* Nothing was taken by any of them; the largest set is fine. */
    struct rlock_stats st;
    h_stats_or_fail(&f.e, &st);
    ck_assert_int_eq(st.held_locks, 0);
    ck_assert_int_eq(rlock_acquire_all(f.c, many, RLOCK_ACQUIRE_ALL_MAX, NULL, 0, out), RLOCK_OK);
    h_stats_or_fail(&f.e, &st);
    ck_assert_int_eq(st.held_locks, RLOCK_ACQUIRE_ALL_MAX);
    for (int i = 0; i < RLOCK_ACQUIRE_ALL_MAX; i++)
        rlock_lock_free(out[i]);
    h_fixture_stop(&f);
}
END_TEST

/* Try resource in kind (shared or not) on c: the status of the try; a grant is released. */
static enum rlock_err try_kind(struct rlock_client *c, const char *resource, int shared)
{
    struct rlock_acquire_opts o = {.shared = shared};
    struct rlock_lock *l = NULL;
    enum rlock_err e = rlock_acquire(c, resource, &o, CALL_TIMEOUT_MS, &l);
    if (e == RLOCK_OK) {
        ck_assert_int_eq(rlock_release(l, CALL_TIMEOUT_MS), RLOCK_OK);
        rlock_lock_free(l);
    }
    return e;
}

/*
 * A kind per resource: rlock_acquire_all_kinds takes each as its kind says (another client
 * joins the shared one, not the exclusive one nor the semaphore's last permit), and so does
 * `rlockctl run --also-shared`.
 */
START_TEST(test_kinds)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_client *other = h_client_or_fail(&f.e, NULL);
    const char *names[] = { "kind/x", "kind/s", "kind/m" };
    const struct rlock_kind kinds[] = { {0, 0, 0}, {1, 0, 0}, {0, 2, 2} };
    struct rlock_lock *out[3];
    ck_assert_int_eq(rlock_acquire_all_kinds(f.c, names, kinds, 3, NULL, CALL_TIMEOUT_MS, out),
                     RLOCK_OK);
    ck_assert_int_eq(try_kind(other, "kind/s", 1), RLOCK_OK);
    ck_assert_int_eq(try_kind(other, "kind/s", 0), RLOCK_ERR_NOT_ACQUIRED);
    ck_assert_int_eq(try_kind(other, "kind/x", 1), RLOCK_ERR_NOT_ACQUIRED);
    struct rlock_acquire_opts sem = {.limit = 2};
    struct rlock_lock *l = NULL;
    ck_assert_int_eq(rlock_acquire(other, "kind/m", &sem, CALL_TIMEOUT_MS, &l),
                     RLOCK_ERR_NOT_ACQUIRED); /* both permits are taken */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rlock_release(out[i], CALL_TIMEOUT_MS), RLOCK_OK);
        rlock_lock_free(out[i]);
    }
    /* NULL kinds: opts says, for every one. */
    struct rlock_acquire_opts shared = {.shared = 1};
    ck_assert_int_eq(rlock_acquire_all_kinds(f.c, names, NULL, 2, &shared, CALL_TIMEOUT_MS, out),
                     RLOCK_OK);
    ck_assert_int_eq(try_kind(other, "kind/x", 1), RLOCK_OK);
    ck_assert_int_eq(try_kind(other, "kind/s", 1), RLOCK_OK);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(rlock_release(out[i], CALL_TIMEOUT_MS), RLOCK_OK);
        rlock_lock_free(out[i]);
    }

    /* rlockctl: RESOURCE exclusive, the --also-shared one shared, while its job runs. */
    char ctl[512], err[400];
    h_bin("rlockctl", ctl, sizeof ctl);
    snprintf(err, sizeof err, "%s/kinds.err", f.e.dir);
    char *argv[] = { ctl, "--server", f.e.rlockd_addr, "run", "--also-shared", "kind/s",
                     "kind/x", "--", "sleep", "60", NULL };
    pid_t pid = h_spawn_io(argv, NULL, err);
    ck_assert_msg(h_wait_stats(&f.e, 2, 0, 10000, NULL) == 0, "rlockctl run did not hold both");
    ck_assert_int_eq(try_kind(other, "kind/s", 1), RLOCK_OK);
    ck_assert_int_eq(try_kind(other, "kind/s", 0), RLOCK_ERR_NOT_ACQUIRED);
    ck_assert_int_eq(try_kind(other, "kind/x", 1), RLOCK_ERR_NOT_ACQUIRED);
    kill(pid, SIGTERM);
    int status;
    ck_assert_int_eq(h_wait_exit(pid, 30000, &status), 0);
    rlock_close(other);
    h_fixture_stop(&f);
}
END_TEST

#define CTL_PROCS 4
#define CTL_JOBS 15

START_TEST(test_rlockctl_also)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    char ctl[512], script[4096], path[400], err[400];
    h_bin("rlockctl", ctl, sizeof ctl);
    const char *dir = f.e.dir;
    snprintf(path, sizeof path, "%s/ca", dir);
    FILE *fp = fopen(path, "w");
    fputs("0\n", fp);
    fclose(fp);
    snprintf(path, sizeof path, "%s/cb", dir);
    fp = fopen(path, "w");
    fputs("0\n", fp);
    fclose(fp);
    pid_t pids[CTL_PROCS];
    for (int i = 0; i < CTL_PROCS; i++) {
        const char *first = i % 2 ? "also/A" : "also/B", *also = i % 2 ? "also/B" : "also/A";
        int len = snprintf(script, sizeof script,
                 "i=0; while [ $i -lt %d ]; do i=$((i+1)); "
                 "'%s' --server '%s' run --wait 60s --also '%s' '%s' -- sh -c '"
                 "a=$(cat %s/ca); b=$(cat %s/cb); sleep 0.01; "
                 "echo $((a+1)) > %s/ca; echo $((b+1)) > %s/cb; "
                 "echo \"$RLOCK_FENCE $RLOCK_FENCES\" >> %s/fences' || exit 1; done",
                 CTL_JOBS, ctl, f.e.rlockd_addr, also, first, dir, dir, dir, dir, dir);
        ck_assert_int_lt(len, (int)sizeof script);
        char *argv[] = { "/bin/sh", "-c", script, NULL };
        snprintf(err, sizeof err, "%s/also%d.err", dir, i);
        pids[i] = h_spawn_io(argv, NULL, err);
        ck_assert_int_gt(pids[i], 0);
    }
    for (int i = 0; i < CTL_PROCS; i++) {
        int status;
        snprintf(err, sizeof err, "%s/also%d.err", dir, i);
        if (h_wait_exit(pids[i], 240000, &status) != 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            h_print_tail(err, 10);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "process %d (its jobs in turn) failed: status 0x%x", i, status);
    }
    snprintf(path, sizeof path, "%s/ca", dir);
    char *a = h_read_file(path);
    snprintf(path, sizeof path, "%s/cb", dir);
    char *b = h_read_file(path);
    ck_assert_int_eq(atoi(a), CTL_PROCS * CTL_JOBS);
    ck_assert_int_eq(atoi(b), CTL_PROCS * CTL_JOBS);
    free(a);
    free(b);
    /* Every job: "FENCE F1 F2" with F1 == FENCE (RESOURCE's), two fences listed. */
    snprintf(path, sizeof path, "%s/fences", dir);
    fp = fopen(path, "r");
    ck_assert_ptr_nonnull(fp);
    unsigned long long fence, f1, f2;
    int lines = 0;
    while (fscanf(fp, "%llu %llu %llu", &fence, &f1, &f2) == 3) {
        ck_assert_msg(fence == f1 && f2 > 0, "line %d: %llu %llu %llu", lines, fence, f1, f2);
        lines++;
    }
    fclose(fp);
    ck_assert_int_eq(lines, CTL_PROCS * CTL_JOBS);

    /* A run without --also nested in one with it: its RLOCK_FENCES is its own fence, not the
     * outer run's list. */
    snprintf(script, sizeof script,
             "'%s' --server '%s' run --also nest/B nest/A -- '%s' --server '%s' run nest/C -- "
             "sh -c 'echo \"$RLOCK_FENCE|$RLOCK_FENCES\" > %s/nested'",
             ctl, f.e.rlockd_addr, ctl, f.e.rlockd_addr, dir);
    char *nest_argv[] = { "/bin/sh", "-c", script, NULL };
    snprintf(err, sizeof err, "%s/nested.err", dir);
    pid_t np = h_spawn_io(nest_argv, NULL, err);
    int nstatus;
    ck_assert_msg(h_wait_exit(np, 30000, &nstatus) == 0 && WIFEXITED(nstatus) &&
                      WEXITSTATUS(nstatus) == 0, "the nested runs failed");
    snprintf(path, sizeof path, "%s/nested", dir);
    char *nested = h_read_file(path);
    ck_assert_ptr_nonnull(nested);
    char *bar = strchr(nested, '|');
    ck_assert_ptr_nonnull(bar);
    *bar = '\0';
    ck_assert_msg(strncmp(nested, bar + 1, strlen(nested)) == 0 && bar[1 + strlen(nested)] == '\n',
                  "inner RLOCK_FENCE %s, RLOCK_FENCES %s", nested, bar + 1);
    free(nested);

    /* The --also lock lost (its key deleted): the job is stopped, and the message names it. */
    snprintf(err, sizeof err, "%s/lost.err", dir);
    char *argv[] = { ctl, "--server", f.e.rlockd_addr, "run", "--ttl", "3s", "--also",
                     "also/X", "also/Y", "--", "sleep", "60", NULL };
    pid_t pid = h_spawn_io(argv, NULL, err);
    ck_assert_msg(h_wait_stats(&f.e, 2, 0, 10000, NULL) == 0, "rlockctl run did not hold both");
    char key[200];
    h_lock_key(&f.e, "also/X", key, sizeof key);
    ck_assert_int_eq(h_redis_int(f.r, "DEL %s", key), 1);
    int status;
    ck_assert_msg(h_wait_exit(pid, 30000, &status) == 0, "rlockctl run did not stop the job");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 79, "status 0x%x", status);
    char *text = h_read_file(err);
    ck_assert_msg(text != NULL && strstr(text, "lock 'also/X' lost") != NULL,
                  "the message does not name the lost lock: %s", text ? text : "(none)");
    free(text);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_opposite_orders, test_all_or_nothing, test_lost_while_waiting,
                             test_one_budget, test_bad_arguments, test_kinds,
                             test_rlockctl_also };
    return h_run_tests("acquire_all", 360, tests, H_LEN(tests));
}
