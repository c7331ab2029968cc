/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_tls.c — client connections over TLS ([tls] listen; librlock's tls://).
 *
 *  - session: a session over TLS takes a lock, the daemon renews it past its
 *    ttl, releases it; rlockctl over TLS too.
 *  - refused_by_client: a daemon certificate from a CA the client does not
 *    trust, or issued for another name, is refused by the client, which says
 *    why; nothing opens a session.
 *  - plaintext_closed: bytes that are not TLS on the TLS socket close the
 *    connection at once, not at the Hello deadline; a client of the plain
 *    protocol there gets INVALID saying to connect with tls://, and a TLS
 *    client on the plain listener is told to check tls.listen.
 *  - client_certs: with client certificates required, a client without one
 *    is refused; one from a CA the daemon does not trust is refused; the
 *    certificate named in the token file as cert:ops-admin gets the admin
 *    role, and that entry is never accepted as a token.
 *  - reload: a reload swaps certificate and key (and the CA): the open
 *    session goes on holding its lock; new clients see the new certificate.
 *  - key_credential: tls.key_file empty, the key comes from the unit's credential
 *    (secrets_tls-key in $CREDENTIALS_DIRECTORY).
 *  - move: a session on two TLS daemons resumes on the second when the first is
 *    killed, with every lock and fence.
 *  - async: an asynchronous client on its own poll loop connects, takes and
 *    releases a lock over TLS.
 *
 * The certificates are made by tls_certs.sh (openssl(1)) for each test. The
 * TLS listener is a unix socket in the certificates' directory; the name
 * check uses tls_server_name "localhost", which the daemon's certificate
 * carries.
 */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef TLS_CERTS
#error "TLS_CERTS must name tests/integration/tls_certs.sh"
#endif

#define ADMIN_TOKEN "tls-test-admin-token-0123456789"

struct tls_env {
    struct h_env e;
    char dir[256];     /* the certificates, and the TLS socket */
    char addr[320];    /* tls://unix:DIR/tls.sock */
    char path[512];    /* scratch for file names */
};

/* DIR/name into t->path. */
static const char *file(struct tls_env *t, const char *name)
{
    snprintf(t->path, sizeof t->path, "%s/%s", t->dir, name);
    return t->path;
}

static void make_certs(struct tls_env *t)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/rltls.XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(t->dir));
    char *argv[] = {"/bin/sh", TLS_CERTS, t->dir, NULL};
    pid_t pid = h_spawn(argv, NULL);
    int status;
    ck_assert_int_gt(pid, 0);
    ck_assert_msg(h_wait_exit(pid, 60000, &status) == 0, "tls_certs.sh did not finish");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tls_certs.sh failed");
    snprintf(t->addr, sizeof t->addr, "tls://unix:%s/tls.sock", t->dir);
}

/* Copy DIR/from to DIR/to (mode 0600): the files the daemon's config names. */
static void copy_file(struct tls_env *t, const char *from, const char *to)
{
    char *text = h_read_file(file(t, from));
    ck_assert_ptr_nonnull(text);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/%s.new", t->dir, to);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    free(text);
    ck_assert_int_eq(chmod(tmp, 0600), 0);
    ck_assert_int_eq(rename(tmp, file(t, to)), 0); /* a reload never reads half a file */
}

/*
 * Certificates made, the daemon's in place as cur.pem / cur.key, and the env started
 * with a TLS listener (client_certs as given; extra appended to the config).
 */
static void tls_start(struct tls_env *t, const char *client_certs, const char *extra)
{
    make_certs(t);
    copy_file(t, "srv.pem", "cur.pem");
    copy_file(t, "srv.key", "cur.key");
    copy_file(t, "ca.pem", "curca.pem");
    char ini[2048];
    snprintf(ini, sizeof ini,
             "[server]\nhello_timeout = 30s\n"
             "[tls]\nlisten = unix:%s/tls.sock\ncert_file = %s/cur.pem\nkey_file = %s/cur.key\n"
             "ca_file = %s/curca.pem\nclient_certs = %s\n%s",
             t->dir, t->dir, t->dir, t->dir, client_certs, extra != NULL ? extra : "");
    h_env_start_or_fail(&t->e, ini);
}

static void tls_stop(struct tls_env *t)
{
    h_assert_env_alive(&t->e);
    h_env_stop(&t->e);
    h_rm_tree(t->dir);
}

