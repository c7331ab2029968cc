/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_metrics.c — the HTTP endpoint against what really happened:
 *
 *  - a scripted workload (sessions, grants, a re-entry, a refused try, a
 *    waiter, releases, and one lost lock of each reason the daemon sends),
 *    after which /metrics, parsed by the Prometheus client library's own
 *    parser (prom_scrape.py under Debian's /usr/bin/python3), shows exactly
 *    those counts: gauges as they stand, counters as the difference from a
 *    scrape taken before the workload (the harness's own probe sessions
 *    come before it); the Stats reply agrees, since one list feeds both;
 *    docs/operations.md documents every family and names no other;
 *  - /readyz turns 503 within 2 s of redis-server being stopped and 200
 *    within 5 s of its return, while /healthz stays 200;
 *  - the latency histogram against the clients' own clocks: 100 pings are
 *    counted with a sum above 0 and below what the client measured around
 *    them (each daemon-timed interval lies inside a round trip), in buckets
 *    that tell microseconds apart; 50 acquires that wait 20 ms each for a
 *    held lock have a sum within 2x of the client's total (a ping's time in
 *    the daemon is a small part of its round trip; a wait is nearly all of
 *    it); rlockd_build_info and the process_* family are there;
 *  - promtool (Prometheus's own checker) finds nothing to say of a live
 *    scrape (`promtool check metrics`) nor of the alert rules of
 *    docs/operations.md (`promtool check rules`).
 */
#include "build_commit.h"
#include "harness.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if !defined(PROM_SCRAPE) || !defined(OPS_DOC)
#error "PROM_SCRAPE must name tests/integration/prom_scrape.py, OPS_DOC docs/operations.md"
#endif

#define PYTHON "/usr/bin/python3" /* Debian's, where python3-prometheus-client is */
#define PINGS 100
#define WAITS 50
#define WAIT_MS 20
#define SCRAPE_DEADLINE_MS 20000
#define LOST_DEADLINE_MS 5000

/* One scrape: "name{labels} value" lines as prom_scrape.py printed them. */
struct scrape {
    char *text;
};

/* Run prom_scrape.py on e's endpoint; fails the test when it fails. */
static void scrape(struct h_env *e, struct scrape *s)
{
    char out[320], err[320], status_text[32];
    h_env_path(e, "scrape.out", out, sizeof out);
    h_env_path(e, "scrape.err", err, sizeof err);
    unlink(out);
    unlink(err);
    char *argv[] = {PYTHON, PROM_SCRAPE, e->metrics_sock, NULL};
    pid_t pid = h_spawn_io(argv, out, err);
    ck_assert_msg(pid > 0, "cannot run %s", PYTHON);
    int status = 0;
    ck_assert_msg(h_wait_exit(pid, SCRAPE_DEADLINE_MS, &status) == 0,
                  "prom_scrape.py did not finish within %d ms", SCRAPE_DEADLINE_MS);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        h_print_tail(err, 20);
        ck_abort_msg("prom_scrape.py failed (%s)",
                     h_status_str(status, status_text, sizeof status_text));
    }
    s->text = h_read_file(out);
    ck_assert_ptr_nonnull(s->text);
}

static void scrape_free(struct scrape *s)
{
    free(s->text);
    s->text = NULL;
}

