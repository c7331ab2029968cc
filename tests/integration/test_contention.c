/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_contention.c — where acquires wait (TopResources, docs/protocol.md
 * §9.8; the lock wait and hold histograms of the metrics endpoint):
 *  - hot_ranked: 1,000 resources held by client A, a summary of 100 counters.
 *    Ten hot ones are waited for by ten threads, hot-k (20 - k) times for
 *    150 ms each (TIMEOUT), while the 990 cold ones are tried once each
 *    (NOT_ACQUIRED). The top 10 by wait are the ten hot ones, ranked as the
 *    test measured their waits (two may swap only when their measured totals
 *    are closer than their stated errors allow), each with its exact count of
 *    timeouts, a wait total between the deadlines served and what the threads
 *    measured, and A named as the holder; the summary is full (100 of 100)
 *    and states its error bound; ordered by refusals, the cold ones followed
 *    show the one refusal each had;
 *  - grants_holds_losses: a wait that ends in a grant, the grant's hold,
 *    a hold taken away (ForceRelease: a loss), three waiters queued at once
 *    (order WAITERS), and the same waits and holds in the metrics endpoint's
 *    rlockd_lock_wait_seconds and rlockd_lock_hold_seconds;
 *  - off: top_resources = 0 follows nothing and answers an empty list;
 *  - top_live: `rlockctl top` under a pseudo-terminal shows the hot resource,
 *    its holder and its queue, changes its order on a key (t: timeouts) and
 *    quits on q, leaving the terminal's main screen back;
 *  - top_once_json: `rlockctl top --once --json` lists what TopResources
 *    answers, in the same order with the same numbers.
 */
#include "harness.h"
#include "pty_shell.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define HOT 10
#define COLD 990
#define HOT_WAIT_MS 150
#define TOP_INI "[metrics]\nlisten =\ntop_resources = 100\n"

static struct rlock_client *named_client(struct h_env *e, const char *name)
{
    struct rlock_options o = {.client_name = name};
    return h_client_or_fail(e, &o);
}

/* --- hot_ranked ---------------------------------------------------------------------- */

struct hot_thread {
    struct h_env *e;
    int k;
    int64_t measured_us; /* the waits as this thread timed them */
    int timeouts;
    char error[160];
};

static void *hot_waiter(void *arg)
{
    struct hot_thread *t = arg;
    struct rlock_options opt = {.client_name = "waiter"};
    struct rlock_client *c = h_client(t->e, &opt);
    if (c == NULL) {
        snprintf(t->error, sizeof t->error, "hot-%d: no client", t->k);
        return NULL;
    }
    char name[32];
    snprintf(name, sizeof name, "hot-%d", t->k);
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = HOT_WAIT_MS};
    for (int i = 0; i < 20 - t->k; i++) {
        struct rlock_lock *l = NULL;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        enum rlock_err rc = rlock_acquire(c, name, &o, 0, &l);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (rc != RLOCK_ERR_TIMEOUT) {
            snprintf(t->error, sizeof t->error, "%s: %s, want TIMEOUT", name, rlock_strerror(rc));
            break;
        }
        t->measured_us += (int64_t)(b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
        t->timeouts++;
    }
    rlock_close(c);
    return NULL;
}

struct top_list {
    int n;
    char name[1000][32];
    struct rlock_resource_stats st[1000];
};

static int top_visit(const struct rlock_resource_stats *r, void *arg)
{
    struct top_list *l = arg;
    ck_assert_int_lt(l->n, 1000);
    snprintf(l->name[l->n], sizeof l->name[0], "%s", r->resource);
    l->st[l->n] = *r;
    l->st[l->n].resource = l->name[l->n];
    l->n++;
    return 0;
}

static void top(struct rlock_client *c, enum rlock_top_order order, uint32_t limit,
                struct top_list *out, struct rlock_top_summary *sum)
{
    memset(out, 0, sizeof *out);
    enum rlock_err rc = rlock_top_resources(c, order, limit, top_visit, out, sum, 10000);
    ck_assert_msg(rc == RLOCK_OK, "TopResources: %s (%s)", rlock_strerror(rc),
                  rlock_last_error()->message);
}