/* Options trusting DIR/ca (NULL: none given) with cert/key (NULL: none), name localhost. */
static struct rlock_options tls_opts(struct tls_env *t, const char *ca, const char *cert,
                                     const char *key, char paths[3][512])
{
    struct rlock_options o = {.client_name = "tls test", .tls_server_name = "localhost"};
    if (ca != NULL)
        o.tls_ca_file = strcpy(paths[0], file(t, ca));
    if (cert != NULL)
        o.tls_cert_file = strcpy(paths[1], file(t, cert));
    if (key != NULL)
        o.tls_key_file = strcpy(paths[2], file(t, key));
    return o;
}

/* rlock_connect over TLS: the result, the client in *out (NULL on failure), err filled. */
static enum rlock_err tls_connect(struct tls_env *t, const struct rlock_options *o,
                                  struct rlock_client **out, char *err, size_t errlen)
{
    err[0] = '\0';
    enum rlock_err rc = rlock_connect(t->addr, o, out, err, errlen);
    printf("tls: connect with ca %s, cert %s, name %s: %s%s%s\n",
           o->tls_ca_file ? o->tls_ca_file : "-", o->tls_cert_file ? o->tls_cert_file : "-",
           o->tls_server_name ? o->tls_server_name : "-", rlock_strerror(rc),
           err[0] ? ": " : "", err);
    return rc;
}

static struct rlock_client *tls_client_ok(struct tls_env *t, const struct rlock_options *o)
{
    struct rlock_client *c = NULL;
    char err[512];
    enum rlock_err rc = tls_connect(t, o, &c, err, sizeof err);
    ck_assert_msg(rc == RLOCK_OK, "TLS connect: %s", err);
    return c;
}

/* --- a session over TLS ---------------------------------------------------------------- */

START_TEST(test_session)
{
    struct tls_env t;
    tls_start(&t, "none", NULL);
    char paths[3][512];
    struct rlock_options o = tls_opts(&t, "ca.pem", NULL, NULL, paths);
    struct rlock_client *c = tls_client_ok(&t, &o);
    struct rlock_acquire_opts a = {.ttl_ms = 2000};
    struct rlock_lock *l = h_acquire_ok(c, "over-tls", &a);
    redisContext *r = h_redis(&t.e);
    ck_assert_ptr_nonnull(r);
    char key[256];
    h_lock_key(&t.e, "over-tls", key, sizeof key);
    /* Two and a half ttls later the daemon has renewed it over and over; the session is
     * alive. */
    h_sleep_ms(5000);
    ck_assert_msg(rlock_lock_state(l) == RLOCK_HELD, "lock state %d (%s); client: %s",
                  (int)rlock_lock_state(l), rlock_lost_reason_str(rlock_lock_lost_reason(l)),
                  rlock_client_alive(c) ? "alive" : "ended");
    h_assert_key_token(r, key, rlock_lock_token(l));
    h_assert_ok(c, rlock_ping(c, 5000, NULL));
    h_assert_ok(c, rlock_release(l, 5000));
    ck_assert_int_eq(h_key_exists(r, key), 0);
    rlock_lock_free(l);
    rlock_close(c);
    ck_assert_msg(h_log_find(&t.e, "TLS: certificate", NULL), "no TLS line in rlockd.log");

    /* rlockctl over TLS: the same options from its command line. */
    char bin[512], out[600];
    h_bin("rlockctl", bin, sizeof bin);
    snprintf(out, sizeof out, "%s/ctl.out", t.dir);
    char *argv[] = {bin, "--server", t.addr, "--tls-ca", paths[0], "--tls-server-name",
                    "localhost", "ping", NULL};
    pid_t pid = h_spawn(argv, out);
    int status;
    ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
    char *text = h_read_file(out);
    ck_assert_ptr_nonnull(text);
    printf("tls: rlockctl: %s", text);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlockctl ping over TLS failed");
    ck_assert_ptr_nonnull(strstr(text, "pong from tls://unix:"));
    free(text);
    redisFree(r);
    tls_stop(&t);
}
END_TEST

/* --- the client refuses a certificate it cannot trust --------------------------------- */

