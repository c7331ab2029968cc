/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_fixture.c — the pieces test bodies share: the usual env + client +
 * hiredis fixture, lock and key assertions, rlock-holder as a child, test
 * threads with a deadline on their end, the Check suite builder, and waits on
 * the daemon's log.
 *
 * Everything here asserts (fails the running test) instead of returning an
 * error: it is called from test bodies only.
 */
#include "harness.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* --- fixture ------------------------------------------------------------- */

struct rlock_client *h_client_or_fail(struct h_env *e, const struct rlock_options *opts)
{
    struct rlock_client *c = h_client(e, opts);
    ck_assert_msg(c != NULL, "cannot connect a client to %s", e->rlockd_addr);
    return c;
}

void h_fixture_start_env(struct h_fixture *f, const char *extra_ini)
{
    memset(f, 0, sizeof *f);
    h_env_start_or_fail(&f->e, extra_ini);
    f->r = h_redis(&f->e);
    ck_assert_msg(f->r != NULL, "cannot connect hiredis to %s", f->e.redis_sock);
}

void h_fixture_start(struct h_fixture *f, const char *extra_ini)
{
    h_fixture_start_env(f, extra_ini);
    struct rlock_options o = { .on_lost = h_lost_cb, .on_lost_arg = &f->lost };
    f->c = h_client_or_fail(&f->e, &o);
}

void h_fixture_start_proxied(struct h_fixture *f, const char *extra_ini)
{
    memset(f, 0, sizeof *f);
    ck_assert_msg(h_env_start_proxied(&f->e, extra_ini) == 0,
                  "could not start redis-server + proxy + rlockd");
    f->r = h_redis(&f->e);
    ck_assert_msg(f->r != NULL, "cannot connect hiredis to %s", f->e.redis_sock);
    struct rlock_options o = { .on_lost = h_lost_cb, .on_lost_arg = &f->lost };
    f->c = h_client_or_fail(&f->e, &o);
}

void h_fixture_stop(struct h_fixture *f)
{
    h_assert_env_alive(&f->e);
    if (f->c)
        rlock_close(f->c);
    f->c = NULL;
    redisFree(f->r);
    f->r = NULL;
    h_env_stop(&f->e);
}

/* --- locks and keys ------------------------------------------------------ */

struct rlock_lock *h_acquire_ok(struct rlock_client *c, const char *resource,
                                const struct rlock_acquire_opts *o)
{
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, resource, o, 0, &l));
    ck_assert_ptr_nonnull(l);
    return l;
}

void h_assert_key_token(redisContext *r, const char *key, const char *token)
{
    char val[256] = "";
    int got = h_get(r, key, val, sizeof val);
    ck_assert_msg(got == 1 && strcmp(val, token) == 0,
                  "key %s holds \"%s\" (GET returned %d), not the token %s", key, val, got, token);
}

void h_release_gone(struct h_fixture *f, struct rlock_client *c, struct rlock_lock *l)
{
    char key[512];
    h_lock_key(&f->e, rlock_lock_resource(l), key, sizeof key);
    h_assert_ok(c, rlock_release(l, 0));
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_RELEASED);
    ck_assert_msg(h_key_exists(f->r, key) == 0, "key %s still exists after the release", key);
}

/* --- rlock-holder -------------------------------------------------------- */

void h_holder_start(struct h_holder *h, struct h_env *e, const char *resource, uint32_t ttl_ms,
                    int held_within_ms)
{
    h_holder_start_session(h, e, resource, ttl_ms, 0, held_within_ms);
}