/* The value of the sample written exactly as key ("name" or "name{k=\"v\",...}"). */
static double sample(const struct scrape *s, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = s->text; p != NULL && *p != '\0';) {
        if (strncmp(p, key, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    ck_abort_msg("no sample %s in the scrape:\n%s", key, s->text);
    return 0;
}

/* How much the sample key grew from before to after. */
static double delta(const struct scrape *before, const struct scrape *after, const char *key)
{
    return sample(after, key) - sample(before, key);
}

/*
 * Scrape until the gauges sessions, locks held and waiters read as given (sessions
 * close a moment after their client does), at most 10 s; the last scrape goes to s.
 */
static void scrape_settled(struct h_env *e, struct scrape *s, double sessions, double held,
                           double waiters)
{
    int64_t deadline = h_now_ms() + 10000;
    for (;;) {
        scrape(e, s);
        double got_s = sample(s, "rlockd_sessions"), got_h = sample(s, "rlockd_locks_held"),
               got_w = sample(s, "rlockd_waiters");
        if (got_s == sessions && got_h == held && got_w == waiters)
            return;
        if (h_now_ms() > deadline)
            ck_abort_msg("gauges stayed at sessions %g, locks held %g, waiters %g; expected "
                         "%g, %g, %g",
                         got_s, got_h, got_w, sessions, held, waiters);
        scrape_free(s);
        h_sleep_ms(50);
    }
}

static int lost_reaches(void *arg)
{
    const struct h_lost *l = ((void **)arg)[0];
    int want = *(const int *)((void **)arg)[1];
    return atomic_load(&l->count) >= want;
}

/* Wait until lost has seen count losses, the latest for reason. */
static void wait_lost(struct h_lost *lost, int count, enum rlock_lost_reason reason,
                      const char *what)
{
    void *arg[2] = {lost, &count};
    ck_assert_msg(h_wait_for(lost_reaches, arg, LOST_DEADLINE_MS),
                  "%s: no LockLost within %d ms", what, LOST_DEADLINE_MS);
    ck_assert_int_eq(atomic_load(&lost->count), count);
    ck_assert_msg(atomic_load(&lost->reason) == (int)reason, "%s: lost for %s, not %s", what,
                  rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&lost->reason)),
                  rlock_lost_reason_str(reason));
}

struct waiter {
    struct rlock_client *c;
    struct rlock_lock *lock;
    enum rlock_err rc;
};

static void *wait_for_r2(void *arg)
{
    struct waiter *w = arg;
    struct rlock_acquire_opts o = {.wait_ms = 30000};
    w->rc = rlock_acquire(w->c, "m-r2", &o, 5000, &w->lock);
    return NULL;
}

static struct rlock_client *client(struct h_env *e, const char *name, struct h_lost *lost)
{
    struct rlock_options o = {.client_name = name, .on_lost = h_lost_cb, .on_lost_arg = lost};
    return h_client_or_fail(e, &o);
}

/*
 * docs/operations.md against the families /metrics has: each one documented, and every
 * rlockd_ name the doc uses (its table and its alert rules) a real one.
 */
static void check_docs(struct h_env *e)
{
    struct h_http_reply r;
    ck_assert_msg(h_http_get(e->metrics_sock, "/metrics", 5000, &r) == 0, "%s", r.error);
    char *doc = h_read_file(OPS_DOC);
    ck_assert_msg(doc != NULL, "cannot read %s", OPS_DOC);
    char families[64][64];
    char types[64][16];
    size_t n = 0;
    for (const char *p = strstr(r.body, "# TYPE "); p != NULL; p = strstr(p + 1, "\n# TYPE ")) {
        if (*p == '\n')
            p++;
        ck_assert_uint_lt(n, H_LEN(families));
        ck_assert_int_eq(sscanf(p, "# TYPE %63s %15s", families[n], types[n]), 2);
        char cited[80];
        snprintf(cited, sizeof cited, "| `%s", families[n]);
        const char *row = strstr(doc, cited);
        ck_assert_msg(row != NULL && (row[strlen(cited)] == '`' || row[strlen(cited)] == '{'),
                      "%s has no row in %s", families[n], OPS_DOC);
        n++;
    }
    ck_assert_uint_gt(n, 10);
    for (const char *p = strstr(doc, "rlockd_"); p != NULL; p = strstr(p + 1, "rlockd_")) {
        size_t len = strlen("rlockd_");
        if (p[len] < 'a' || p[len] > 'z')
            continue; /* rlockd_VERSION_ARCH.deb and the like */
        while ((p[len] >= 'a' && p[len] <= 'z') || (p[len] >= '0' && p[len] <= '9') ||
               p[len] == '_')
            len++;
        char name[80];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        int known = 0;
        for (size_t i = 0; i < n && !known; i++) {
            size_t fl = strlen(families[i]);
            known = strcmp(name, families[i]) == 0 ||
                    (strcmp(types[i], "histogram") == 0 && strncmp(name, families[i], fl) == 0 &&
                     (strcmp(name + fl, "_bucket") == 0 || strcmp(name + fl, "_sum") == 0 ||
                      strcmp(name + fl, "_count") == 0));
        }
        ck_assert_msg(known, "%s names %s, which /metrics does not have", OPS_DOC, name);
    }
    free(doc);
    h_http_free(&r);
}