START_TEST(test_refused_by_client)
{
    struct tls_env t;
    tls_start(&t, "none", NULL);
    char paths[3][512], err[512];
    struct rlock_client *c = NULL;
    int opened = h_log_count(&t.e, ": open, timeout"); /* the harness's own check */

    struct rlock_options o = tls_opts(&t, "ca2.pem", NULL, NULL, paths); /* another CA */
    ck_assert_int_eq(tls_connect(&t, &o, &c, err, sizeof err), RLOCK_ERR_CONNECT);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, "certificate verify failed") != NULL, "%s", err);

    o = tls_opts(&t, "ca.pem", NULL, NULL, paths);
    o.tls_server_name = "db.example.com"; /* not the name the certificate was issued for */
    ck_assert_int_eq(tls_connect(&t, &o, &c, err, sizeof err), RLOCK_ERR_CONNECT);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, "hostname mismatch") != NULL, "%s", err);

    /* The system's CAs (no tls_ca_file) do not know the test CA either. */
    o = tls_opts(&t, NULL, NULL, NULL, paths);
    ck_assert_int_eq(tls_connect(&t, &o, &c, err, sizeof err), RLOCK_ERR_CONNECT);
    ck_assert_msg(strstr(err, "certificate verify failed") != NULL, "%s", err);

    /* A tls:// address with a CA file that is not there: a clear error, before connecting. */
    o = tls_opts(&t, "missing.pem", NULL, NULL, paths);
    ck_assert_int_eq(tls_connect(&t, &o, &c, err, sizeof err), RLOCK_ERR_ARG);
    ck_assert_msg(strstr(err, "tls_ca_file") != NULL, "%s", err);
    ck_assert_int_eq(h_log_count(&t.e, ": open, timeout"), opened); /* none of them */
    tls_stop(&t);
}
END_TEST

/* --- plaintext on the TLS socket ----------------------------------------------------------- */

START_TEST(test_plaintext_closed)
{
    struct tls_env t;
    tls_start(&t, "none", NULL);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa;
    char sock[512];
    snprintf(sock, sizeof sock, "%s/tls.sock", t.dir);
    h_unix_sockaddr(&sa, sock);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    /* A frame header and a protobuf body, as a plain client's Hello starts. */
    static const unsigned char hello[] = {0, 0, 0, 6, 0x0a, 4, 't', 'e', 's', 't'};
    int64_t t0 = h_now_ms();
    ck_assert_int_eq(write(fd, hello, sizeof hello), (ssize_t)sizeof hello);
    /* hello_timeout is 30 s: an end within 5 s is the daemon refusing the bytes. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char buf[256];
    ssize_t n = 1;
    while (n > 0 && h_now_ms() - t0 < 5000) {
        if (poll(&p, 1, 200) > 0)
            n = read(fd, buf, sizeof buf); /* a TLS alert may come first */
    }
    int64_t took = h_now_ms() - t0;
    printf("tls: a plaintext client was closed after %lld ms\n", (long long)took);
    ck_assert_msg(n <= 0, "the connection stayed open for 5 s");
    close(fd);

    /* A client of the plain protocol is answered in it: what to do instead. */
    char plain[600], err[512];
    snprintf(plain, sizeof plain, "unix:%s/tls.sock", t.dir);
    struct rlock_options o = {.client_name = "plain"};
    struct rlock_client *c = NULL;
    enum rlock_err rc = rlock_connect(plain, &o, &c, err, sizeof err);
    printf("tls: a plain client on the TLS listener: %s: %s\n", rlock_strerror(rc), err);
    ck_assert_int_eq(rc, RLOCK_ERR_INVALID);
    ck_assert_msg(strstr(err, "connect with tls://") != NULL, "%s", err);

    /* And a TLS client on the plain listener learns where to look. */
    char tls_on_plain[600], paths[3][512];
    snprintf(tls_on_plain, sizeof tls_on_plain, "tls://%s", t.e.rlockd_addr);
    struct rlock_options to = tls_opts(&t, "ca.pem", NULL, NULL, paths);
    rc = rlock_connect(tls_on_plain, &to, &c, err, sizeof err);
    printf("tls: a TLS client on the plain listener: %s: %s\n", rlock_strerror(rc), err);
    ck_assert_int_eq(rc, RLOCK_ERR_CONNECT);
    ck_assert_msg(strstr(err, "tls.listen") != NULL, "%s", err);
    tls_stop(&t);
}
END_TEST

/* --- client certificates ------------------------------------------------------------------- */

