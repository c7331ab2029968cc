/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_holder.c — an Acquire that does not get its lock is told who holds it
 * (Response.holder; docs/protocol.md §6.1), through librlock's
 * rlock_last_holder and error message, and rlockctl run's refusal:
 *  - held_here: client A ("holder-a", owner 7) holds R; client B
 *    ("holder-b") tries it (NOT_ACQUIRED), then waits 300 ms (TIMEOUT): both
 *    name A's session id, client name and owner, the grant's wall time (within
 *    the moments around it) and a validity left; the message says so in
 *    words; rlock_acquire_all reports it too. A later failure of another kind
 *    forgets the holder;
 *  - client_role_sees: with [auth] tokens, a session of the client role sees
 *    the holder the same (and its session id does not let it end that
 *    session: PERMISSION_DENIED);
 *  - shared_first_and_count: two shared holders, an exclusive try: the first
 *    of them and a count of 2;
 *  - semaphore_queue: a semaphore try refused at once because a waiter of
 *    this daemon is queued names the holder of its permit;
 *  - held_by_copied_scripts: a key set by `SET key token NX PX 5000` directly
 *    in Redis (test_classic.c's names): held outside this daemon, foreign, ttl
 *    left in (0, 5000], for a try and for a wait;
 *  - held_by_other_daemon: a session of a second rlockd on the same Redis
 *    holds it: outside this daemon, not foreign, ttl left > 0;
 *  - rlockctl_says_who: `rlockctl run` refused prints the holder's session
 *    id, client name and owner, and exits 75.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define FOREIGN_TOKEN "0f7c1d2e-seed-app-token"
#define SEED_PX_MS 5000
#define WAIT_MS 300
#define OWNER_A 7

static struct rlock_client *named_client(struct h_env *e, const char *name)
{
    struct rlock_options o = {.client_name = name};
    return h_client_or_fail(e, &o);
}

/* Acquire R on c with wait_ms, asserting the failure want; the holder it reports into h. */
static void refused(struct rlock_client *c, const char *resource, uint32_t wait_ms,
                    enum rlock_err want, struct rlock_holder *h, char *msg, size_t len)
{
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = wait_ms};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(c, resource, &o, 0, &l);
    snprintf(msg, len, "%s", rlock_last_error()->message);
    ck_assert_msg(rc == want, "acquire of %s (wait %u): %s (%s), want %s", resource, wait_ms,
                  rlock_strerror(rc), msg, rlock_strerror(want));
    memset(h, 0x5a, sizeof *h);
    ck_assert_msg(rlock_last_holder(h) == 0, "no holder with %s: %s", rlock_strerror(rc), msg);
    printf("holder: %s\n", msg);
}

/* h names A's hold of R: session, client name, owner, a grant between t0 and t1. */
static void assert_holder_a(const struct rlock_holder *h, const char *msg, const char *sid,
                            uint64_t t0, uint64_t t1)
{
    ck_assert_int_eq(h->here, 1);
    ck_assert_str_eq(h->session_id, sid);
    ck_assert_str_eq(h->client_name, "holder-a");
    ck_assert_uint_eq(h->owner, OWNER_A);
    ck_assert_int_eq(h->shared, 0);
    ck_assert_uint_eq(h->limit, 0);
    ck_assert_uint_eq(h->holders, 1);
    /* The daemon's wall clock is this host's; the grant lies between the two reads, to the
     * millisecond it rounds to. */
    ck_assert_msg(h->since_ms + 1 >= t0 && h->since_ms <= t1 + 1,
                  "since_ms %llu outside [%llu, %llu]", (unsigned long long)h->since_ms,
                  (unsigned long long)t0, (unsigned long long)t1);
    ck_assert_msg(h->ttl_left_ms > 0 && h->ttl_left_ms <= 10000, "ttl_left_ms %u",
                  h->ttl_left_ms);
    char want[160];
    snprintf(want, sizeof want, "held by session %s (client \"holder-a\", owner %d)", sid,
             OWNER_A);
    ck_assert_msg(strstr(msg, want) != NULL, "message '%s' lacks '%s'", msg, want);
    ck_assert_msg(strstr(msg, " ms left") != NULL, "message '%s' lacks the time left", msg);
}

