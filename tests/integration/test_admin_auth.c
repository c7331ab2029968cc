/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_admin_auth.c — clients' tokens ([auth]): who gets in, who may send
 * the admin requests, what is counted, and that no token text ever shows.
 *
 *  refusals     no token, a wrong token (librlock, a raw Hello, rlockctl):
 *               UNAUTHENTICATED and the connection closed; a client token:
 *               locks work, admin requests get PERMISSION_DENIED (exit 77);
 *               admin tokens (file, inline, RLOCK_TOKEN_FILE) work; every
 *               refusal counted; no token in the log, in --dump-config or in
 *               rlockctl's output
 *  token_file   a token file others can read is refused by --test-config,
 *               with the file and the reason, without the token
 *  reload, reload_sessions, turned_on   sessions follow the tokens of a reload
 *  credentials  systemd credentials ($CREDENTIALS_DIRECTORY: tokens, redis-password) read
 *               by the daemon and by an unprivileged uid; a configuration that shows secrets
 *               to other users is warned about
 *  quota        quotas per token (max_locks, max_waiters): shared by the sessions of a
 *               token, from the entry or the role's default, followed at reload
 */
#include "admin_ctl.h"
#include "harness.h"
#include "harness_raw.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ADMIN_TOKEN "adm-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
#define CLIENT_TOKEN "cli-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
#define INLINE_TOKEN "inl-5e4d3c2b1a09f8e7d6c5b4a392817060"
#define WRONG_TOKEN "bad-77665544332211009988776655443322"

/* A private directory for the token files, outside the env (it must exist before rlockd). */
struct tokdir {
    char dir[256];
    char daemon[320]; /* the daemon's token file */
    char admin[320];  /* rlockctl's, one token each */
    char client[320];
    char wrong[320];
};

static void write_secret(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, mode), 0);
}

static void tokdir_make(struct tokdir *t)
{
    const char *base = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/rlock-tokens.XXXXXX", base && base[0] ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(t->dir));
    snprintf(t->daemon, sizeof t->daemon, "%s/tokens", t->dir);
    snprintf(t->admin, sizeof t->admin, "%s/admin", t->dir);
    snprintf(t->client, sizeof t->client, "%s/client", t->dir);
    snprintf(t->wrong, sizeof t->wrong, "%s/wrong", t->dir);
    write_secret(t->daemon,
                 "# tokens of the admin tests\n"
                 "admin  " ADMIN_TOKEN "\n"
                 "\n"
                 "client " CLIENT_TOKEN "\n",
                 0600);
    write_secret(t->admin, "admin " ADMIN_TOKEN "\n", 0600);
    write_secret(t->client, CLIENT_TOKEN "\n", 0600);
    write_secret(t->wrong, WRONG_TOKEN "\n", 0600);
}

/* 1 when text shows any of the tokens. */
static int shows_token(const char *text)
{
    static const char *const all[] = {ADMIN_TOKEN, CLIENT_TOKEN, INLINE_TOKEN, WRONG_TOKEN};
    for (size_t i = 0; i < H_LEN(all); i++)
        if (strstr(text, all[i]) != NULL)
            return 1;
    return 0;
}

static struct rlock_client *connect_with(struct h_env *e, const char *token, enum rlock_err *rc,
                                         char *err, size_t len)
{
    struct rlock_client *c = NULL;
    struct rlock_options o = {.client_name = "auth-test", .auth_token = token};
    *rc = rlock_connect(e->rlockd_addr, &o, &c, err, len);
    return c;
}

static void server_info_or_fail(struct rlock_client *admin, struct rlock_server_info *in)
{
    h_assert_ok(admin, rlock_server_info(admin, 0, in));
}