START_TEST(test_client_certs)
{
    struct tls_env t;
    char tokens[1024];
    tls_start(&t, "required", NULL);
    /* The token file: the certificate ops-admin is an admin; a client token besides. */
    snprintf(tokens, sizeof tokens, "%s/tokens", t.dir);
    FILE *f = fopen(tokens, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "admin cert:ops-admin\nclient %s\n", ADMIN_TOKEN);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(tokens, 0600), 0);
    /* Authentication on by a reload that names the token file. */
    FILE *cf = fopen(t.e.conf, "a");
    ck_assert_ptr_nonnull(cf);
    fprintf(cf, "[auth]\ntoken_file = %s\n", tokens);
    ck_assert_int_eq(fclose(cf), 0);
    ck_assert_int_eq(kill(t.e.rlockd_pid, SIGHUP), 0);
    ck_assert_int_eq(h_log_wait(&t.e, "reloaded ", 5000, NULL), 0);

    char paths[3][512], err[512];
    struct rlock_client *c = NULL;
    /* No certificate: the handshake is refused. */
    struct rlock_options o = tls_opts(&t, "ca.pem", NULL, NULL, paths);
    o.auth_token = ADMIN_TOKEN;
    ck_assert_int_eq(tls_connect(&t, &o, &c, err, sizeof err), RLOCK_ERR_CONNECT);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, "certificate required") != NULL, "%s", err);
    /* A certificate from a CA the daemon does not trust: refused too, and said so (the
     * alert comes after the client's first write under TLS 1.3). */
    o = tls_opts(&t, "ca.pem", "cli2.pem", "cli2.key", paths);
    ck_assert_int_eq(tls_connect(&t, &o, &c, err, sizeof err), RLOCK_ERR_CONNECT);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, "unknown ca") != NULL, "%s", err);

    /* The trusted certificate, no token: its cert:ops-admin entry makes it an admin. */
    o = tls_opts(&t, "ca.pem", "cli.pem", "cli.key", paths);
    c = tls_client_ok(&t, &o);
    struct rlock_server_info info;
    h_assert_ok(c, rlock_server_info(c, 5000, &info));
    struct rlock_lock *l = h_acquire_ok(c, "mtls", NULL);
    h_assert_ok(c, rlock_release(l, 5000));
    rlock_lock_free(l);
    rlock_close(c);

    /* The same certificate with the client token: the token decides (client role). */
    o.auth_token = ADMIN_TOKEN;
    c = tls_client_ok(&t, &o);
    enum rlock_err rc = rlock_server_info(c, 5000, &info);
    ck_assert_msg(rc == RLOCK_ERR_PERMISSION_DENIED, "a client token's admin request: %s",
                  rlock_strerror(rc));
    rlock_close(c);

    /* The entry's text presented as a token, on the plain socket: never an identity. */
    struct rlock_options plain = {.client_name = "forger", .auth_token = "cert:ops-admin"};
    c = NULL;
    rc = rlock_connect(t.e.rlockd_addr, &plain, &c, err, sizeof err);
    printf("tls: 'cert:ops-admin' as a token: %s: %s\n", rlock_strerror(rc), err);
    ck_assert_int_eq(rc, RLOCK_ERR_UNAUTHENTICATED);
    ck_assert_ptr_null(c);
    tls_stop(&t);
}
END_TEST

/* --- a reload swaps the certificate --------------------------------------------------------- */

START_TEST(test_reload)
{
    struct tls_env t;
    tls_start(&t, "none", NULL);
    char paths[3][512], paths2[3][512], err[512];
    struct rlock_options o = tls_opts(&t, "ca.pem", NULL, NULL, paths);
    struct rlock_client *c = tls_client_ok(&t, &o);
    struct rlock_acquire_opts a = {.ttl_ms = 2000};
    struct rlock_lock *l = h_acquire_ok(c, "kept", &a);

    /* The daemon gets a certificate from the other CA. */
    copy_file(&t, "srv2.pem", "cur.pem");
    copy_file(&t, "srv2.key", "cur.key");
    ck_assert_int_eq(kill(t.e.rlockd_pid, SIGHUP), 0);
    ck_assert_int_eq(h_log_wait(&t.e, "reloaded ", 5000, NULL), 0);

    /* New clients see it: those trusting the first CA only are refused, the others get in. */
    struct rlock_client *c2 = NULL;
    ck_assert_int_eq(tls_connect(&t, &o, &c2, err, sizeof err), RLOCK_ERR_CONNECT);
    ck_assert_msg(strstr(err, "certificate verify failed") != NULL, "%s", err);
    struct rlock_options o2 = tls_opts(&t, "ca2.pem", NULL, NULL, paths2);
    c2 = tls_client_ok(&t, &o2);
    h_assert_ok(c2, rlock_ping(c2, 5000, NULL));
    rlock_close(c2);

    /* The open session never noticed: its lock is renewed past its ttl, and it answers. */
    h_sleep_ms(4500);
    ck_assert_int_eq(rlock_lock_state(l), RLOCK_HELD);
    h_assert_ok(c, rlock_ping(c, 5000, NULL));
    ck_assert_int_eq(rlock_client_alive(c), 1);
    h_assert_ok(c, rlock_release(l, 5000));
    rlock_lock_free(l);
    rlock_close(c);

    /* A key file that others can read is refused at the reload; the old context stays. */
    ck_assert_int_eq(chmod(file(&t, "cur.key"), 0644), 0);
    ck_assert_int_eq(kill(t.e.rlockd_pid, SIGHUP), 0);
    ck_assert_int_eq(h_log_wait(&t.e, "certificate, key and CA stay", 5000, NULL), 0);
    c2 = tls_client_ok(&t, &o2);
    rlock_close(c2);
    /* rlockd --test-config reads the TLS files too: the operator learns before a restart. */
    char bin[512], out[600];
    h_bin("rlockd", bin, sizeof bin);
    snprintf(out, sizeof out, "%s/test-config.err", t.dir);
    char *argv[] = {bin, "--test-config", "-c", t.e.conf, NULL};
    pid_t pid = h_spawn_io(argv, NULL, out);
    int status;
    ck_assert_int_eq(h_wait_exit(pid, 10000, &status), 0);
    char *text = h_read_file(out);
    ck_assert_ptr_nonnull(text);
    printf("tls: rlockd --test-config: %s", text);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 78, "--test-config passed a bad key");
    ck_assert_ptr_nonnull(strstr(text, "tls.key_file"));
    free(text);
    tls_stop(&t);
}
END_TEST