START_TEST(test_held_here)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "holder-a");
    struct rlock_client *b = named_client(&f.e, "holder-b");
    struct rlock_acquire_opts ao = {.ttl_ms = 10000, .owner = OWNER_A};
    uint64_t t0 = (uint64_t)h_wall_ms();
    struct rlock_lock *l = h_acquire_ok(a, "held-here", &ao);
    uint64_t t1 = (uint64_t)h_wall_ms();
    const char *sid = rlock_session_id(a);

    struct rlock_holder h;
    char msg[256];
    refused(b, "held-here", 0, RLOCK_ERR_NOT_ACQUIRED, &h, msg, sizeof msg);
    assert_holder_a(&h, msg, sid, t0, t1);
    ck_assert_msg(strncmp(msg, "NOT_ACQUIRED: ", 14) == 0, "message '%s'", msg);

    refused(b, "held-here", WAIT_MS, RLOCK_ERR_TIMEOUT, &h, msg, sizeof msg);
    assert_holder_a(&h, msg, sid, t0, t1);
    ck_assert_msg(strncmp(msg, "TIMEOUT: ", 9) == 0, "message '%s'", msg);

    /* Another owner of A's own session is told the same. */
    struct rlock_acquire_opts other = {.ttl_ms = 10000, .owner = OWNER_A + 1};
    struct rlock_lock *l2 = NULL;
    ck_assert_int_eq(rlock_acquire(a, "held-here", &other, 0, &l2), RLOCK_ERR_NOT_ACQUIRED);
    ck_assert_int_eq(rlock_last_holder(&h), 0);
    ck_assert_str_eq(h.session_id, sid);
    ck_assert_uint_eq(h.owner, OWNER_A);

    /* rlock_acquire_all keeps it past the release of what it took before. */
    const char *both[] = {"a-free-one", "held-here"};
    struct rlock_lock *got[2] = {NULL, NULL};
    ck_assert_int_eq(rlock_acquire_all(b, both, 2, NULL, 0, got), RLOCK_ERR_NOT_ACQUIRED);
    ck_assert_int_eq(rlock_last_holder(&h), 0);
    ck_assert_str_eq(h.session_id, sid);

    /* A failure of another kind forgets it. */
    ck_assert_int_eq(rlock_acquire(b, "", NULL, 0, &l2), RLOCK_ERR_ARG);
    ck_assert_int_eq(rlock_last_holder(&h), -1);

    rlock_lock_free(l);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_shared_first_and_count)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "holder-a");
    struct rlock_client *a2 = named_client(&f.e, "holder-a2");
    struct rlock_client *b = named_client(&f.e, "holder-b");
    struct rlock_acquire_opts so = {.ttl_ms = 10000, .shared = 1, .owner = OWNER_A};
    struct rlock_lock *l1 = h_acquire_ok(a, "shared-held", &so);
    struct rlock_lock *l2 = h_acquire_ok(a2, "shared-held", &so);

    struct rlock_holder h;
    char msg[256];
    refused(b, "shared-held", 0, RLOCK_ERR_NOT_ACQUIRED, &h, msg, sizeof msg);
    ck_assert_int_eq(h.here, 1);
    ck_assert_int_eq(h.shared, 1);
    ck_assert_uint_eq(h.holders, 2);
    ck_assert_msg(strcmp(h.session_id, rlock_session_id(a)) == 0 ||
                      strcmp(h.session_id, rlock_session_id(a2)) == 0,
                  "session %s holds nothing", h.session_id);
    ck_assert_msg(strstr(msg, ", shared, first of 2 sessions here)") != NULL, "message '%s'",
                  msg);

    rlock_lock_free(l1);
    rlock_lock_free(l2);
    rlock_close(a);
    rlock_close(a2);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

#define CLIENT_TOKEN_A "cli-a-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
#define CLIENT_TOKEN_B "cli-b-0a1b2c3d4e5f60718293a4b5c6d7e8f9"