/* A raw Hello without a token: UNAUTHENTICATED, then the connection closes. */
static void raw_hello_refused(struct h_env *e)
{
    struct h_raw raw;
    h_raw_open(&raw, e);
    Rlock__V1__Hello h = RLOCK__V1__HELLO__INIT;
    h.client_name = "raw-no-token";
    Rlock__V1__Request req = RLOCK__V1__REQUEST__INIT;
    req.id = 1;
    req.body_case = RLOCK__V1__REQUEST__BODY_HELLO;
    req.hello = &h;
    ck_assert_int_eq(h_raw_send(&raw, &req), 0);
    Rlock__V1__ServerMessage *m = NULL;
    ck_assert_int_eq(h_raw_read(&raw, h_now_ms() + 5000, &m), 1);
    const Rlock__V1__Response *r = h_raw_response(m);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->id, 1);
    ck_assert_int_eq(r->status, RLOCK__V1__STATUS__STATUS_UNAUTHENTICATED);
    h_raw_free(m);
    ck_assert_int_eq(h_raw_read(&raw, h_now_ms() + 5000, &m), 0); /* EOF */
    h_raw_close(&raw);
}

static int count_session(const struct rlock_session_entry *e, void *arg)
{
    (void)e;
    (*(int *)arg)++;
    return 0;
}