void h_holder_start_session(struct h_holder *h, struct h_env *e, const char *resource,
                            uint32_t ttl_ms, uint32_t session_timeout_ms, int held_within_ms)
{
    char bin[512], ttl[16], session[16], res[256];
    memset(h, 0, sizeof *h);
    h_bin("rlock-holder", bin, sizeof bin);
    h_env_path(e, "holder.out", h->out, sizeof h->out);
    snprintf(res, sizeof res, "%s", resource);
    /* The arguments are positional: a session timeout needs the ttl before it (0 = default). */
    snprintf(ttl, sizeof ttl, "%" PRIu32, ttl_ms);
    snprintf(session, sizeof session, "%" PRIu32, session_timeout_ms);
    char *argv[] = { bin, e->rlockd_addr, res, ttl_ms || session_timeout_ms ? ttl : NULL,
                     session_timeout_ms ? session : NULL, NULL };
    h->pid = h_spawn(argv, h->out);
    ck_assert_int_gt(h->pid, 0);
    int held = h_wait_line(h->out, "HELD ", h->pid, held_within_ms, h->line, sizeof h->line);
    ck_assert_msg(held == 0, "rlock-holder did not report HELD within %d ms", held_within_ms);
    ck_assert_msg(sscanf(h->line, "HELD %" SCNu64 " %127s", &h->fence, h->token) == 2,
                  "rlock-holder said \"%s\"", h->line);
}

int64_t h_holder_kill9(struct h_holder *h)
{
    /* Read before the kill: whatever the kill starts cannot start earlier, however long this
     * process is kept off the CPU between the kill and the clock (a loaded run saw a lock_delay
     * "3 ms early" when the clock was read after the kill). */
    int64_t t_kill = h_now_ms();
    ck_assert_int_eq(kill(h->pid, SIGKILL), 0);
    int status;
    ck_assert_msg(h_wait_exit(h->pid, 5000, &status) == 0,
                  "rlock-holder (pid %d) not reaped within 5 s of kill -9", (int)h->pid);
    return t_kill;
}

/* --- stopping rlockd, and its counters ----------------------------------- */

/* The state letter of pid in /proc/PID/stat ('R', 'S', 'T', ...), or 0. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return p != NULL && p[1] == ' ' ? p[2] : 0;
}

void h_rlockd_sigstop(struct h_env *e)
{
    ck_assert_int_gt(e->rlockd_pid, 0);
    ck_assert_int_eq(kill(e->rlockd_pid, SIGSTOP), 0);
    int64_t deadline = h_now_ms() + 2000;
    char st;
    while ((st = proc_state(e->rlockd_pid)) != 'T' && h_now_ms() < deadline)
        h_sleep_ms(1);
    if (st != 'T')
        kill(e->rlockd_pid, SIGCONT);
    ck_assert_msg(st == 'T', "rlockd (pid %d) not stopped 2 s after SIGSTOP (state %c)",
                  (int)e->rlockd_pid, st ? st : '?');
}

void h_rlockd_sigcont(struct h_env *e)
{
    ck_assert_int_eq(kill(e->rlockd_pid, SIGCONT), 0);
}

/* Stats through a fresh client; RLOCK_OK or the error. */
static enum rlock_err stats_fresh(struct h_env *e, struct rlock_stats *out)
{
    struct rlock_options o = { .client_name = "itest-stats", .connect_timeout_ms = 5000 };
    struct rlock_client *c = h_client(e, &o);
    if (c == NULL)
        return RLOCK_ERR_CONNECT;
    enum rlock_err rc = rlock_stats(c, 5000, out);
    rlock_close(c);
    return rc;
}

void h_stats_or_fail(struct h_env *e, struct rlock_stats *out)
{
    enum rlock_err rc = stats_fresh(e, out);
    ck_assert_msg(rc == RLOCK_OK, "Stats from rlockd: %s", rlock_strerror(rc));
}

int h_wait_stats(struct h_env *e, uint64_t held, uint64_t waiters, int timeout_ms,
                 struct rlock_stats *last)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    struct rlock_stats st;
    for (;;) {
        memset(&st, 0, sizeof st);
        enum rlock_err rc = stats_fresh(e, &st);
        if (last)
            *last = st;
        if (rc == RLOCK_OK && st.held_locks == held && st.waiters == waiters)
            return 0;
        if (h_now_ms() >= deadline)
            return -1;
        h_sleep_ms(20);
    }
}

/* --- threads ------------------------------------------------------------- */

static void *thread_main(void *arg)
{
    struct h_thread *t = arg;
    void *ret = t->fn(t->arg);
    atomic_store(&t->done, 1);
    return ret;
}

void h_thread_start(struct h_thread *t, void *(*fn)(void *), void *arg)
{
    t->fn = fn;
    t->arg = arg;
    atomic_init(&t->done, 0);
    ck_assert_int_eq(pthread_create(&t->id, NULL, thread_main, t), 0);
}