/* With [auth] tokens, a session of the client role is told who holds the lock too. */
START_TEST(test_client_role_sees)
{
    struct h_fixture f;
    h_fixture_start_env(&f, "[auth]\ntokens = client " CLIENT_TOKEN_A ", client " CLIENT_TOKEN_B
                            "\n");
    struct rlock_options oa = {.client_name = "holder-a", .auth_token = CLIENT_TOKEN_A};
    struct rlock_options ob = {.client_name = "holder-b", .auth_token = CLIENT_TOKEN_B};
    struct rlock_client *a = h_client_or_fail(&f.e, &oa);
    struct rlock_client *b = h_client_or_fail(&f.e, &ob);
    struct rlock_acquire_opts ao = {.ttl_ms = 10000, .owner = OWNER_A};
    uint64_t t0 = (uint64_t)h_wall_ms();
    struct rlock_lock *l = h_acquire_ok(a, "client-role", &ao);
    uint64_t t1 = (uint64_t)h_wall_ms();

    struct rlock_holder h;
    char msg[256];
    refused(b, "client-role", 0, RLOCK_ERR_NOT_ACQUIRED, &h, msg, sizeof msg);
    assert_holder_a(&h, msg, rlock_session_id(a), t0, t1);
    /* The session id opens nothing: ending that session needs the admin role. */
    ck_assert_int_eq(rlock_kill_session(b, h.session_id, 0, NULL), RLOCK_ERR_PERMISSION_DENIED);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);

    rlock_lock_free(l);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/* A semaphore's waiter: acquires one permit of "sem-held" (limit 1), waiting up to 10 s. */
struct sem_wait {
    struct rlock_client *c;
    struct rlock_lock *l;
    enum rlock_err rc;
};

static void *sem_wait_fn(void *arg)
{
    struct sem_wait *w = arg;
    struct rlock_acquire_opts o = {.ttl_ms = 10000, .wait_ms = 10000, .limit = 1};
    w->rc = rlock_acquire(w->c, "sem-held", &o, 0, &w->l);
    return NULL;
}

START_TEST(test_semaphore_queue)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "holder-a");
    struct rlock_client *b = named_client(&f.e, "holder-b");
    struct sem_wait w = {.c = named_client(&f.e, "holder-w")};
    struct rlock_acquire_opts so = {.ttl_ms = 10000, .limit = 1, .owner = OWNER_A};
    struct rlock_lock *l = h_acquire_ok(a, "sem-held", &so);
    struct h_thread t;
    h_thread_start(&t, sem_wait_fn, &w);
    ck_assert_msg(h_wait_stats(&f.e, 1, 1, 10000, NULL) == 0, "the semaphore's waiter");

    /* A try while the queue waits is refused before Redis: A still holds the permit. */
    struct rlock_acquire_opts try_o = {.ttl_ms = 10000, .limit = 1};
    struct rlock_lock *none = NULL;
    ck_assert_int_eq(rlock_acquire(b, "sem-held", &try_o, 0, &none), RLOCK_ERR_NOT_ACQUIRED);
    struct rlock_holder h;
    ck_assert_int_eq(rlock_last_holder(&h), 0);
    ck_assert_int_eq(h.here, 1);
    ck_assert_str_eq(h.session_id, rlock_session_id(a));
    ck_assert_uint_eq(h.limit, 1);
    ck_assert_uint_eq(h.permits, 1);
    ck_assert_uint_eq(h.holders, 1);
    const char *msg = rlock_last_error()->message;
    printf("holder: %s\n", msg);
    ck_assert_msg(strstr(msg, ", 1 of 1 permits)") != NULL, "message '%s'", msg);

    h_assert_ok(a, rlock_release(l, 0));
    h_thread_join(&t, h_now_ms() + 15000, "the semaphore's waiter did not finish");
    ck_assert_int_eq(w.rc, RLOCK_OK);
    rlock_lock_free(w.l);
    rlock_lock_free(l);
    rlock_close(w.c);
    rlock_close(a);
    rlock_close(b);
    h_fixture_stop(&f);
}
END_TEST