START_TEST(test_auth_refusals)
{
    struct tokdir t;
    tokdir_make(&t);
    char ini[1024];
    snprintf(ini, sizeof ini, "[auth]\ntoken_file = %s\ntokens = admin " INLINE_TOKEN "\n",
             t.daemon);
    struct h_fixture f;
    h_fixture_start_env(&f, ini);

    /* An admin client; the harness's own probe (no token) may have been refused already. */
    char err[512];
    enum rlock_err rc;
    struct rlock_client *admin = connect_with(&f.e, ADMIN_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "admin token refused: %s", err);
    struct rlock_server_info in0, in1;
    for (int i = 0; i < 500; i++) {
        server_info_or_fail(admin, &in0);
        if (in0.redis_up)
            break;
        h_sleep_ms(10);
    }
    ck_assert(in0.redis_up && in0.auth);
    ck_assert_uint_eq(in0.admin_tokens, 2);
    ck_assert_uint_eq(in0.client_tokens, 1);

    /* 1-2: no token, a wrong token. */
    ck_assert_ptr_null(connect_with(&f.e, NULL, &rc, err, sizeof err));
    ck_assert_int_eq(rc, RLOCK_ERR_UNAUTHENTICATED);
    ck_assert_msg(strstr(err, "requires an auth token") != NULL, "%s", err);
    ck_assert_ptr_null(connect_with(&f.e, WRONG_TOKEN, &rc, err, sizeof err));
    ck_assert_int_eq(rc, RLOCK_ERR_UNAUTHENTICATED);
    ck_assert_msg(strstr(err, "not valid") != NULL, "%s", err);
    ck_assert(!shows_token(err));
    raw_hello_refused(&f.e);
    char *out = NULL, *cerr = NULL;
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, &cerr, "ping", NULL), 77);
    ck_assert_ptr_nonnull(strstr(cerr, "UNAUTHENTICATED"));
    free(out);
    free(cerr);
    ck_assert_int_eq(actl_run(&f.e, t.wrong, &out, &cerr, "sessions", NULL), 77);
    ck_assert(!shows_token(cerr) && !shows_token(out));
    free(out);
    free(cerr);
    const int refused_hellos = 5;

    /* 3: a client token: locks yes, admin requests no (the session goes on). */
    struct rlock_client *client = connect_with(&f.e, CLIENT_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "client token refused: %s", err);
    struct rlock_lock *l = h_acquire_ok(client, "auth/x", NULL);
    char next[RLOCK_CURSOR_BYTES];
    ck_assert_int_eq(rlock_list_locks(client, NULL, NULL, 0, NULL, NULL, next, sizeof next, 0),
                     RLOCK_ERR_PERMISSION_DENIED);
    ck_assert_int_eq(rlock_force_release(client, "auth/x", 0, NULL),
                     RLOCK_ERR_PERMISSION_DENIED);
    h_assert_ok(client, rlock_ping(client, 0, NULL));
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    ck_assert_int_eq(actl_run(&f.e, t.client, &out, &cerr, "locks", NULL), 77);
    ck_assert_ptr_nonnull(strstr(cerr, "PERMISSION_DENIED"));
    ck_assert_msg(out[0] == '\0', "a refused listing printed \"%s\"", out); /* no empty table */
    free(out);
    free(cerr);
    ck_assert_int_eq(actl_run(&f.e, t.client, &out, &cerr, "sessions", "--json", NULL), 77);
    ck_assert_msg(out[0] == '\0', "a refused listing printed \"%s\"", out);
    free(out);
    free(cerr);
    ck_assert_int_eq(actl_run(&f.e, t.client, &out, &cerr, "ping", NULL), 0);
    free(out);
    free(cerr);
    const int refused_requests = 4;

    /* 4: admin tokens: the file's through --token-file and RLOCK_TOKEN_FILE, the inline one. */
    ck_assert_int_eq(actl_run(&f.e, t.admin, &out, &cerr, "sessions", "--json", NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"role\": \"client\""));
    ck_assert_ptr_nonnull(strstr(out, "\"role\": \"admin\""));
    ck_assert(!shows_token(out));
    free(out);
    free(cerr);
    setenv("RLOCK_TOKEN_FILE", t.admin, 1);
    ck_assert_int_eq(actl_run(&f.e, NULL, &out, &cerr, "locks", "--json", NULL), 0);
    unsetenv("RLOCK_TOKEN_FILE");
    ck_assert_uint_eq(actl_count(out), 1);
    free(out);
    free(cerr);
    struct rlock_client *inline_admin = connect_with(&f.e, INLINE_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "inline admin token refused: %s", err);
    int n = 0;
    h_assert_ok(inline_admin, rlock_list_sessions(inline_admin, NULL, 0, count_session, &n,
                                                  next, sizeof next, 0));
    ck_assert_int_eq(n, 3);
    rlock_close(inline_admin);

    /* Counted: every refusal once. */
    server_info_or_fail(admin, &in1);
    printf("admin_auth: auth_failures %llu -> %llu, permission_denied %llu -> %llu\n",
           (unsigned long long)in0.auth_failures, (unsigned long long)in1.auth_failures,
           (unsigned long long)in0.permission_denied, (unsigned long long)in1.permission_denied);
    ck_assert_uint_eq(in1.auth_failures - in0.auth_failures, refused_hellos);
    ck_assert_uint_eq(in1.permission_denied - in0.permission_denied, refused_requests);
    ck_assert_int_eq(actl_run(&f.e, t.admin, &out, &cerr, "info", NULL), 0);
    char value[64];
    ck_assert(actl_kv(out, "auth", value, sizeof value));
    ck_assert_str_eq(value, "yes");
    ck_assert(actl_kv(out, "permission_denied", value, sizeof value));
    ck_assert_uint_eq(strtoull(value, NULL, 10), in1.permission_denied);
    free(out);
    free(cerr);

    /* No token text anywhere: the log (which names the refusals), --dump-config. */
    char path[320];
    char *log = h_read_file(h_env_path(&f.e, "rlockd.log", path, sizeof path));
    ck_assert_ptr_nonnull(log);
    ck_assert_ptr_nonnull(strstr(log, "authentication failed: no token"));
    ck_assert_ptr_nonnull(strstr(log, "authentication failed: wrong token"));
    ck_assert_ptr_nonnull(strstr(log, "list_locks refused: not an admin session"));
    ck_assert_msg(!shows_token(log), "a token is in rlockd.log");
    free(log);
    char bin[512], dump[320];
    h_bin("rlockd", bin, sizeof bin);
    h_env_path(&f.e, "dump.conf", dump, sizeof dump);
    char *argv[] = {bin, "--dump-config", "-c", f.e.conf, NULL};
    int status;
    pid_t pid = h_spawn_io(argv, dump, NULL);
    ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *text = h_read_file(dump);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_nonnull(strstr(text, "\ntokens = <hidden>\n"));
    ck_assert_ptr_nonnull(strstr(text, t.daemon));
    ck_assert_msg(!shows_token(text), "a token is in --dump-config");
    free(text);

    rlock_lock_free(l);
    rlock_close(client);
    rlock_close(admin);
    h_fixture_stop(&f);
    h_rm_tree(t.dir);
}
END_TEST