/* --- the key as a systemd credential ------------------------------------------------------ */

START_TEST(test_key_credential)
{
    struct tls_env t;
    make_certs(&t);
    /* The unit's credentials directory: its files arrive as secrets_FILE. */
    char creds[400];
    snprintf(creds, sizeof creds, "%s/creds", t.dir);
    ck_assert_int_eq(mkdir(creds, 0700), 0);
    copy_file(&t, "srv.key", "creds/secrets_tls-key");
    ck_assert_int_eq(setenv("CREDENTIALS_DIRECTORY", creds, 1), 0);
    char ini[1024];
    snprintf(ini, sizeof ini, "[tls]\nlisten = unix:%s/tls.sock\ncert_file = %s/srv.pem\n",
             t.dir, t.dir);
    h_env_start_or_fail(&t.e, ini);
    char paths[3][512];
    struct rlock_options o = tls_opts(&t, "ca.pem", NULL, NULL, paths);
    struct rlock_client *c = tls_client_ok(&t, &o);
    h_assert_ok(c, rlock_ping(c, 5000, NULL));
    rlock_close(c);
    tls_stop(&t);
}
END_TEST

/* --- a session moves to another daemon over TLS ------------------------------------------- */

/*
 * Two daemons on one Redis with one resume key, each with a TLS listener; a client given
 * both TLS addresses holds locks on A; A is killed: the session resumes on B, its new
 * handshake driven by the client's reactor like any other I/O, and keeps every lock.
 */