/* h says: held outside this daemon, foreign or not, with a ttl left in (0, max_ms]. */
static void assert_outside(const struct rlock_holder *h, const char *msg, int foreign,
                           uint32_t max_ms)
{
    ck_assert_int_eq(h->here, 0);
    ck_assert_int_eq(h->foreign, foreign);
    ck_assert_str_eq(h->session_id, "");
    ck_assert_msg(h->ttl_left_ms > 0 && h->ttl_left_ms <= max_ms, "ttl_left_ms %u, want (0, %u]",
                  h->ttl_left_ms, max_ms);
    char want[96];
    snprintf(want, sizeof want, ", ttl left %u ms", h->ttl_left_ms);
    ck_assert_msg(strstr(msg, "held outside this daemon") != NULL && strstr(msg, want) != NULL,
                  "message '%s' lacks 'held outside this daemon' or '%s'", msg, want);
}

START_TEST(test_held_by_copied_scripts)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    char key[256];
    h_lock_key(&f.e, "seed-holder", key, sizeof key);
    redisReply *rep = redisCommand(f.r, "SET %s %s NX PX %d", key, FOREIGN_TOKEN, SEED_PX_MS);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);

    struct rlock_holder h;
    char msg[256];
    refused(f.c, "seed-holder", 0, RLOCK_ERR_NOT_ACQUIRED, &h, msg, sizeof msg);
    assert_outside(&h, msg, 1, SEED_PX_MS);
    uint32_t first = h.ttl_left_ms;
    refused(f.c, "seed-holder", WAIT_MS, RLOCK_ERR_TIMEOUT, &h, msg, sizeof msg);
    assert_outside(&h, msg, 1, SEED_PX_MS);
    ck_assert_msg(h.ttl_left_ms < first, "ttl left %u after the wait, %u before", h.ttl_left_ms,
                  first);
    h_assert_key_token(f.r, key, FOREIGN_TOKEN);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_held_by_other_daemon)
{
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct h_env peer;
    ck_assert_int_eq(h_env_start_peer(&peer, &f.e, NULL), 0);
    struct rlock_client *p = h_client_or_fail(&peer, NULL);
    struct rlock_acquire_opts o = {.ttl_ms = 8000};
    struct rlock_lock *l = h_acquire_ok(p, "peer-held", &o);

    struct rlock_holder h;
    char msg[256];
    refused(f.c, "peer-held", 0, RLOCK_ERR_NOT_ACQUIRED, &h, msg, sizeof msg);
    assert_outside(&h, msg, 0, 8000);
    refused(f.c, "peer-held", WAIT_MS, RLOCK_ERR_TIMEOUT, &h, msg, sizeof msg);
    assert_outside(&h, msg, 0, 8000);

    rlock_lock_free(l);
    rlock_close(p);
    h_env_stop(&peer);
    h_fixture_stop(&f);
}
END_TEST

START_TEST(test_rlockctl_says_who)
{
    struct h_fixture f;
    h_fixture_start_env(&f, NULL);
    struct rlock_client *a = named_client(&f.e, "holder-a");
    struct rlock_acquire_opts ao = {.ttl_ms = 10000, .owner = OWNER_A};
    struct rlock_lock *l = h_acquire_ok(a, "ctl-held", &ao);

    char bin[512], err[400];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&f.e, "ctl.err", err, sizeof err);
    char *argv[] = {bin, "run", "--server", f.e.rlockd_addr, "--name", "holder-ctl",
                    "ctl-held", "--", "true", NULL};
    pid_t pid = h_spawn_io(argv, NULL, err);
    ck_assert_int_gt(pid, 0);
    int status = 0;
    ck_assert_msg(h_wait_exit(pid, 10000, &status) == 0, "rlockctl run did not exit");
    char *text = h_read_file(err);
    printf("holder: rlockctl said: %s", text ? text : "(nothing)\n");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 75, "rlockctl run: status %d",
                  status);
    char want[160];
    snprintf(want, sizeof want, "held by session %s (client \"holder-a\", owner %d)",
             rlock_session_id(a), OWNER_A);
    ck_assert_msg(text != NULL && strstr(text, "rlockctl: run: lock 'ctl-held' not acquired") &&
                      strstr(text, want),
                  "rlockctl's message lacks '%s'", want);
    free(text);

    rlock_lock_free(l);
    rlock_close(a);
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_held_here, test_client_role_sees, test_shared_first_and_count,
                            test_semaphore_queue,
                            test_held_by_copied_scripts, test_held_by_other_daemon,
                            test_rlockctl_says_who};
    return h_run_tests("holder", 60, tests, H_LEN(tests));
}