START_TEST(test_auth_token_file)
{
    struct tokdir t;
    tokdir_make(&t);
    ck_assert_int_eq(chmod(t.daemon, 0644), 0);
    char conf[320], out[320], errp[320];
    snprintf(conf, sizeof conf, "%s/rlockd.conf", t.dir);
    snprintf(out, sizeof out, "%s/test.out", t.dir);
    snprintf(errp, sizeof errp, "%s/test.err", t.dir);
    char text[512];
    snprintf(text, sizeof text, "[auth]\ntoken_file = %s\n", t.daemon);
    write_secret(conf, text, 0600);
    char bin[512];
    h_bin("rlockd", bin, sizeof bin);
    char *argv[] = {bin, "--test-config", "-c", conf, NULL};
    int status;
    pid_t pid = h_spawn_io(argv, out, errp);
    ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 78);
    char *err = h_read_file(errp);
    ck_assert_ptr_nonnull(err);
    printf("admin_auth: %s", err);
    char want[1024];
    snprintf(want, sizeof want,
             "%s:2: auth.token_file: %s: readable or writable by others (mode 0644)", conf,
             t.daemon);
    ck_assert_msg(strstr(err, want) != NULL, "want \"%s\" in \"%s\"", want, err);
    ck_assert(!shows_token(err));
    free(err);

    ck_assert_int_eq(chmod(t.daemon, 0640), 0);
    pid = h_spawn_io(argv, out, errp);
    ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    h_rm_tree(t.dir);
}
END_TEST

/* SIGHUP rlockd and wait until its log says the reload is done (the count-th time). */
static void reload(struct h_env *e, int count)
{
    ck_assert_int_eq(kill(e->rlockd_pid, SIGHUP), 0);
    int64_t deadline = h_now_ms() + 5000;
    while (h_log_count(e, "reloaded ") < count && h_now_ms() < deadline)
        h_sleep_ms(10);
    ck_assert_int_eq(h_log_count(e, "reloaded "), count);
}

/* Make the token files and start rlockd with the daemon's one (no client connected). */
static void start_with_token_file(struct h_fixture *f, struct tokdir *t)
{
    tokdir_make(t);
    char ini[512];
    snprintf(ini, sizeof ini, "[auth]\ntoken_file = %s\n", t->daemon);
    h_fixture_start_env(f, ini);
}

/*
 * SIGHUP re-reads the tokens: authentication stays on across a reload of an
 * unchanged file, and a token added to the file works at the next Hello while
 * one removed from it is refused.
 */
START_TEST(test_auth_reload)
{
    struct tokdir t;
    struct h_fixture f;
    start_with_token_file(&f, &t);
    enum rlock_err rc;
    char err[512];

    reload(&f.e, 1);
    raw_hello_refused(&f.e);
    struct rlock_client *c = connect_with(&f.e, CLIENT_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "client token after a reload: %s", err);
    rlock_close(c);

    write_secret(t.daemon, "admin " ADMIN_TOKEN "\nclient " WRONG_TOKEN "\n", 0600);
    reload(&f.e, 2);
    c = connect_with(&f.e, WRONG_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "a token added to the file, after a reload: %s", err);
    rlock_close(c);
    c = connect_with(&f.e, CLIENT_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_ERR_UNAUTHENTICATED, "a token removed from the file: %s",
                  rlock_strerror(rc));
    rlock_close(c);
    raw_hello_refused(&f.e);
    char *log = h_read_file(h_env_path(&f.e, "rlockd.log", err, sizeof err));
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(!shows_token(log), "a token appears in the log");
    free(log);
    h_fixture_stop(&f);
    h_rm_tree(t.dir);
}
END_TEST

/* Wait until the key of resource is gone (its session ended and released it). */
static void key_goes(struct h_fixture *f, const char *resource, const char *what)
{
    char key[256];
    h_lock_key(&f->e, resource, key, sizeof key);
    ck_assert_msg(h_wait_key_gone(f->r, key, 5000, &f->e) >= 0, "%s", what);
}

/*
 * Open sessions follow a reload: the session of a token removed from the file is ended
 * (its lock released), an admin token lowered to client loses the admin requests at once.
 */