START_TEST(test_metrics_match_workload)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct scrape s0, s1, s2;
    scrape_settled(&f.e, &s0, 0, 0, 0);

    struct h_lost lost_a = {0}, lost_b = {0}, lost_c = {0}, lost_d = {0};
    struct rlock_client *a = client(&f.e, "metrics-a", &lost_a);
    struct rlock_client *b = client(&f.e, "metrics-b", &lost_b);
    struct rlock_client *c = client(&f.e, "metrics-c", &lost_c);
    rlock_close(client(&f.e, "metrics-d", &lost_d)); /* a session that came and went */

    struct rlock_acquire_opts short_lease = {.ttl_ms = 1500};
    struct rlock_lock *r1 = h_acquire_ok(a, "m-r1", NULL);
    struct rlock_lock *r2 = h_acquire_ok(a, "m-r2", NULL);
    struct rlock_lock *r3 = h_acquire_ok(a, "m-r3", &short_lease);
    struct rlock_lock *r4 = h_acquire_ok(b, "m-r4", &short_lease);
    struct rlock_lock *r1_again = h_acquire_ok(a, "m-r1", NULL); /* re-entry: a grant too */
    ck_assert_str_eq(rlock_lock_token(r1_again), rlock_lock_token(r1));
    ck_assert_uint_eq(rlock_lock_hold_count(r1), 2);
    struct rlock_lock *none = NULL;
    ck_assert_int_eq(rlock_acquire(b, "m-r1", NULL, 5000, &none), RLOCK_ERR_NOT_ACQUIRED);

    struct waiter w = {.c = c};
    struct h_thread t;
    h_thread_start(&t, wait_for_r2, &w);
    ck_assert_msg(h_wait_stats_of(a, 4, 1, 5000, NULL) >= 0, "the waiter did not queue");

    /* Mid-way: 3 sessions, 4 locks held (m-r1 once, whatever its holds), 1 waiter. */
    scrape_settled(&f.e, &s1, 3, 4, 1);
    ck_assert_double_eq(delta(&s0, &s1, "rlockd_sessions_opened_total"), 4);
    ck_assert_double_eq(delta(&s0, &s1, "rlockd_grants_total"), 5);
    ck_assert_double_eq(delta(&s0, &s1, "rlockd_acquires_total{result=\"ok\"}"), 5);
    ck_assert_double_eq(delta(&s0, &s1, "rlockd_acquires_total{result=\"not_acquired\"}"), 1);

    /* The holder's release hands m-r2 to the waiter. */
    h_assert_ok(a, rlock_release(r2, 5000));
    h_thread_join(&t, h_now_ms() + 10000, "the waiter did not get m-r2");
    ck_assert_msg(w.rc == RLOCK_OK, "the waiter got %s", rlock_strerror(w.rc));

    /* One loss of each reason the daemon sends. */
    char key[256];
    long long n = h_redis_int(f.r, "DEL %s", h_lock_key(&f.e, "m-r4", key, sizeof key));
    ck_assert_int_eq(n, 1);
    wait_lost(&lost_b, 1, RLOCK_LOST_MISSING, "a deleted key");
    redisReply *rep = redisCommand(f.r, "SET %s intruder PX 60000",
                                   h_lock_key(&f.e, "m-r3", key, sizeof key));
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STATUS, "SET failed");
    freeReplyObject(rep);
    wait_lost(&lost_a, 1, RLOCK_LOST_STOLEN, "an overwritten key");
    struct rlock_acquire_opts capped = {.max_hold_ms = 1200};
    struct rlock_lock *r5 = h_acquire_ok(b, "m-r5", &capped);
    wait_lost(&lost_b, 2, RLOCK_LOST_MAX_HOLD, "max_hold");
    struct rlock_acquire_opts plain = {.ttl_ms = 1000, .watchdog_off = 1};
    struct rlock_lock *r6 = h_acquire_ok(c, "m-r6", &plain);
    wait_lost(&lost_c, 1, RLOCK_LOST_EXPIRED, "a watchdog-off lease");

    /* Two releases of the re-entered lock: only the last one frees it. */
    h_assert_ok(a, rlock_release(r1_again, 5000));
    h_assert_ok(a, rlock_release(r1, 5000));

    /* The end: 3 sessions, only the waiter's m-r2 held, nobody waiting. */
    scrape_settled(&f.e, &s2, 3, 1, 0);
    ck_assert_double_eq(delta(&s0, &s2, "rlockd_sessions_opened_total"), 4);
    ck_assert_double_eq(delta(&s0, &s2, "rlockd_grants_total"), 8);
    ck_assert_double_eq(delta(&s0, &s2, "rlockd_acquires_total{result=\"ok\"}"), 8);
    ck_assert_double_eq(delta(&s0, &s2, "rlockd_acquires_total{result=\"not_acquired\"}"), 1);
    ck_assert_double_eq(delta(&s0, &s2, "rlockd_releases_total"), 2);
    ck_assert_double_eq(
        delta(&s0, &s2, "rlockd_request_duration_seconds_count{op=\"acquire\"}"), 9);
    ck_assert_double_eq(
        delta(&s0, &s2, "rlockd_request_duration_seconds_count{op=\"release\"}"), 3);
    static const struct {
        const char *reason;
        double n;
    } lost[] = {{"expired", 1}, {"stolen", 1}, {"missing", 1},
                {"forced", 0},  {"session", 0}, {"max_hold", 1}};
    for (size_t i = 0; i < H_LEN(lost); i++) {
        char k[96];
        snprintf(k, sizeof k, "rlockd_locks_lost_total{reason=\"%s\"}", lost[i].reason);
        ck_assert_msg(delta(&s0, &s2, k) == lost[i].n, "%s grew by %g, not %g", k,
                      delta(&s0, &s2, k), lost[i].n);
    }
    ck_assert_double_eq(sample(&s2, "rlockd_redis_connections"), 2);
    ck_assert_double_eq(sample(&s2, "rlockd_redis_connections_ready"), 2);
    ck_assert_double_eq(sample(&s2, "rlockd_cleanup_pending") >= 0, 1);
    ck_assert_double_eq(sample(&s2, "rlockd_uptime_seconds") > 0, 1);

    /* The Stats reply comes from the same list. */
    struct rlock_stats st;
    h_assert_ok(a, rlock_stats(a, 5000, &st));
    struct scrape s3;
    scrape(&f.e, &s3);
    ck_assert_double_eq(sample(&s3, "rlockd_grants_total"), (double)st.grants);
    ck_assert_double_eq(sample(&s3, "rlockd_locks_held"), (double)st.held_locks);
    ck_assert_double_eq(sample(&s3, "rlockd_sessions"), (double)st.sessions);
    double lost_sum = 0;
    for (size_t i = 0; i < H_LEN(lost); i++) {
        char k[96];
        snprintf(k, sizeof k, "rlockd_locks_lost_total{reason=\"%s\"}", lost[i].reason);
        lost_sum += sample(&s3, k);
    }
    ck_assert_double_eq(lost_sum, (double)st.locks_lost);

    check_docs(&f.e);

    scrape_free(&s0);
    scrape_free(&s1);
    scrape_free(&s2);
    scrape_free(&s3);
    rlock_lock_free(r1);
    rlock_lock_free(r1_again);
    rlock_lock_free(r2);
    rlock_lock_free(r3);
    rlock_lock_free(r4);
    rlock_lock_free(r5);
    rlock_lock_free(r6);
    rlock_lock_free(w.lock);
    rlock_close(a);
    rlock_close(b);
    rlock_close(c);
    h_fixture_stop(&f);
}
END_TEST