START_TEST(test_hot_ranked)
{
    static struct top_list list; /* large: off the stack */
    struct h_fixture f;
    h_fixture_start_env(&f, TOP_INI);
    struct rlock_client *a = named_client(&f.e, "holder-a");
    struct rlock_client *b = named_client(&f.e, "trier-b");
    struct rlock_acquire_opts ho = {.ttl_ms = 30000};
    static struct rlock_lock *held[HOT + COLD];
    char name[32];
    for (int i = 0; i < HOT + COLD; i++) {
        if (i < HOT)
            snprintf(name, sizeof name, "hot-%d", i);
        else
            snprintf(name, sizeof name, "cold-%d", i - HOT);
        held[i] = h_acquire_ok(a, name, &ho);
    }

    struct hot_thread th[HOT];
    pthread_t tid[HOT];
    for (int k = 0; k < HOT; k++) {
        th[k] = (struct hot_thread){.e = &f.e, .k = k};
        ck_assert_int_eq(pthread_create(&tid[k], NULL, hot_waiter, &th[k]), 0);
    }
    /* The cold ones, tried once each while the hot ones are waited for. */
    struct rlock_acquire_opts try = {.ttl_ms = 10000};
    for (int i = 0; i < COLD; i++) {
        struct rlock_lock *l = NULL;
        snprintf(name, sizeof name, "cold-%d", i);
        ck_assert_int_eq(rlock_acquire(b, name, &try, 0, &l), RLOCK_ERR_NOT_ACQUIRED);
    }
    for (int k = 0; k < HOT; k++) {
        ck_assert_int_eq(pthread_join(tid[k], NULL), 0);
        ck_assert_msg(th[k].error[0] == '\0', "%s", th[k].error);
        ck_assert_int_eq(th[k].timeouts, 20 - k);
    }

    struct rlock_top_summary sum;
    top(b, RLOCK_TOP_WAIT, 10, &list, &sum);
    printf("contention: capacity %u, followed %u, total weight %" PRIu64 ", error bound %" PRIu64
           "\n", sum.capacity, sum.followed, sum.total_weight, sum.error_bound);
    ck_assert_uint_eq(sum.capacity, 100);
    ck_assert_uint_eq(sum.followed, 100);
    ck_assert_uint_eq(sum.error_bound, sum.total_weight / 100);
    ck_assert_int_eq(list.n, HOT);
    int64_t measured[HOT];
    for (int i = 0; i < HOT; i++) {
        const struct rlock_resource_stats *st = &list.st[i];
        int k = -1;
        ck_assert_msg(sscanf(st->resource, "hot-%d", &k) == 1 && k >= 0 && k < HOT,
                      "top %d by wait is %s, not a hot resource", i + 1, st->resource);
        measured[i] = th[k].measured_us;
        printf("contention: #%d %s weight %" PRIu64 " (error %" PRIu64 "), waited %" PRIu64
               " us (threads measured %" PRId64 "), p50 %" PRIu64 " p99 %" PRIu64 "\n",
               i + 1, st->resource, st->weight, st->weight_error, st->wait_total_us,
               measured[i], st->wait_p50_us, st->wait_p99_us);
        ck_assert_uint_eq(st->timeouts, (uint64_t)(20 - k));
        ck_assert_uint_eq(st->contended, st->timeouts);
        ck_assert_uint_eq(st->grants + st->refusals + st->cancels, 0);
        ck_assert_uint_le(st->weight_error, sum.error_bound);
        /* Each wait lasted its deadline at least, and no longer than the caller saw it. */
        ck_assert_uint_ge(st->wait_total_us, (uint64_t)(20 - k) * HOT_WAIT_MS * 1000);
        ck_assert_uint_le(st->wait_total_us, (uint64_t)measured[i]);
        ck_assert_uint_ge(st->weight, st->wait_total_us + st->contended);
        ck_assert_uint_ge(st->wait_max_us, HOT_WAIT_MS * 1000);
        ck_assert_uint_ge(st->wait_p50_us, HOT_WAIT_MS * 1000);
        ck_assert_uint_le(st->wait_p50_us, st->wait_max_us);
        ck_assert_int_eq(st->held, 1);
        ck_assert_str_eq(st->holder.session_id, rlock_session_id(a));
        ck_assert_str_eq(st->holder.client_name, "holder-a");
        ck_assert_uint_eq(st->waiters, 0);
    }
    /* Ranked as measured, but for pairs closer than their errors. */
    for (int i = 0; i < HOT; i++)
        for (int j = i + 1; j < HOT; j++)
            ck_assert_msg(measured[i] + (int64_t)(list.st[i].weight_error +
                                                  list.st[j].weight_error) >= measured[j],
                          "%s ranked before %s, measured %" PRId64 " < %" PRId64 " us",
                          list.st[i].resource, list.st[j].resource, measured[i], measured[j]);

    /* By refusals: the cold ones followed, one refusal each since they were taken in. */
    top(b, RLOCK_TOP_CONTENDED, 1000, &list, &sum);
    ck_assert_int_eq(list.n, 100);
    int cold = 0;
    for (int i = 0; i < list.n; i++) {
        if (strncmp(list.st[i].resource, "cold-", 5) != 0)
            continue;
        cold++;
        ck_assert_uint_eq(list.st[i].refusals, 1);
        ck_assert_uint_eq(list.st[i].contended, 1);
        ck_assert_uint_le(list.st[i].weight_error, sum.error_bound);
    }
    ck_assert_int_eq(cold, 100 - HOT);

    for (int i = 0; i < HOT + COLD; i++)
        rlock_lock_free(held[i]);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/* --- grants_holds_losses --------------------------------------------------------------- */

struct queued {
    struct h_env *e;
    const char *resource;
    int shared;
    uint32_t wait_ms; /* 0: 1500 */
    enum rlock_err rc;
};

static void *queued_waiter(void *arg)
{
    struct queued *q = arg;
    struct rlock_client *c = h_client(q->e, NULL);
    if (c == NULL) {
        q->rc = RLOCK_ERR_CONNECT;
        return NULL;
    }
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = q->wait_ms ? q->wait_ms : 1500,
                                   .shared = q->shared};
    struct rlock_lock *l = NULL;
    q->rc = rlock_acquire(c, q->resource, &o, 0, &l);
    if (q->rc == RLOCK_OK) { /* a short hold, released before the session ends */
        q->rc = rlock_release(l, 5000);
        rlock_lock_free(l);
    }
    rlock_close(c);
    return NULL;
}