START_TEST(test_auth_reload_sessions)
{
    struct tokdir t;
    struct h_fixture f;
    start_with_token_file(&f, &t);
    enum rlock_err rc;
    char err[512];
    struct rlock_client *client = connect_with(&f.e, CLIENT_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "%s", err);
    struct rlock_lock *l = h_acquire_ok(client, "auth/removed", NULL);
    struct rlock_client *admin = connect_with(&f.e, ADMIN_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "%s", err);
    char next[RLOCK_CURSOR_BYTES];
    h_assert_ok(admin, rlock_list_locks(admin, NULL, NULL, 0, NULL, NULL, next, sizeof next, 0));

    write_secret(t.daemon, "client " ADMIN_TOKEN "\nclient " WRONG_TOKEN "\n", 0600);
    reload(&f.e, 1);
    key_goes(&f, "auth/removed", "the session of a removed token kept its lock");
    ck_assert_int_ne(rlock_ping(client, 5000, NULL), RLOCK_OK);
    ck_assert_int_eq(rlock_list_locks(admin, NULL, NULL, 0, NULL, NULL, next, sizeof next, 0),
                     RLOCK_ERR_PERMISSION_DENIED);
    h_assert_ok(admin, rlock_ping(admin, 5000, NULL)); /* lowered, not ended */
    ck_assert_int_eq(h_log_count(&f.e, "its token was removed at reload"), 1);
    ck_assert_int_eq(h_log_count(&f.e, "role admin -> client at reload"), 1);
    rlock_lock_free(l);
    rlock_close(client);
    rlock_close(admin);
    h_fixture_stop(&f);
    h_rm_tree(t.dir);
}
END_TEST

/*
 * A reload that turns authentication on ends the sessions opened without a token: after
 * auth.tokenless_grace (here 2 s), or at once without one.
 */
START_TEST(test_auth_turned_on)
{
    struct tokdir t;
    tokdir_make(&t);
    struct h_fixture f;
    h_fixture_start(&f, NULL);
    struct rlock_lock *l = h_acquire_ok(f.c, "auth/open", NULL);
    FILE *conf = fopen(f.e.conf, "a");
    ck_assert_ptr_nonnull(conf);
    fprintf(conf, "\n[auth]\ntoken_file = %s\ntokenless_grace = 2s\n", t.daemon);
    ck_assert_int_eq(fclose(conf), 0);
    int64_t t0 = h_now_ms();
    reload(&f.e, 1);
    h_assert_ok(f.c, rlock_ping(f.c, 5000, NULL)); /* the grace runs */
    key_goes(&f, "auth/open", "a tokenless session outlived the grace");
    int64_t took = h_now_ms() - t0;
    ck_assert_msg(took >= 1900, "a tokenless session ended %lld ms after the reload, before its "
                                "grace of 2 s", (long long)took);
    ck_assert_int_ge(h_log_count(&f.e, "opened without a token"), 1);
    rlock_lock_free(l);
    h_fixture_stop(&f);
    h_rm_tree(t.dir);
}
END_TEST

#define CRED_PASSWORD "cred-redis-pass-5a4b3c2d1e"

/* Copy the file at from to to, with mode. */
static void copy_file(const char *from, const char *to, mode_t mode)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
    ck_assert_int_eq(chmod(to, mode), 0);
}

/* A credentials directory as systemd makes it for the service's user uid: PREFIXtokens and
 * PREFIXredis-password, mode 0400 (prefix "secrets_": the shipped unit's directory). */
static void make_credentials(const char *dir, uid_t uid, const char *prefix)
{
    char path[512];
    ck_assert_int_eq(mkdir(dir, 0500), 0);
    snprintf(path, sizeof path, "%s/%stokens", dir, prefix);
    write_secret(path, "admin " ADMIN_TOKEN "\nclient " CLIENT_TOKEN "\n", 0400);
    ck_assert_int_eq(chown(path, uid, uid), 0);
    snprintf(path, sizeof path, "%s/%sredis-password", dir, prefix);
    write_secret(path, CRED_PASSWORD "\n", 0400);
    ck_assert_int_eq(chown(path, uid, uid), 0);
    ck_assert_int_eq(chown(dir, uid, uid), 0);
}

/*
 * The unit's credentials: with no auth.token_file and no redis.password, rlockd reads the
 * tokens and the Redis password from $CREDENTIALS_DIRECTORY (LoadCredential=), and says so;
 * a configuration file that others can read and that holds redis.password is warned about.
 * Then, as the unit runs it, under an unprivileged uid that owns the credentials.
 */