/* GET path; returns the status, failing the test when there is no HTTP answer. */
static int http_status(struct h_env *e, const char *path, char *body, size_t len)
{
    struct h_http_reply r;
    ck_assert_msg(h_http_get(e->metrics_sock, path, 2000, &r) == 0, "%s", r.error);
    int status = r.status;
    if (body != NULL)
        snprintf(body, len, "%s", r.body);
    h_http_free(&r);
    return status;
}

/* Poll path every 20 ms until it answers want, at most timeout_ms; the ms it took, or -1. */
static int64_t wait_status(struct h_env *e, const char *path, int want, int timeout_ms)
{
    int64_t t0 = h_now_ms();
    do {
        if (http_status(e, path, NULL, 0) == want)
            return h_now_ms() - t0;
        h_sleep_ms(20);
    } while (h_now_ms() - t0 < timeout_ms);
    return -1;
}

START_TEST(test_readyz_follows_redis)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    char body[512];
    ck_assert_int_eq(http_status(&e, "/readyz", body, sizeof body), 200);
    ck_assert_str_eq(body, "ready\n");
    ck_assert_int_eq(http_status(&e, "/healthz", NULL, 0), 200);
    ck_assert_int_eq(http_status(&e, "/no-such-page", NULL, 0), 404);

    ck_assert_int_eq(h_stop_pid(e.redis_pid, SIGTERM, 5000, "redis-server", NULL), 0);
    e.redis_pid = 0;
    int64_t down = wait_status(&e, "/readyz", 503, 2000);
    ck_assert_msg(down >= 0, "/readyz still not 503 2 s after redis-server stopped");
    printf("readyz: 503 %lld ms after Redis stopped\n", (long long)down);
    ck_assert_int_eq(http_status(&e, "/readyz", body, sizeof body), 503);
    ck_assert_msg(strstr(body, "Redis") != NULL, "503 without the reason: %s", body);
    ck_assert_int_eq(http_status(&e, "/healthz", NULL, 0), 200);
    ck_assert_int_eq(h_alive(e.rlockd_pid), 1);

    ck_assert_int_eq(h_redis_start(&e), 0);
    int64_t up = wait_status(&e, "/readyz", 200, 5000);
    ck_assert_msg(up >= 0, "/readyz still not 200 5 s after redis-server came back");
    printf("readyz: 200 %lld ms after Redis came back\n", (long long)up);
    h_env_stop(&e);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run sh -c cmd (within 60 s); its output goes to the env's file out. The exit status. */