static uint64_t metric(const struct h_env *e, const char *name)
{
    struct h_http_reply r;
    ck_assert_msg(h_http_get(e->metrics_sock, "/metrics", 5000, &r) == 0, "GET /metrics");
    const char *p = strstr(r.body, name);
    ck_assert_msg(p != NULL, "no %s in /metrics", name);
    uint64_t v = strtoull(p + strlen(name), NULL, 10);
    h_http_free(&r);
    return v;
}

START_TEST(test_grants_holds_losses)
{
    static struct top_list list;
    struct h_fixture f;
    h_fixture_start_env(&f, NULL); /* the default summary, and the metrics endpoint */
    struct rlock_client *a = named_client(&f.e, "holder-a");
    struct rlock_client *b = named_client(&f.e, "waiter-b");
    uint64_t waits0 = metric(&f.e, "rlockd_lock_wait_seconds_count ");
    uint64_t holds0 = metric(&f.e, "rlockd_lock_hold_seconds_count ");

    /* B waits for A's hold of 300 ms, then is granted. */
    struct rlock_acquire_opts ho = {.ttl_ms = 10000};
    struct rlock_lock *la = h_acquire_ok(a, "g-1", &ho);
    struct queued q = {.e = &f.e, .resource = "g-1"};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, queued_waiter, &q), 0);
    /* Its wait starts once it is queued (its thread connects first). */
    ck_assert_int_ge(h_wait_stats_of(a, 1, 1, 10000, NULL), 0);
    /* Followed from the start of the wait: before any wait ended, it is listed, with its
     * queue and holder. */
    struct rlock_top_summary sum;
    top(a, RLOCK_TOP_WAITERS, 0, &list, &sum);
    ck_assert_int_eq(list.n, 1);
    ck_assert_str_eq(list.st[0].resource, "g-1");
    ck_assert_uint_eq(list.st[0].waiters, 1);
    ck_assert_uint_eq(list.st[0].contended, 0); /* counted when it ends */
    ck_assert_int_eq(list.st[0].held, 1);
    h_sleep_ms(300);
    ck_assert_int_eq(rlock_release(la, 5000), RLOCK_OK);
    rlock_lock_free(la);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_int_eq(q.rc, RLOCK_OK); /* granted, then released */

    /* Then B holds it 200 ms and releases it; then holds it again and loses it. */
    struct rlock_lock *lb = h_acquire_ok(b, "g-1", &ho);
    h_sleep_ms(200);
    ck_assert_int_eq(rlock_release(lb, 5000), RLOCK_OK);
    rlock_lock_free(lb);
    lb = h_acquire_ok(b, "g-1", &ho);
    struct rlock_forced forced;
    ck_assert_int_eq(rlock_force_release(a, "g-1", 5000, &forced), RLOCK_OK);
    ck_assert_str_eq(forced.session_id, rlock_session_id(b));
    rlock_lock_free(lb);

    top(a, RLOCK_TOP_WAIT, 0, &list, &sum);
    ck_assert_uint_eq(sum.capacity, 1000);
    ck_assert_int_eq(list.n, 1);
    const struct rlock_resource_stats *st = &list.st[0];
    ck_assert_str_eq(st->resource, "g-1");
    ck_assert_uint_eq(st->contended, 1);
    ck_assert_uint_eq(st->grants, 1);
    ck_assert_uint_ge(st->wait_total_us, 250000);
    ck_assert_uint_eq(st->wait_total_us, st->wait_max_us);
    /* A's 300 ms (g-1 was followed from the start of B's wait), the waiter's own short hold,
     * B's 200 ms, B's lost one. */
    ck_assert_uint_eq(st->holds, 4);
    ck_assert_uint_eq(st->losses, 1);
    ck_assert_uint_ge(st->hold_max_us, 300000);
    ck_assert_uint_ge(st->hold_total_us, 200000);
    ck_assert_int_eq(st->held, 0);

    /* Three waiters at once behind A's hold of a followed resource. */
    la = h_acquire_ok(a, "q-1", &ho);
    struct rlock_lock *none = NULL;
    ck_assert_int_eq(rlock_acquire(b, "q-1", &(struct rlock_acquire_opts){.ttl_ms = 1000}, 0,
                                   &none),
                     RLOCK_ERR_NOT_ACQUIRED);
    struct queued qs[3];
    pthread_t ts[3];
    for (int i = 0; i < 3; i++) {
        qs[i] = (struct queued){.e = &f.e, .resource = "q-1", .wait_ms = 5000};
        ck_assert_int_eq(pthread_create(&ts[i], NULL, queued_waiter, &qs[i]), 0);
    }
    ck_assert_int_ge(h_wait_stats_of(a, 1, 3, 10000, NULL), 0);
    top(a, RLOCK_TOP_WAITERS, 1, &list, &sum);
    ck_assert_int_eq(list.n, 1);
    ck_assert_str_eq(list.st[0].resource, "q-1");
    ck_assert_uint_eq(list.st[0].waiters, 3);
    ck_assert_uint_ge(list.st[0].waiters_max, 3);
    ck_assert_int_eq(list.st[0].held, 1);
    ck_assert_str_eq(list.st[0].holder.client_name, "holder-a");
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(pthread_join(ts[i], NULL), 0);
        ck_assert_int_eq(qs[i].rc, RLOCK_ERR_TIMEOUT);
    }
    rlock_lock_free(la);

    /* The same waits and holds, daemon-wide: g-1's wait, q-1's refusal and three timeouts;
     * g-1's four holds, A's first included (q-1's is still held). */
    ck_assert_uint_eq(metric(&f.e, "rlockd_lock_wait_seconds_count ") - waits0, 5);
    ck_assert_uint_eq(metric(&f.e, "rlockd_lock_hold_seconds_count ") - holds0, 4);

    /* Two shared waiters queued behind A's exclusive hold of g-2: the second is granted
     * from the queue without a busy answer of its own (the first's grant does not exclude
     * it), and its wait counts all the same. */
    la = h_acquire_ok(a, "g-2", &ho);
    struct queued q2[2];
    pthread_t t2[2];
    for (int i = 0; i < 2; i++) {
        q2[i] = (struct queued){.e = &f.e, .resource = "g-2", .shared = 1};
        ck_assert_int_eq(pthread_create(&t2[i], NULL, queued_waiter, &q2[i]), 0);
    }
    ck_assert_int_ge(h_wait_stats_of(a, 2, 2, 10000, NULL), 0); /* q-1 is still A's too */
    h_sleep_ms(300);
    ck_assert_int_eq(rlock_release(la, 5000), RLOCK_OK);
    rlock_lock_free(la);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(t2[i], NULL), 0);
        ck_assert_int_eq(q2[i].rc, RLOCK_OK);
    }
    top(a, RLOCK_TOP_CONTENDED, 10, &list, &sum);
    int found = 0;
    for (int i = 0; i < list.n; i++) {
        if (strcmp(list.st[i].resource, "g-2") != 0)
            continue;
        found = 1;
        ck_assert_uint_eq(list.st[i].contended, 2);
        ck_assert_uint_eq(list.st[i].grants, 2);
        ck_assert_uint_ge(list.st[i].wait_total_us, 2 * 250000);
    }
    ck_assert_msg(found, "g-2 is not followed");
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/* --- off --------------------------------------------------------------------------------- */