START_TEST(test_auth_credentials)
{
    struct h_env e;
    ck_assert_int_eq(h_env_start_auth(&e, CRED_PASSWORD, NULL), 0);
    /* Warned at start (when the file was made readable to others) and at each reload. */
    ck_assert_int_eq(chmod(e.conf, 0644), 0);
    int warned = h_log_count(&e, "holds redis.password and other users can read it");
    reload(&e, 1);
    ck_assert_int_eq(h_log_count(&e, "holds redis.password and other users can read it"),
                     warned + 1);
    warned++;

    /* The same daemon with its secrets in credentials, none in the file. */
    ck_assert_int_eq(h_rlockd_signal(&e, SIGTERM), 0);
    char *conf = h_read_file(e.conf);
    ck_assert_ptr_nonnull(conf);
    char *pw = strstr(conf, "password = " CRED_PASSWORD "\n");
    ck_assert_ptr_nonnull(pw);
    memmove(pw, pw + strlen("password = " CRED_PASSWORD "\n"),
            strlen(pw + strlen("password = " CRED_PASSWORD "\n")) + 1);
    write_secret(e.conf, conf, 0644);
    free(conf);
    char creds[512];
    h_env_path(&e, "credentials", creds, sizeof creds);
    make_credentials(creds, geteuid(), ""); /* a drop-in's LoadCredential=tokens:... */
    ck_assert_int_eq(setenv("CREDENTIALS_DIRECTORY", creds, 1), 0);
    int started = h_rlockd_start(&e);
    unsetenv("CREDENTIALS_DIRECTORY");
    ck_assert_int_eq(started, 0);
    ck_assert_int_eq(h_log_count(&e, "auth tokens from the systemd credential tokens"), 1);
    ck_assert_int_eq(h_log_count(&e, "redis password from the systemd credential"), 1);
    ck_assert_int_eq(h_log_count(&e, "other users can read it"), warned); /* none now */
    enum rlock_err rc;
    char err[512];
    struct rlock_client *c = connect_with(&e, NULL, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_ERR_UNAUTHENTICATED, "no token, tokens from a credential: %s",
                  rlock_strerror(rc));
    rlock_close(c);
    c = connect_with(&e, CLIENT_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "the credential's client token: %s", err);
    struct rlock_lock *l = h_acquire_ok(c, "cred/lock", NULL); /* Redis AUTH worked */
    h_assert_ok(c, rlock_release(l, 5000));
    rlock_lock_free(l);
    rlock_close(c);
    char *log = h_read_file(h_env_path(&e, "rlockd.log", err, sizeof err));
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(!shows_token(log) && strstr(log, CRED_PASSWORD) == NULL,
                  "a secret appears in the log");
    free(log);
    h_env_stop(&e);

    /* As the unit runs it: an unprivileged uid (the dynamic user) that owns its credentials,
     * and a configuration it can read. Only root can become another user. */
    if (geteuid() != 0) {
        fprintf(stderr, "admin_auth: credentials as an unprivileged uid: needs root, not run\n");
        return;
    }
    const uid_t nobody = 65534; /* the uid setpriv takes below */
    char dir[256], bin[512], path[600], out[600];
    /* In /tmp itself: $TMPDIR may be inside a directory only root can enter. */
    snprintf(dir, sizeof dir, "/tmp/rlock-unit.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(chmod(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/rlockd", dir);
    copy_file(h_bin("rlockd", bin, sizeof bin), path, 0755);
    snprintf(path, sizeof path, "%s/rlockd.conf", dir);
    write_secret(path, "[redis]\naddress = 127.0.0.1:6379\n", 0644);
    snprintf(creds, sizeof creds, "%s/credentials", dir);
    make_credentials(creds, nobody, "secrets_"); /* the shipped unit's */
    snprintf(out, sizeof out, "%s/dump.out", dir);
    char exe[600], conf_path[600];
    snprintf(exe, sizeof exe, "%s/rlockd", dir);
    snprintf(conf_path, sizeof conf_path, "%s/rlockd.conf", dir);
    char *argv[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    exe, "--dump-config", "-c", conf_path, NULL};
    ck_assert_int_eq(setenv("CREDENTIALS_DIRECTORY", creds, 1), 0);
    pid_t pid = h_spawn(argv, out);
    unsetenv("CREDENTIALS_DIRECTORY");
    int status;
    ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "rlockd --dump-config as uid 65534 with its credentials: status %d", status);
    char *dump = h_read_file(out);
    ck_assert_ptr_nonnull(dump);
    ck_assert_msg(strstr(dump, "password = <hidden>") != NULL,
                  "the password credential was not read:\n%s", dump);
    free(dump);
    /* Without the credentials, a token file only root can read is what the unit met before. */
    snprintf(path, sizeof path, "%s/tokens-root", dir);
    write_secret(path, "admin " ADMIN_TOKEN "\n", 0600);
    char conf_text[800];
    snprintf(conf_text, sizeof conf_text, "[auth]\ntoken_file = %s\n", path);
    write_secret(conf_path, conf_text, 0644);
    argv[5] = "--test-config";
    pid = h_spawn(argv, out);
    ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 78,
                  "a token file uid 65534 cannot read was accepted: status %d", status);
    h_rm_tree(dir);
}
END_TEST