int h_thread_done(struct h_thread *t)
{
    return atomic_load(&t->done);
}

static int thread_done(void *arg)
{
    return h_thread_done(arg);
}

void h_thread_join(struct h_thread *t, int64_t deadline, const char *fail_msg)
{
    int64_t left = deadline - h_now_ms();
    ck_assert_msg(h_wait_for(thread_done, t, left > 0 ? (int)left : 0), "%s", fail_msg);
    pthread_join(t->id, NULL);
}

/* --- a waiter on its own thread ------------------------------------------ */

#define H_WAITER_RETRY_MS 20

static void *waiter_main(void *arg)
{
    struct h_waiter *w = arg;
    int64_t end = w->start_ms + w->wait_ms;
    for (;;) {
        int64_t left = end - h_now_ms();
        struct rlock_acquire_opts o = { .ttl_ms = w->ttl_ms,
                                        .wait_ms = left > 0 ? (uint32_t)left : 0 };
        w->rc = rlock_acquire(w->c, w->resource, &o, 0, &w->l);
        if (w->rc == RLOCK_OK) {
            w->granted_ms = h_now_ms();
            w->granted_wall_ms = h_wall_ms();
            break;
        }
        if (w->rc != RLOCK_ERR_UNAVAILABLE || left <= 0)
            break;
        w->unavailable++;
        h_sleep_ms(H_WAITER_RETRY_MS);
    }
    return NULL;
}

void h_waiter_start(struct h_waiter *w, struct h_env *e, const char *resource, uint32_t ttl_ms,
                    int wait_ms)
{
    memset(w, 0, sizeof *w);
    struct rlock_options o = { .client_name = "itest-waiter" };
    w->c = h_client_or_fail(e, &o);
    w->resource = resource;
    w->ttl_ms = ttl_ms;
    w->wait_ms = wait_ms;
    w->start_ms = h_now_ms();
    h_thread_start(&w->t, waiter_main, w);
}

enum rlock_err h_waiter_join(struct h_waiter *w)
{
    h_thread_join(&w->t, w->start_ms + w->wait_ms + 10000,
                  "the waiting client's acquire did not return 10 s after its wait");
    return w->rc;
}

void h_waiter_close(struct h_waiter *w)
{
    if (w->l != NULL) {
        if (rlock_lock_state(w->l) == RLOCK_HELD)
            rlock_release(w->l, 0);
        rlock_lock_free(w->l);
        w->l = NULL;
    }
    rlock_close(w->c);
    w->c = NULL;
}

/* --- suites -------------------------------------------------------------- */

TCase *h_tcase(Suite *s, const char *name, int timeout_s)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    suite_add_tcase(s, tc);
    return tc;
}

int h_run_tests(const char *name, int timeout_s, const TTest *const tests[], size_t n)
{
    Suite *s = suite_create(name);
    for (size_t i = 0; i < n; i++) {
        const char *tc_name = tests[i]->name;
        if (strncmp(tc_name, "test_", 5) == 0)
            tc_name += 5;
        tcase_add_test(h_tcase(s, tc_name, timeout_s), tests[i]);
    }
    return h_run_suite(s);
}

/* --- the daemon's log ---------------------------------------------------- */

size_t h_log_size(const struct h_env *e)
{
    char path[320];
    struct stat st;
    if (stat(h_env_path(e, "rlockd.log", path, sizeof path), &st) != 0)
        return 0;
    return (size_t)st.st_size;
}

char *h_log_wait_from(const struct h_env *e, size_t offset, const char *needle, int timeout_ms)
{
    char path[320];
    h_env_path(e, "rlockd.log", path, sizeof path);
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        char *text = h_read_file(path);
        if (text != NULL && strlen(text) >= offset && strstr(text + offset, needle) != NULL) {
            char *tail = strdup(text + offset);
            free(text);
            ck_assert_ptr_nonnull(tail);
            return tail;
        }
        free(text);
        if (h_now_ms() > deadline) {
            h_print_tail(path, 30);
            ck_abort_msg("rlockd.log: no \"%s\" within %d ms", needle, timeout_ms);
        }
        h_sleep_ms(20);
    }
}
