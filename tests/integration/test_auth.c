/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_auth.c — rlockd's own Redis connections: password AUTH with SELECT of
 * another database, an ACL user with its password, and a wrong password,
 * which must give clients UNAVAILABLE and a clear line in the log.
 */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define PASSWORD "s3cret-pw"

/* Replace the env's rlockd config by the base one plus extra, and restart rlockd. */
static void rewrite_conf(struct h_env *e, const char *extra)
{
    char conf[1536];
    /* The metrics endpoint stays on the env's socket: the default port may be taken. */
    snprintf(conf, sizeof conf,
             "[server]\nlisten = %s\n[redis]\naddress = unix:%s\nkey_prefix = %s\n%s"
             "[metrics]\nlisten = unix:%s\n",
             e->rlockd_addr, e->redis_sock, e->prefix, extra, e->metrics_sock);
    FILE *f = fopen(e->conf, "w");
    ck_assert_ptr_nonnull(f);
    fputs(conf, f);
    fclose(f);
}

/* Free what a test case used and stop its env, which must still be alive. */
static void finish(struct h_env *e, struct rlock_client *c, redisContext *r, struct rlock_lock *l)
{
    rlock_lock_free(l);
    rlock_close(c);
    redisFree(r);
    h_assert_env_alive(e);
    h_env_stop(e);
}

static int count_substr(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

START_TEST(test_auth_password_select)
{
    struct h_env e;
    ck_assert_int_eq(h_env_start_auth(&e, PASSWORD, "[redis]\ndatabase = 3\n"), 0);
    redisContext *r = h_redis(&e);
    ck_assert_ptr_nonnull(r);
    struct rlock_client *c = h_client_or_fail(&e, NULL);
    struct rlock_lock *l = h_acquire_ok(c, "db3", NULL);
    char key[256];
    h_lock_key(&e, "db3", key, sizeof key);

    ck_assert_int_eq(h_key_exists(r, key), 0); /* not in database 0 */
    redisReply *rep = redisCommand(r, "SELECT 3");
    ck_assert_ptr_nonnull(rep);
    freeReplyObject(rep);
    h_assert_key_token(r, key, rlock_lock_token(l));
    h_assert_ok(c, rlock_release(l, 0));
    ck_assert_int_eq(h_key_exists(r, key), 0);
    printf("auth: password AUTH + SELECT 3 served a lock in database 3\n");

    finish(&e, c, r, l);
}
END_TEST

START_TEST(test_auth_acl_user)
{
    struct h_env e;
    ck_assert_int_eq(h_env_start_auth(&e, PASSWORD, NULL), 0);
    redisContext *r = h_redis(&e);
    ck_assert_ptr_nonnull(r);
    redisReply *rep = redisCommand(r, "ACL SETUSER locker on >locker-pw ~* &* +@all");
    ck_assert_msg(rep && rep->type == REDIS_REPLY_STATUS, "ACL SETUSER failed");
    freeReplyObject(rep);

    ck_assert_int_eq(h_rlockd_signal(&e, SIGTERM), 0);
    rewrite_conf(&e, "user = locker\npassword = locker-pw\n");
    ck_assert_int_eq(h_rlockd_start(&e), 0);

    struct rlock_client *c = h_client_or_fail(&e, NULL);
    struct rlock_lock *l = h_acquire_ok(c, "acl", NULL);
    rep = redisCommand(r, "CLIENT LIST");
    ck_assert_ptr_nonnull(rep);
    int as_locker = count_substr(rep->str, "user=locker");
    freeReplyObject(rep);
    printf("auth: %d connection(s) authenticated as ACL user locker\n", as_locker);
    ck_assert_msg(as_locker >= 1, "no Redis connection uses the ACL user");
    h_assert_ok(c, rlock_release(l, 0));

    finish(&e, c, r, l);
}
END_TEST

START_TEST(test_auth_wrong_password)
{
    struct h_env e;
    ck_assert_int_eq(h_env_start_auth(&e, PASSWORD, NULL), 0);
    ck_assert_int_eq(h_rlockd_signal(&e, SIGTERM), 0);
    rewrite_conf(&e, "password = not-the-password\n");
    char log[320], bin[512];
    h_env_path(&e, "rlockd.log", log, sizeof log);
    h_bin("rlockd", bin, sizeof bin);
    char *argv[] = {bin, "-c", e.conf, NULL};
    e.rlockd_pid = h_spawn_io(argv, log, log);
    ck_assert_int_gt(e.rlockd_pid, 0);

    /* Sessions still open; locks are refused promptly, not hung. */
    struct rlock_client *c = NULL;
    for (int i = 0; i < 200 && c == NULL; i++) {
        char err[256];
        if (rlock_connect(e.rlockd_addr, NULL, &c, err, sizeof err) != RLOCK_OK)
            h_sleep_ms(25);
    }
    ck_assert_msg(c != NULL, "rlockd with a wrong Redis password does not accept sessions");
    struct rlock_lock *l = NULL;
    int64_t t0 = h_now_ms();
    enum rlock_err err = rlock_acquire(c, "nope", NULL, 0, &l);
    int64_t took = h_now_ms() - t0;
    printf("auth: wrong password: acquire -> %s in %lld ms\n", rlock_strerror(err),
           (long long)took);
    ck_assert_int_eq(err, RLOCK_ERR_UNAVAILABLE);
    /* Prompt, not the client's 5 s deadline (DEADLINE, not UNAVAILABLE, after a hang). */
    ck_assert_msg(took < 3000, "acquire took %lld ms", (long long)took);
    rlock_close(c);

    char *text = h_read_file(log);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "AUTH failed") != NULL, "rlockd.log does not say AUTH failed");
    free(text);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_auth_password_select, test_auth_acl_user,
                            test_auth_wrong_password};
    return h_run_tests("auth", 60, tests, H_LEN(tests));
}