#define QUOTA_TOKEN "quo-1f2e3d4c5b6a79880706f5e4d3c2b1a0"

/* Acquire resource on c, expecting LIMIT_EXCEEDED with a message naming the quota. */
static void quota_refused(struct rlock_client *c, const char *resource, uint32_t wait_ms,
                          const char *quota)
{
    struct rlock_acquire_opts o = {.wait_ms = wait_ms};
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(c, resource, &o, 0, &l);
    ck_assert_msg(rc == RLOCK_ERR_LIMIT_EXCEEDED, "%s over the token's %s: %s", resource, quota,
                  rlock_strerror(rc));
    const char *msg = rlock_last_error()->message;
    ck_assert_msg(strstr(msg, quota) != NULL && strstr(msg, "token") != NULL,
                  "the refusal does not name the quota %s: \"%s\"", quota, msg);
    rlock_lock_free(l);
}

/* An acquire that waits, on a thread: the token's one waiter. */
struct quota_waiter {
    struct rlock_client *c;
    enum rlock_err rc;
    struct rlock_lock *l;
    struct h_thread t;
};

static void *quota_wait_main(void *arg)
{
    struct quota_waiter *w = arg;
    struct rlock_acquire_opts o = {.wait_ms = 30000};
    w->rc = rlock_acquire(w->c, "quota/busy", &o, 0, &w->l);
    return NULL;
}

static int waiters_are(struct rlock_client *admin, uint64_t n)
{
    struct rlock_stats st;
    return rlock_stats(admin, 5000, &st) == RLOCK_OK && st.waiters == n;
}

/*
 * Quotas per token: QUOTA_TOKEN's entry gives max_locks=3 max_waiters=1, shared by its two
 * sessions; CLIENT_TOKEN gets the role's limits.client_max_locks = 2; the admin token has
 * none. Refusals are LIMIT_EXCEEDED naming the quota; a release makes room; a reload
 * raising the entry's quota applies to the open sessions.
 */