static int run_shell(struct h_env *e, const char *cmd, const char *out)
{
    char path[320];
    h_env_path(e, out, path, sizeof path);
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    pid_t pid = h_spawn_io(argv, path, path);
    ck_assert_msg(pid > 0, "cannot run %s", cmd);
    int status = 0;
    ck_assert_msg(h_wait_exit(pid, 60000, &status) == 0, "%s did not finish in 60 s", cmd);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        h_print_tail(path, 40);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The ```yaml block of docs/operations.md that starts with "groups:", into the file path. */
static void write_rules(const char *path)
{
    char *doc = h_read_file(OPS_DOC);
    ck_assert_msg(doc != NULL, "cannot read %s", OPS_DOC);
    const char *start = strstr(doc, "```yaml\ngroups:");
    ck_assert_msg(start != NULL, "%s has no ```yaml block of alert rules", OPS_DOC);
    start += strlen("```yaml\n");
    const char *end = strstr(start, "\n```");
    ck_assert_ptr_nonnull(end);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s\n", (int)(end - start), start);
    fclose(f);
    free(doc);
}

START_TEST(test_latency_and_promtool)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct h_lost lost = {0};
    struct rlock_client *a = client(&f.e, "metrics-a", &lost);
    struct rlock_client *b = client(&f.e, "metrics-b", &lost);
    struct scrape s0, s1;
    scrape(&f.e, &s0);

    double pings = 0;
    for (int i = 0; i < PINGS; i++) {
        double t = now_s();
        h_assert_ok(a, rlock_ping(a, 5000, NULL));
        pings += now_s() - t;
    }
    struct rlock_lock *held = h_acquire_ok(a, "m-held", NULL);
    double waits = 0;
    for (int i = 0; i < WAITS; i++) {
        struct rlock_acquire_opts o = {.wait_ms = WAIT_MS};
        struct rlock_lock *l = NULL;
        double t = now_s();
        ck_assert_int_eq(rlock_acquire(b, "m-held", &o, 5000, &l), RLOCK_ERR_TIMEOUT);
        waits += now_s() - t;
    }
    h_assert_ok(a, rlock_release(held, 5000));
    scrape(&f.e, &s1);

    ck_assert_double_eq(delta(&s0, &s1, "rlockd_request_duration_seconds_count{op=\"ping\"}"),
                        PINGS);
    double ping_sum = delta(&s0, &s1, "rlockd_request_duration_seconds_sum{op=\"ping\"}");
    printf("%d pings: %.1f us in the daemon, %.1f us measured by the client\n", PINGS,
           ping_sum * 1e6, pings * 1e6);
    ck_assert_msg(ping_sum > 0, "100 pings summed to %g s: the histogram cannot see them",
                  ping_sum);
    ck_assert_msg(ping_sum <= pings, "the daemon timed %g s of pings the client saw take %g s",
                  ping_sum, pings);
    /* The pings are told apart from a millisecond: some fall at or below 500 us. */
    double fast = delta(&s0, &s1, "rlockd_request_duration_seconds_bucket{le=\"0.0005\",op=\"ping\"}");
    ck_assert_msg(fast > 0, "no ping within 500 us: %g", fast);
    double wait_sum = delta(&s0, &s1, "rlockd_request_duration_seconds_sum{op=\"acquire\"}");
    printf("%d waits of %d ms: %.1f ms in the daemon, %.1f ms measured by the client\n", WAITS,
           WAIT_MS, wait_sum * 1e3, waits * 1e3);
    ck_assert_msg(wait_sum <= waits + 0.01 && wait_sum * 2 >= waits,
                  "acquires timed %g s in the daemon, %g s by the client: not within 2x",
                  wait_sum, waits);
    ck_assert_double_eq(sample(&s1, "rlockd_build_info{commit=\"" RLOCKD_COMMIT "\","
                                    "version=\"" RLOCK_VERSION_TEXT "\"}"), 1);
    ck_assert_msg(sample(&s1, "process_resident_memory_bytes") > 1e6, "rss below 1 MB");
    ck_assert_msg(sample(&s1, "process_open_fds") >= 8, "fewer open fds than the daemon has");
    ck_assert_msg(sample(&s1, "process_max_fds") >= sample(&s1, "process_open_fds"), "max fds");
    ck_assert_msg(sample(&s1, "process_cpu_seconds_total") > 0, "no cpu time");
    double start = sample(&s1, "process_start_time_seconds");
    ck_assert_msg(start > (double)time(NULL) - 600 && start <= (double)time(NULL) + 1,
                  "start time %f is not this run's", start);
    scrape_free(&s0);
    scrape_free(&s1);

    /* promtool on a live scrape and on the documented alert rules. */
    char scraped[320], rules[320], cmd[1024];
    struct h_http_reply r;
    ck_assert_msg(h_http_get(f.e.metrics_sock, "/metrics", 5000, &r) == 0, "%s", r.error);
    h_env_path(&f.e, "scrape.prom", scraped, sizeof scraped);
    FILE *out = fopen(scraped, "w");
    ck_assert_ptr_nonnull(out);
    fputs(r.body, out);
    fclose(out);
    h_http_free(&r);
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s'", scraped);
    ck_assert_msg(run_shell(&f.e, cmd, "promtool-metrics.out") == 0,
                  "promtool check metrics found problems in /metrics (above)");
    h_env_path(&f.e, "rules.yml", rules, sizeof rules);
    write_rules(rules);
    snprintf(cmd, sizeof cmd, "promtool check rules '%s'", rules);
    ck_assert_msg(run_shell(&f.e, cmd, "promtool-rules.out") == 0,
                  "promtool check rules refused the rules of %s (above)", OPS_DOC);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_metrics_match_workload, test_readyz_follows_redis,
                            test_latency_and_promtool};
    return h_run_tests("metrics", 120, tests, H_LEN(tests));
}