START_TEST(test_off)
{
    static struct top_list list;
    struct h_fixture f;
    h_fixture_start(&f, "[metrics]\nlisten =\ntop_resources = 0\n");
    struct rlock_client *b = named_client(&f.e, "trier-b");
    struct rlock_acquire_opts ho = {.ttl_ms = 10000};
    struct rlock_lock *l = h_acquire_ok(f.c, "off-1", &ho);
    struct rlock_lock *none = NULL;
    ck_assert_int_eq(rlock_acquire(b, "off-1", &ho, 0, &none), RLOCK_ERR_NOT_ACQUIRED);
    struct rlock_top_summary sum;
    top(b, RLOCK_TOP_WAIT, 10, &list, &sum);
    ck_assert_int_eq(list.n, 0);
    ck_assert_uint_eq(sum.capacity, 0);
    ck_assert_uint_eq(sum.followed, 0);
    rlock_lock_free(l);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/* --- rlockctl top ---------------------------------------------------------------------- */

/* A followed resource "hot-top" held by "holder-a", two waiters queued on it until it is
 * released (top_scene_stop), however slow the machine. */
struct top_scene {
    struct rlock_client *a, *b;
    struct rlock_lock *held;
    struct queued q[2];
    pthread_t t[2];
};

static void top_scene_start(struct h_fixture *f, struct top_scene *sc)
{
    sc->a = named_client(&f->e, "holder-a");
    sc->b = named_client(&f->e, "trier-b");
    struct rlock_acquire_opts ho = {.ttl_ms = 10000};
    sc->held = h_acquire_ok(sc->a, "hot-top", &ho);
    struct rlock_lock *none = NULL;
    ck_assert_int_eq(rlock_acquire(sc->b, "hot-top", &ho, 0, &none), RLOCK_ERR_NOT_ACQUIRED);
    for (int i = 0; i < 2; i++) {
        sc->q[i] = (struct queued){.e = &f->e, .resource = "hot-top", .wait_ms = 60000};
        ck_assert_int_eq(pthread_create(&sc->t[i], NULL, queued_waiter, &sc->q[i]), 0);
    }
    ck_assert_int_ge(h_wait_stats_of(sc->a, 1, 2, 10000, NULL), 0);
}

static void top_scene_stop(struct top_scene *sc)
{
    ck_assert_int_eq(rlock_release(sc->held, 5000), RLOCK_OK);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(sc->t[i], NULL), 0);
        ck_assert_int_eq(sc->q[i].rc, RLOCK_OK); /* granted in turn, and released */
    }
    rlock_lock_free(sc->held);
    rlock_close(sc->a);
    rlock_close(sc->b);
}