START_TEST(test_auth_quota)
{
    struct tokdir t;
    tokdir_make(&t);
    write_secret(t.daemon,
                 "admin  " ADMIN_TOKEN "\n"
                 "client " CLIENT_TOKEN "\n"
                 "client " QUOTA_TOKEN "  max_locks=3 max_waiters=1\n",
                 0600);
    char ini[512];
    snprintf(ini, sizeof ini, "[auth]\ntoken_file = %s\n[limits]\nclient_max_locks = 2\n",
             t.daemon);
    struct h_fixture f;
    h_fixture_start_env(&f, ini);
    enum rlock_err rc;
    char err[512];
    struct rlock_client *q1 = connect_with(&f.e, QUOTA_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "%s", err);
    struct rlock_client *q2 = connect_with(&f.e, QUOTA_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "%s", err);
    struct rlock_client *cl = connect_with(&f.e, CLIENT_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "%s", err);
    struct rlock_client *admin = connect_with(&f.e, ADMIN_TOKEN, &rc, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "%s", err);

    /* The token's sessions share its 3 locks; the other tokens are not counted with it. */
    struct rlock_lock *a = h_acquire_ok(q1, "quota/a", NULL);
    struct rlock_lock *b = h_acquire_ok(q1, "quota/b", NULL);
    struct rlock_lock *busy = h_acquire_ok(cl, "quota/busy", NULL);
    struct rlock_lock *busy2 = h_acquire_ok(cl, "quota/busy2", NULL);
    quota_refused(cl, "quota/c-over", 0, "max_locks"); /* the role's default: 2 */
    struct rlock_lock *adm[4];
    for (size_t i = 0; i < H_LEN(adm); i++) {
        char name[32];
        snprintf(name, sizeof name, "quota/admin-%zu", i);
        adm[i] = h_acquire_ok(admin, name, NULL);
    }

    /* q2 waits for quota/busy: the token's third lock and its one waiter. */
    struct quota_waiter w = {.c = q2};
    h_thread_start(&w.t, quota_wait_main, &w);
    int64_t deadline = h_now_ms() + 10000;
    while (!waiters_are(admin, 1) && h_now_ms() < deadline)
        h_sleep_ms(10);
    ck_assert_msg(waiters_are(admin, 1), "q2's acquire is not waiting");
    quota_refused(q1, "quota/d", 0, "max_locks");
    quota_refused(q2, "quota/d", 0, "max_locks");

    /* A lock given back makes room, for a try but not for a second waiter. */
    h_release_gone(&f, q1, a);
    quota_refused(q1, "quota/busy2", 5000, "max_waiters");
    struct rlock_lock *tried = NULL;
    struct rlock_acquire_opts once = {.wait_ms = 0};
    ck_assert_int_eq(rlock_acquire(q1, "quota/busy2", &once, 0, &tried), RLOCK_ERR_NOT_ACQUIRED);
    struct rlock_lock *d = h_acquire_ok(q1, "quota/d", NULL);

    /* The waiter gets its lock when the holder lets go; the count stays right. */
    h_assert_ok(cl, rlock_release(busy, 5000));
    h_thread_join(&w.t, h_now_ms() + 10000, "the token's waiter was not granted");
    ck_assert_msg(w.rc == RLOCK_OK, "the waiter: %s", rlock_strerror(w.rc));
    quota_refused(q2, "quota/e", 0, "max_locks");

    /* A reload raising the entry's quota applies to the sessions already open. */
    write_secret(t.daemon,
                 "admin  " ADMIN_TOKEN "\n"
                 "client " CLIENT_TOKEN "\n"
                 "client " QUOTA_TOKEN " max_waiters=1 max_locks=4\n",
                 0600);
    reload(&f.e, 1);
    struct rlock_lock *e = h_acquire_ok(q2, "quota/e", NULL);
    quota_refused(q1, "quota/f", 0, "max_locks");
    /* With a lock given back, the token's one waiter slot is free again (the granted
     * waiter gave it back): this wait runs out rather than being refused. */
    h_assert_ok(q2, rlock_release(e, 5000));
    struct rlock_acquire_opts brief = {.wait_ms = 300};
    struct rlock_lock *late = NULL;
    rc = rlock_acquire(q1, "quota/busy2", &brief, 0, &late);
    ck_assert_msg(rc == RLOCK_ERR_TIMEOUT, "a wait within the quotas: %s (%s)",
                  rlock_strerror(rc), rlock_last_error()->message);

    rlock_lock_free(tried);
    rlock_lock_free(late);
    rlock_lock_free(busy);
    rlock_lock_free(busy2);
    rlock_lock_free(a);
    rlock_lock_free(b);
    rlock_lock_free(d);
    rlock_lock_free(e);
    rlock_lock_free(w.l);
    for (size_t i = 0; i < H_LEN(adm); i++)
        rlock_lock_free(adm[i]);
    rlock_close(q1);
    rlock_close(q2);
    rlock_close(cl);
    rlock_close(admin);
    h_fixture_stop(&f);
    h_rm_tree(t.dir);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_auth_refusals, test_auth_token_file, test_auth_reload,
                            test_auth_reload_sessions, test_auth_turned_on, test_auth_quota,
                            test_auth_credentials};
    return h_run_tests("admin_auth", 120, tests, H_LEN(tests));
}