START_TEST(test_move)
{
    struct tls_env t;
    make_certs(&t);
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    char ini[2][1400];
    for (int i = 0; i < 2; i++)
        snprintf(ini[i], sizeof ini[i],
                 "%s[tls]\nlisten = unix:%s/tls%d.sock\ncert_file = %s/srv.pem\n"
                 "key_file = %s/srv.key\n",
                 k.ini, t.dir, i, t.dir, t.dir);
    struct h_env b;
    h_env_start_or_fail(&t.e, ini[0]);
    char list[800];
    snprintf(list, sizeof list, "tls://unix:%s/tls0.sock,tls://unix:%s/tls1.sock", t.dir, t.dir);
    char paths[3][512], err[512];
    struct rlock_options o = tls_opts(&t, "ca.pem", NULL, NULL, paths);
    o.session_timeout_ms = 6000;
    struct h_lost lost = {0};
    o.on_lost = h_lost_cb;
    o.on_lost_arg = &lost;
    /* On A: B's socket does not exist yet (a refused connect sends the client on). */
    struct rlock_client *c = NULL;
    ck_assert_msg(rlock_connect(list, &o, &c, err, sizeof err) == RLOCK_OK, "connect: %s", err);
    ck_assert_msg(h_env_start_peer(&b, &t.e, ini[1]) == 0, "could not start daemon B");
    struct rlock_lock *l[3];
    uint64_t fences[3];
    for (int i = 0; i < 3; i++) {
        char res[32];
        snprintf(res, sizeof res, "tls-move-%d", i);
        struct rlock_acquire_opts a = {.ttl_ms = 3000};
        l[i] = h_acquire_ok(c, res, &a);
        fences[i] = rlock_lock_fence(l[i]);
    }
    ck_assert_int_eq(kill(t.e.rlockd_pid, SIGKILL), 0);
    int status;
    ck_assert_int_eq(h_wait_exit(t.e.rlockd_pid, 10000, &status), 0);
    t.e.rlockd_pid = 0;
    int64_t deadline = h_now_ms() + 20000;
    while (rlock_session_resumes(c) == 0 && h_now_ms() < deadline)
        h_sleep_ms(20);
    ck_assert_msg(rlock_session_resumes(c) == 1, "the session did not resume on B");
    /* Past the locks' ttl: B renews them. */
    h_sleep_ms(3500);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rlock_lock_state(l[i]), RLOCK_HELD);
        ck_assert_uint_eq(rlock_lock_fence(l[i]), fences[i]);
    }
    ck_assert_int_eq(atomic_load(&lost.count), 0);
    h_assert_ok(c, rlock_ping(c, 5000, NULL));
    ck_assert_msg(h_log_find(&b, "resumed, timeout", NULL), "B did not log the resume");
    ck_assert_msg(h_log_find(&b, "TLSv1.3", NULL), "B's session is not over TLS");
    for (int i = 0; i < 3; i++) {
        h_assert_ok(c, rlock_release(l[i], 5000));
        rlock_lock_free(l[i]);
    }
    rlock_close(c);
    h_env_stop(&b);
    h_env_stop(&t.e);
    h_keydir_remove(&k);
    h_rm_tree(t.dir);
}
END_TEST

/* --- the asynchronous API ------------------------------------------------------------------- */

struct async_run {
    int ready, acquired, released;
    enum rlock_err err;
    struct rlock_lock *lock;
};

static void on_ready(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct async_run *run = arg;
    run->ready = 1;
    run->err = r->err;
}

static void on_released(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    (void)c;
    struct async_run *run = arg;
    run->released = r->err == RLOCK_OK ? 1 : -1;
}

static void on_acquired(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    struct async_run *run = arg;
    run->acquired = r->err == RLOCK_OK ? 1 : -1;
    run->lock = r->lock;
    if (r->err == RLOCK_OK)
        ck_assert_int_eq(rlock_async_release(r->lock, on_released, run, NULL), RLOCK_OK);
    (void)c;
}

START_TEST(test_async)
{
    struct tls_env t;
    tls_start(&t, "none", NULL);
    char paths[3][512], err[512];
    struct rlock_options o = tls_opts(&t, "ca.pem", NULL, NULL, paths);
    struct async_run run = {0};
    struct rlock_client *c = NULL;
    ck_assert_int_eq(rlock_async_connect(t.addr, &o, on_ready, &run, &c, err, sizeof err),
                     RLOCK_OK);
    /* Submitted before the handshake is even under way: it follows the Hello. */
    ck_assert_int_eq(rlock_async_acquire(c, "async-tls", NULL, on_acquired, &run, NULL),
                     RLOCK_OK);
    int64_t deadline = h_now_ms() + 10000;
    while (run.released == 0 && run.acquired >= 0 && h_now_ms() < deadline) {
        struct pollfd p = {.fd = rlock_async_fd(c), .events = (short)rlock_async_events(c)};
        int64_t wait = rlock_async_timeout_ms(c);
        int n = poll(&p, 1, wait < 0 || wait > 100 ? 100 : (int)wait);
        ck_assert_int_eq(rlock_async_process(c, n > 0 ? p.revents : 0), RLOCK_OK);
    }
    ck_assert_int_eq(run.ready, 1);
    ck_assert_int_eq(run.err, RLOCK_OK);
    ck_assert_int_eq(run.acquired, 1);
    ck_assert_int_eq(run.released, 1);
    rlock_lock_free(run.lock);
    rlock_close(c);
    tls_stop(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tls");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_session);
    tcase_add_test(tc, test_refused_by_client);
    tcase_add_test(tc, test_plaintext_closed);
    tcase_add_test(tc, test_client_certs);
    tcase_add_test(tc, test_reload);
    tcase_add_test(tc, test_key_credential);
    tcase_add_test(tc, test_move);
    tcase_add_test(tc, test_async);
    suite_add_tcase(s, tc);
    return h_run_suite(s);
}