START_TEST(test_top_live)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct top_scene sc;
    top_scene_start(&f, &sc);
    char bin[512];
    h_bin("rlockctl", bin, sizeof bin);
    char *argv[] = {bin, "--server", f.e.rlockd_addr, "top", "--interval", "200ms", NULL};
    struct pty t;
    pty_start(&t, &f.e, argv);
    pty_expect(&t, "order: wait");
    pty_expect(&t, "hot-top");
    pty_expect(&t, "holder-a"); /* the holder column */
    pty_expect(&t, " 2/2 ");    /* queued now / most at once */
    pty_forget(&t);
    pty_type(&t, 't');
    pty_expect(&t, "order: timeouts");
    pty_forget(&t);
    pty_type(&t, 'q');
    int status, fg;
    pty_report(&t, "EXIT ", &status, &fg);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlockctl top: status %d",
                  status);
    pty_expect(&t, "\033[?1049l"); /* the main screen is back */
    pty_stop(&t);
    top_scene_stop(&sc);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_top_once_json)
{
    static struct top_list list;
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct top_scene sc;
    top_scene_start(&f, &sc);
    /* A second resource, tried more often but waited for less than hot-top: the orders
     * contended and wait differ. */
    struct rlock_acquire_opts ho = {.ttl_ms = 10000};
    struct rlock_lock *many = h_acquire_ok(sc.a, "many-tries", &ho);
    for (int i = 0; i < 5; i++) {
        struct rlock_lock *none = NULL;
        ck_assert_int_eq(rlock_acquire(sc.b, "many-tries", &ho, 0, &none),
                         RLOCK_ERR_NOT_ACQUIRED);
    }
    rlock_lock_free(many);
    top_scene_stop(&sc); /* quiet: the numbers stay as they are */
    struct rlock_top_summary sum;
    struct rlock_client *asker = named_client(&f.e, "asker");
    top(asker, RLOCK_TOP_CONTENDED, 5, &list, &sum);
    rlock_close(asker);
    ck_assert_int_eq(list.n, 2);
    ck_assert_str_eq(list.st[0].resource, "many-tries"); /* 5 against hot-top's 3 */

    char bin[512], out[400];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "top.json", out, sizeof out);
    char *argv[] = {bin, "--server", f.e.rlockd_addr, "top", "--once", "--json", "--order",
                    "contended", "--limit", "5", NULL};
    pid_t pid = h_spawn(argv, out);
    int status = 0;
    ck_assert_msg(h_wait_exit(pid, 10000, &status) == 0, "rlockctl top did not exit");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    char *text = h_read_file(out);
    ck_assert_ptr_nonnull(text);
    printf("contention: rlockctl top --once --json:\n%s", text);
    ck_assert_msg(strstr(text, "\"order\": \"contended\"") != NULL, "no order in %s", text);
    char want[256];
    snprintf(want, sizeof want, "\"capacity\": %u, \"followed\": %u", sum.capacity,
             sum.followed);
    ck_assert_msg(strstr(text, want) != NULL, "'%s' not in %s", want, text);
    const char *at = text;
    for (int i = 0; i < list.n; i++) {
        const struct rlock_resource_stats *st = &list.st[i];
        snprintf(want, sizeof want,
                 "\"resource\": \"%s\", \"weight\": %" PRIu64 ", \"weight_error\": %" PRIu64
                 ", \"contended\": %" PRIu64 ", \"grants\": %" PRIu64 ", \"timeouts\": %" PRIu64,
                 st->resource, st->weight, st->weight_error, st->contended, st->grants,
                 st->timeouts);
        const char *p = strstr(at, want);
        ck_assert_msg(p != NULL, "entry %d '%s' not in order in %s", i + 1, want, text);
        at = p + 1;
    }
    free(text);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_hot_ranked, test_grants_holds_losses, test_off, test_top_live,
                            test_top_once_json};
    return h_run_tests("contention", 120, tests, H_LEN(tests));
}
