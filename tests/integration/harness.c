/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness.c — private redis-server + rlockd processes for integration tests.
 *
 * Ownership: an h_env belongs to the process that started it (normally the
 * forked Check child running one test). Its processes are children of that
 * process, die with it (PR_SET_PDEATHSIG), and are only ever signalled by pid
 * (process helpers in harness_proc.c).
 *
 * Readiness is observed, never guessed: redis is ready when it answers PING on
 * its socket, rlockd when a client can open a session and the daemon reports
 * Redis up. Every wait has a deadline and checks that the child is alive.
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef H_BIN_DIR
#error "H_BIN_DIR must name the build's bin directory"
#endif

#define H_START_DEADLINE_MS 10000
#define H_STOP_GRACE_MS 3000
#define H_SIGNAL_DEADLINE_MS 10000
#define H_LOG_TAIL_LINES 40
#define H_BASE_ENV "RLOCK_ITEST_BASE"

const char *h_bin(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("RLOCK_BIN_DIR");
    snprintf(buf, len, "%s/%s", dir && dir[0] ? dir : H_BIN_DIR, name);
    return buf;
}

/* --- files --------------------------------------------------------------- */

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    if (fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

/* --- env registry: dump and clean up envs left running at exit ----------- */

#define H_ENVS_MAX 16
static struct {
    struct h_env *env;
    pid_t owner;
} envs[H_ENVS_MAX];

static void env_stop_quiet(struct h_env *e);

static void envs_at_exit(void)
{
    for (int i = 0; i < H_ENVS_MAX; i++) {
        if (!envs[i].env || envs[i].owner != getpid())
            continue;
        struct h_env *e = envs[i].env;
        envs[i].env = NULL;
        fprintf(stderr, "harness: env %s still running when the test ended\n", e->dir);
        h_env_dump_logs(e);
        env_stop_quiet(e);
    }
}

static void envs_add(struct h_env *e)
{
    static int registered;
    if (!registered) {
        atexit(envs_at_exit);
        registered = 1;
    }
    for (int i = 0; i < H_ENVS_MAX; i++) {
        if (!envs[i].env) {
            envs[i].env = e;
            envs[i].owner = getpid();
            return;
        }
    }
}

static void envs_del(struct h_env *e)
{
    for (int i = 0; i < H_ENVS_MAX; i++)
        if (envs[i].env == e)
            envs[i].env = NULL;
}

/* --- startup ------------------------------------------------------------- */

/*
 * Poll not_ready(e) every 10 ms until it returns NULL, for at most
 * H_START_DEADLINE_MS, while the child *pid (what, writing to log) lives.
 * not_ready names what the child does not do yet ("answering PING"). Returns
 * 0, or -1 after printing why and the tail of log (*pid zeroed when the
 * child exited).
 */
static int wait_started(struct h_env *e, pid_t *pid, const char *what, const char *log,
                        const char *(*not_ready)(struct h_env *e))
{
    int64_t deadline = h_now_ms() + H_START_DEADLINE_MS;
    const char *missing;
    while ((missing = not_ready(e)) != NULL) {
        if (!h_alive(*pid)) {
            fprintf(stderr, "harness: %s exited during startup\n", what);
            h_print_tail(log, H_LOG_TAIL_LINES);
            *pid = 0;
            return -1;
        }
        if (h_now_ms() >= deadline) {
            fprintf(stderr, "harness: %s not %s after %d ms\n", what, missing,
                    H_START_DEADLINE_MS);
            h_print_tail(log, H_LOG_TAIL_LINES);
            return -1;
        }
        h_sleep_ms(10);
    }
    return 0;
}

/* --- redis --------------------------------------------------------------- */

/* AUTH with the env's password, if it has one; 0 on success. */
static int redis_auth(const struct h_env *e, redisContext *r)
{
    if (!e->redis_password[0])
        return 0;
    redisReply *rep = redisCommand(r, "AUTH %s", e->redis_password);
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep)
        freeReplyObject(rep);
    return ok ? 0 : -1;
}

redisContext *h_redis(struct h_env *e)
{
    struct timeval tv = { 2, 0 };
    redisContext *r = redisConnectUnixWithTimeout(e->redis_sock, tv);
    if (!r || r->err) {
        fprintf(stderr, "harness: connect %s: %s\n", e->redis_sock, r ? r->errstr : "oom");
        if (r)
            redisFree(r);
        return NULL;
    }
    struct timeval cmd = { 10, 0 };
    redisSetTimeout(r, cmd);
    if (redis_auth(e, r) != 0) {
        redisFree(r);
        return NULL;
    }
    return r;
}

static int redis_pings(struct h_env *e)
{
    struct timeval tv = { 0, 200000 };
    redisContext *r = redisConnectUnixWithTimeout(e->redis_sock, tv);
    int ok = 0;
    if (r && !r->err && redis_auth(e, r) == 0) {
        redisSetTimeout(r, tv);
        redisReply *rep = redisCommand(r, "PING");
        ok = rep && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0;
        if (rep)
            freeReplyObject(rep);
    }
    if (r)
        redisFree(r);
    return ok;
}

static const char *redis_not_ready(struct h_env *e)
{
    return redis_pings(e) ? NULL : "answering PING";
}

int h_redis_start(struct h_env *e)
{
    char log[320], redis_bin[256];
    const char *bin = getenv("REDIS_SERVER");
    snprintf(redis_bin, sizeof redis_bin, "%s", bin && bin[0] ? bin : "/usr/bin/redis-server");
    h_env_path(e, "redis.log", log, sizeof log);
    unlink(e->redis_sock);
    char *argv[] = { redis_bin, "--port", "0", "--unixsocket", e->redis_sock,
                     "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                     "--daemonize", "no", "--dir", e->dir, "--loglevel", "warning",
                     e->redis_password[0] ? "--requirepass" : NULL, e->redis_password, NULL };
    e->redis_pid = h_spawn_io(argv, log, log);
    if (e->redis_pid < 0)
        return -1;
    return wait_started(e, &e->redis_pid, "redis-server", log, redis_not_ready);
}

int h_redis_kill(struct h_env *e)
{
    if (e->redis_pid <= 0)
        return -1;
    kill(e->redis_pid, SIGKILL);
    int status;
    int rc = h_wait_exit(e->redis_pid, 5000, &status);
    e->redis_pid = 0;
    return rc;
}

/* --- rlockd -------------------------------------------------------------- */

static int unix_connects(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return 0;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path) {
        close(fd);
        return 0;
    }
    memcpy(sa.sun_path, path, n + 1);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/*
 * 1 when a session can be opened and the daemon reports every Redis connection
 * ready (or does not answer Stats at all, which then is not this harness's
 * business). One ready connection is not enough: a key routed to another one
 * would get UNAVAILABLE. A daemon that wants an auth token the harness does
 * not have answers the Hello: it serves, and its /readyz (on the env's metrics
 * socket) says whether every Redis connection is ready; with the test's own
 * metrics endpoint, the test waits for Redis itself.
 */
static int rlockd_serves(struct h_env *e)
{
    struct rlock_client *c = NULL;
    char err[256];
    struct rlock_options o = { .client_name = "itest-harness", .connect_timeout_ms = 1000 };
    enum rlock_err ce = rlock_connect(e->rlockd_addr, &o, &c, err, sizeof err);
    if (ce == RLOCK_ERR_UNAUTHENTICATED) {
        if (!unix_connects(e->metrics_sock))
            return 1;
        struct h_http_reply r;
        if (h_http_get(e->metrics_sock, "/readyz", 1000, &r) != 0)
            return 0;
        int ready = r.status == 200;
        h_http_free(&r);
        return ready;
    }
    if (ce != RLOCK_OK)
        return 0;
    struct rlock_stats st;
    memset(&st, 0, sizeof st);
    enum rlock_err rc = rlock_stats(c, 1000, &st);
    rlock_close(c);
    if (rc == RLOCK_OK)
        return st.redis_up != 0 && st.redis_connections_ready == st.redis_connections;
    return !(rc == RLOCK_ERR_UNAVAILABLE || rc == RLOCK_ERR_CLOSED ||
             rc == RLOCK_ERR_CONNECT || rc == RLOCK_ERR_DEADLINE);
}

static const char *rlockd_not_ready(struct h_env *e)
{
    if (!unix_connects(e->rlockd_sock))
        return "accepting connections";
    if (!rlockd_serves(e))
        return "serving sessions with every Redis connection ready";
    return NULL;
}

/* 1 when a session can be opened and answers a Ping (Redis need not be up). */
static int rlockd_pings(struct h_env *e)
{
    struct rlock_client *c = NULL;
    char err[256];
    struct rlock_options o = { .client_name = "itest-harness", .connect_timeout_ms = 1000 };
    if (rlock_connect(e->rlockd_addr, &o, &c, err, sizeof err) != RLOCK_OK)
        return 0;
    enum rlock_err rc = rlock_ping(c, 1000, NULL);
    rlock_close(c);
    return rc == RLOCK_OK;
}

static const char *rlockd_not_serving(struct h_env *e)
{
    if (!unix_connects(e->rlockd_sock))
        return "accepting connections";
    if (!rlockd_pings(e))
        return "answering Ping";
    return NULL;
}

/* Spawn rlockd with e's config and wait until not_ready(e) says it is ready. */
static int rlockd_start_until(struct h_env *e, const char *(*not_ready)(struct h_env *e))
{
    char log[320], bin[512];
    h_env_path(e, "rlockd.log", log, sizeof log);
    h_bin("rlockd", bin, sizeof bin);
    char *argv[] = { bin, "-c", e->conf, NULL };
    e->rlockd_pid = h_spawn_io(argv, log, log);
    if (e->rlockd_pid < 0)
        return -1;
    return wait_started(e, &e->rlockd_pid, "rlockd", log, not_ready);
}

int h_rlockd_start(struct h_env *e)
{
    return rlockd_start_until(e, rlockd_not_ready);
}

int h_rlockd_signal(struct h_env *e, int sig)
{
    if (e->rlockd_pid <= 0)
        return -1;
    int status;
    kill(e->rlockd_pid, sig);
    int rc = h_wait_exit(e->rlockd_pid, H_SIGNAL_DEADLINE_MS, &status);
    if (rc != 0) {
        fprintf(stderr, "harness: rlockd still running %d ms after signal %d; SIGKILL\n",
                H_SIGNAL_DEADLINE_MS, sig);
        kill(e->rlockd_pid, SIGKILL);
        h_wait_exit(e->rlockd_pid, 5000, &status);
    }
    e->rlockd_pid = 0;
    return rc;
}

/* --- env ----------------------------------------------------------------- */

const char *h_env_path(const struct h_env *e, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", e->dir, name);
    return buf;
}

int h_env_alive(const struct h_env *e)
{
    /* A peer's Redis belongs to the env it was started from, which watches it. */
    return (e->redis_shared || h_alive(e->redis_pid)) && h_alive(e->rlockd_pid);
}

void h_env_dump_logs(const struct h_env *e)
{
    char path[320];
    h_print_tail(h_env_path(e, "rlockd.log", path, sizeof path), H_LOG_TAIL_LINES);
    h_print_tail(h_env_path(e, "redis.log", path, sizeof path), 10);
}

int h_env_start(struct h_env *e, const char *extra_ini)
{
    return h_env_start_auth(e, NULL, extra_ini);
}

/*
 * Make e's dir, paths, prefix and config (see h_env_start_auth) and register
 * it for the clean-up at exit; no process is started. With redis_of, e's
 * rlockd is to use that env's Redis, password and key prefix instead of its
 * own. 0, or -1 after printing why (nothing is left behind then).
 */
static int env_prepare(struct h_env *e, const char *password, const char *extra_ini,
                       const struct h_env *redis_of, const char *topology, int proxied)
{
    static int seq;
    memset(e, 0, sizeof *e);
    if (redis_of != NULL)
        password = redis_of->redis_password;
    snprintf(e->redis_password, sizeof e->redis_password, "%s", password ? password : "");

    const char *base = getenv(H_BASE_ENV);
    if (!base || !base[0])
        base = getenv("TMPDIR");
    if (!base || !base[0])
        base = "/tmp";
    snprintf(e->dir, sizeof e->dir, "%s/env.XXXXXX", base);
    if (!mkdtemp(e->dir)) {
        fprintf(stderr, "harness: mkdtemp %s: %s\n", e->dir, strerror(errno));
        e->dir[0] = '\0';
        return -1;
    }
    h_env_path(e, "redis.sock", e->redis_sock, sizeof e->redis_sock);
    h_env_path(e, "rlockd.sock", e->rlockd_sock, sizeof e->rlockd_sock);
    h_env_path(e, "rlockd.conf", e->conf, sizeof e->conf);
    h_env_path(e, "proxy.sock", e->proxy_sock, sizeof e->proxy_sock);
    snprintf(e->rlockd_addr, sizeof e->rlockd_addr, "unix:%s", e->rlockd_sock);
    snprintf(e->prefix, sizeof e->prefix, "t%d_%d:", (int)getpid(), ++seq);
    if (redis_of != NULL) {
        snprintf(e->redis_sock, sizeof e->redis_sock, "%s", redis_of->redis_sock);
        snprintf(e->prefix, sizeof e->prefix, "%s", redis_of->prefix);
        e->redis_shared = 1;
    }
    if (topology != NULL)
        e->redis_shared = 1; /* the test runs the Redis servers; none is the env's */
    if (strlen(e->rlockd_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        fprintf(stderr, "harness: socket path too long: %s (set TMPDIR shorter)\n",
                e->rlockd_sock);
        h_rm_tree(e->dir);
        return -1;
    }

    char conf[2048];
    char auth[128] = "";
    if (e->redis_password[0])
        snprintf(auth, sizeof auth, "password = %s\n", e->redis_password);
    /* The metrics endpoint on a unix socket of the env, unless the test sets its own
     * (a [metrics] section with a listen line; other [metrics] keys may come alone). */
    char metrics[400] = "";
    h_env_path(e, "metrics.sock", e->metrics_sock, sizeof e->metrics_sock);
    const char *own = extra_ini != NULL ? strstr(extra_ini, "[metrics]") : NULL;
    if (own == NULL || strstr(own, "listen") == NULL)
        snprintf(metrics, sizeof metrics, "[metrics]\nlisten = unix:%s\n", e->metrics_sock);
    char where[1200];
    if (topology != NULL)
        snprintf(where, sizeof where, "%s", topology);
    else
        snprintf(where, sizeof where, "address = unix:%s\n",
                 proxied ? e->proxy_sock : e->redis_sock);
    int n = snprintf(conf, sizeof conf,
                     "[server]\nlisten = %s\n\n[redis]\n%skey_prefix = %s\n%s\n%s\n%s",
                     e->rlockd_addr, where, e->prefix, auth, metrics, extra_ini ? extra_ini : "");
    if (n < 0 || (size_t)n >= sizeof conf || write_file(e->conf, conf) != 0) {
        fprintf(stderr, "harness: cannot write %s\n", e->conf);
        h_rm_tree(e->dir);
        return -1;
    }

    envs_add(e);
    return 0;
}

/* Print e's config after a failed start and stop what was started. */
static int env_start_failed(struct h_env *e)
{
    char *conf = h_read_file(e->conf);
    fprintf(stderr, "harness: env start failed; config was:\n%s", conf ? conf : "(unreadable)\n");
    free(conf);
    h_env_stop(e);
    return -1;
}

int h_env_start_auth(struct h_env *e, const char *password, const char *extra_ini)
{
    if (env_prepare(e, password, extra_ini, NULL, NULL, 0) != 0)
        return -1;
    if (h_redis_start(e) != 0 || h_rlockd_start(e) != 0)
        return env_start_failed(e);
    return 0;
}

int h_env_start_proxied(struct h_env *e, const char *extra_ini)
{
    if (env_prepare(e, NULL, extra_ini, NULL, NULL, 1) != 0)
        return -1;
    if (h_redis_start(e) != 0)
        return env_start_failed(e);
    e->proxy = h_proxy_start(e->proxy_sock, e->redis_sock);
    if (e->proxy == NULL || h_rlockd_start(e) != 0)
        return env_start_failed(e);
    return 0;
}

static int env_start_peer(struct h_env *peer, const struct h_env *e, const char *extra_ini,
                          int proxied)
{
    if (env_prepare(peer, NULL, extra_ini, e, NULL, proxied) != 0)
        return -1;
    if (proxied && (peer->proxy = h_proxy_start(peer->proxy_sock, peer->redis_sock)) == NULL)
        return env_start_failed(peer);
    if (h_rlockd_start(peer) != 0)
        return env_start_failed(peer);
    return 0;
}

int h_env_start_peer(struct h_env *peer, const struct h_env *e, const char *extra_ini)
{
    return env_start_peer(peer, e, extra_ini, 0);
}

int h_env_start_peer_proxied(struct h_env *peer, const struct h_env *e, const char *extra_ini)
{
    return env_start_peer(peer, e, extra_ini, 1);
}

int h_env_start_topology(struct h_env *e, const char *redis_lines, const char *extra_ini)
{
    if (env_prepare(e, NULL, extra_ini, NULL, redis_lines, 0) != 0)
        return -1;
    if (h_rlockd_start(e) != 0)
        return env_start_failed(e);
    return 0;
}

int h_env_start_without_redis(struct h_env *e, const char *extra_ini)
{
    if (env_prepare(e, NULL, extra_ini, NULL, NULL, 0) != 0)
        return -1;
    if (rlockd_start_until(e, rlockd_not_serving) != 0)
        return env_start_failed(e);
    return 0;
}

static void env_stop_quiet(struct h_env *e)
{
    h_stop_pid(e->rlockd_pid, SIGTERM, H_STOP_GRACE_MS, "rlockd", NULL);
    e->rlockd_pid = 0;
    h_proxy_free(e->proxy);
    e->proxy = NULL;
    h_stop_pid(e->redis_pid, SIGTERM, H_STOP_GRACE_MS, "redis-server", NULL);
    e->redis_pid = 0;
    h_rm_tree(e->dir);
}

/*
 * A sanitizer report anywhere in rlockd.log (over all of the env's daemon
 * runs), or a daemon that ended badly on SIGTERM: the reason in buf, or NULL.
 * A sanitizer report is printed whole, since the log tail may miss its start.
 */
static const char *rlockd_trouble(const struct h_env *e, int stopped, int in_time, int status,
                                  char *buf, size_t len)
{
    static const char *const markers[] = { "Sanitizer", "runtime error:" };
    char path[320];
    char *log = h_read_file(h_env_path(e, "rlockd.log", path, sizeof path));
    const char *hit = NULL;
    for (size_t i = 0; log && i < sizeof markers / sizeof markers[0]; i++) {
        const char *p = strstr(log, markers[i]);
        if (p && (!hit || p < hit))
            hit = p;
    }
    if (hit) {
        while (hit > log && hit[-1] != '\n')
            hit--;
        fprintf(stderr, "---- sanitizer report in %s:\n%.16384s\n---- end\n", path, hit);
        snprintf(buf, len, "sanitizer report in rlockd.log (see above)");
    }
    free(log);
    if (hit)
        return buf;
    if (stopped && in_time && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char st[32];
        snprintf(buf, len, "rlockd ended with %s on SIGTERM", h_status_str(status, st, sizeof st));
        return buf;
    }
    return NULL;
}

void h_env_stop(struct h_env *e)
{
    envs_del(e);
    int stopped = e->rlockd_pid > 0, status = 0;
    int in_time = h_stop_pid(e->rlockd_pid, SIGTERM, H_STOP_GRACE_MS, "rlockd", &status) == 0;
    e->rlockd_pid = 0;
    char why[128];
    const char *trouble = rlockd_trouble(e, stopped, in_time, status, why, sizeof why);
    if (trouble)
        h_env_dump_logs(e);
    h_proxy_free(e->proxy);
    e->proxy = NULL;
    h_stop_pid(e->redis_pid, SIGTERM, H_STOP_GRACE_MS, "redis-server", NULL);
    e->redis_pid = 0;
    h_rm_tree(e->dir);
    if (trouble)
        ck_abort_msg("%s (env %s)", trouble, e->dir);
}

/* --- keys ---------------------------------------------------------------- */

const char *h_lock_key(const struct h_env *e, const char *resource, char *buf, size_t len)
{
    snprintf(buf, len, "%s{%s}", e->prefix, resource);
    return buf;
}

const char *h_fence_key(const struct h_env *e, const char *resource, char *buf, size_t len)
{
    snprintf(buf, len, "%s{%s}:fence", e->prefix, resource);
    return buf;
}

int h_key_exists(redisContext *r, const char *key)
{
    redisReply *rep = redisCommand(r, "EXISTS %s", key);
    int v = -1;
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer > 0;
    else
        fprintf(stderr, "harness: EXISTS %s: %s\n", key, rep ? "bad reply" : r->errstr);
    if (rep)
        freeReplyObject(rep);
    return v;
}

long long h_pttl(redisContext *r, const char *key)
{
    redisReply *rep = redisCommand(r, "PTTL %s", key);
    long long v = -3;
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    else
        fprintf(stderr, "harness: PTTL %s: %s\n", key, rep ? "bad reply" : r->errstr);
    if (rep)
        freeReplyObject(rep);
    return v;
}

int h_get(redisContext *r, const char *key, char *buf, size_t len)
{
    redisReply *rep = redisCommand(r, "GET %s", key);
    int v = -1;
    if (rep && rep->type == REDIS_REPLY_STRING) {
        snprintf(buf, len, "%s", rep->str);
        v = 1;
    } else if (rep && rep->type == REDIS_REPLY_NIL) {
        v = 0;
    } else {
        fprintf(stderr, "harness: GET %s: %s\n", key,
                rep && rep->type == REDIS_REPLY_ERROR ? rep->str : r->errstr);
    }
    if (rep)
        freeReplyObject(rep);
    return v;
}

long long h_redis_int(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    else if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
             rep->element[0]->type == REDIS_REPLY_INTEGER)
        v = rep->element[0]->integer;
    else
        fprintf(stderr, "harness: \"%s\": %s\n", fmt,
                !rep ? r->errstr : rep->type == REDIS_REPLY_ERROR ? rep->str : "not an integer");
    if (rep)
        freeReplyObject(rep);
    return v;
}

/* 1 when key holds a tombstone (a value no holder has, expiring by itself). */
static int is_tombstone(redisContext *r, const char *key)
{
    char val[128];
    return h_get(r, key, val, sizeof val) == 1 && strncmp(val, "tombstone:", 10) == 0;
}

static long long count_keys(redisContext *r, const struct h_env *e, char *example, size_t len,
                            int skip_tombstones)
{
    static const char fence_suffix[] = ":fence";
    const size_t slen = sizeof fence_suffix - 1;
    char pattern[96];
    snprintf(pattern, sizeof pattern, "%s*", e->prefix); /* prefixes hold no glob characters */
    if (example && len)
        example[0] = '\0';
    long long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *rep = redisCommand(r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
            rep->element[0]->type != REDIS_REPLY_STRING ||
            rep->element[1]->type != REDIS_REPLY_ARRAY) {
            fprintf(stderr, "harness: SCAN %s: %s\n", pattern, rep ? "bad reply" : r->errstr);
            if (rep)
                freeReplyObject(rep);
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        for (size_t i = 0; i < rep->element[1]->elements; i++) {
            const redisReply *k = rep->element[1]->element[i];
            if (k->type != REDIS_REPLY_STRING)
                continue;
            size_t klen = (size_t)k->len;
            if (klen >= slen && memcmp(k->str + klen - slen, fence_suffix, slen) == 0)
                continue;
            if (skip_tombstones && is_tombstone(r, k->str))
                continue;
            if (n++ == 0 && example && len)
                snprintf(example, len, "%s", k->str);
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    return n;
}

long long h_count_lock_keys(redisContext *r, const struct h_env *e, char *example, size_t len)
{
    return count_keys(r, e, example, len, 0);
}

long long h_count_held_keys(redisContext *r, const struct h_env *e, char *example, size_t len)
{
    return count_keys(r, e, example, len, 1);
}

int h_key_unheld(redisContext *r, const char *key)
{
    return !h_key_exists(r, key) || is_tombstone(r, key);
}

/* --- rlockd.log ----------------------------------------------------------- */

/* "2026-12-01T09:03:00.123Z" at the start of line: ms since the epoch, or -1. */
static int64_t log_stamp_ms(const char *line)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *rest = strptime(line, "%Y-%m-%dT%H:%M:%S", &tm);
    int ms;
    if (rest == NULL || sscanf(rest, ".%3dZ", &ms) != 1)
        return -1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

int h_log_find(const struct h_env *e, const char *text, int64_t *at_wall_ms)
{
    char path[320];
    char *log = h_read_file(h_env_path(e, "rlockd.log", path, sizeof path));
    const char *hit = log ? strstr(log, text) : NULL;
    if (hit != NULL && at_wall_ms != NULL) {
        while (hit > log && hit[-1] != '\n')
            hit--;
        *at_wall_ms = log_stamp_ms(hit);
    }
    free(log);
    return hit != NULL;
}

long long h_log_number_after(const struct h_env *e, const char *text, const char *after)
{
    char path[320];
    char *log = h_read_file(h_env_path(e, "rlockd.log", path, sizeof path));
    const char *line = log != NULL ? strstr(log, text) : NULL;
    const char *eol = line != NULL ? strchr(line, '\n') : NULL;
    const char *hit = line != NULL ? strstr(line, after) : NULL;
    long long n = -1;
    if (hit != NULL && (eol == NULL || hit < eol))
        n = strtoll(hit + strlen(after), NULL, 10);
    free(log);
    return n;
}

int h_log_count(const struct h_env *e, const char *text)
{
    char path[320];
    char *log = h_read_file(h_env_path(e, "rlockd.log", path, sizeof path));
    int n = 0;
    for (const char *p = log; p != NULL && (p = strstr(p, text)) != NULL; n++) {
        const char *eol = strchr(p, '\n');
        p = eol != NULL ? eol + 1 : p + strlen(p);
    }
    free(log);
    return n;
}

int h_log_wait(const struct h_env *e, const char *text, int timeout_ms, int64_t *at_wall_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        if (h_log_find(e, text, at_wall_ms))
            return 0;
        if (!h_env_alive(e) || h_now_ms() >= deadline) {
            fprintf(stderr, "harness: no line with \"%s\" in rlockd.log %s\n", text,
                    h_env_alive(e) ? "in time" : "before the env died");
            h_env_dump_logs(e);
            return -1;
        }
        h_sleep_ms(5);
    }
}

int h_redis_ok(redisContext *r, const char *cmd)
{
    redisReply *rep = redisCommand(r, cmd);
    int ok = rep != NULL && rep->type != REDIS_REPLY_ERROR;
    if (!ok)
        fprintf(stderr, "harness: %s: %s\n", cmd, rep ? rep->str : r->errstr);
    if (rep)
        freeReplyObject(rep);
    return ok ? 0 : -1;
}

long long h_redis_info_num(redisContext *r, const char *section, const char *field)
{
    redisReply *rep = redisCommand(r, "INFO %s", section);
    ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STRING, "INFO %s failed", section);
    const char *at = strstr(rep->str, field);
    long long v = at != NULL ? atoll(at + strlen(field)) : 0;
    freeReplyObject(rep);
    return v;
}

/* --- clients and output -------------------------------------------------- */

struct rlock_client *h_client(struct h_env *e, const struct rlock_options *opts)
{
    struct rlock_client *c = NULL;
    char err[256] = "";
    enum rlock_err rc = rlock_connect(e->rlockd_addr, opts, &c, err, sizeof err);
    if (rc != RLOCK_OK) {
        fprintf(stderr, "harness: rlock_connect %s: %s (%s)\n", e->rlockd_addr,
                rlock_strerror(rc), err);
        return NULL;
    }
    return c;
}

int64_t h_wait_key_gone(redisContext *r, const char *key, int timeout_ms, const struct h_env *e)
{
    int64_t start = h_now_ms();
    for (;;) {
        int ex = h_key_exists(r, key);
        if (ex == 0)
            return h_now_ms() - start;
        if (ex < 0)
            return -1;
        if (e && !h_env_alive(e)) {
            fprintf(stderr, "harness: the env died while waiting for %s to go\n", key);
            h_env_dump_logs(e);
            return -1;
        }
        if (h_now_ms() - start >= timeout_ms) {
            fprintf(stderr, "harness: %s still exists after %d ms (PTTL %lld)\n", key,
                    timeout_ms, h_pttl(r, key));
            return -1;
        }
        h_sleep_ms(5);
    }
}

int h_thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL) {
        fprintf(stderr, "harness: /proc/self/task: %s\n", strerror(errno));
        return -1;
    }
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

int64_t h_wait_stats_of(struct rlock_client *c, uint64_t held, uint64_t waiters, int timeout_ms,
                        struct rlock_stats *last)
{
    int64_t start = h_now_ms();
    struct rlock_stats st;
    for (;;) {
        memset(&st, 0, sizeof st);
        enum rlock_err rc = rlock_stats(c, 5000, &st);
        if (last)
            *last = st;
        if (rc != RLOCK_OK) {
            fprintf(stderr, "harness: Stats: %s: %s\n", rlock_strerror(rc),
                    rlock_last_error()->message);
            return -1;
        }
        if (st.held_locks == held && st.waiters == waiters)
            return h_now_ms() - start;
        if (h_now_ms() - start >= timeout_ms) {
            fprintf(stderr,
                    "harness: after %d ms the daemon has %llu held locks and %llu waiters "
                    "(want %llu and %llu)\n",
                    timeout_ms, (unsigned long long)st.held_locks,
                    (unsigned long long)st.waiters, (unsigned long long)held,
                    (unsigned long long)waiters);
            return -1;
        }
        h_sleep_ms(10);
    }
}

int64_t h_wait_token_gone(redisContext *r, const char *key, const char *token, int timeout_ms,
                          const struct h_env *e)
{
    int64_t start = h_now_ms();
    char val[256];
    for (;;) {
        int got = h_get(r, key, val, sizeof val);
        if (got == 0 || (got == 1 && strcmp(val, token) != 0))
            return h_now_ms() - start;
        if (got < 0)
            return -1;
        if (e && !h_env_alive(e)) {
            fprintf(stderr, "harness: the env died while waiting for %s to lose %s\n", key, token);
            h_env_dump_logs(e);
            return -1;
        }
        if (h_now_ms() - start >= timeout_ms) {
            fprintf(stderr, "harness: %s still holds %s after %d ms (PTTL %lld)\n", key, token,
                    timeout_ms, h_pttl(r, key));
            return -1;
        }
        h_sleep_ms(5);
    }
}

const char *h_rlock_err(struct rlock_client *c, enum rlock_err rc, char *buf, size_t len)
{
    char msg[256] = "";
    if (c)
        rlock_errmsg(c, msg, sizeof msg);
    snprintf(buf, len, "%s (%d): %s", rlock_strerror(rc), (int)rc, msg);
    return buf;
}

void h_lost_cb(struct rlock_client *c, const char *resource, const char *token, uint64_t fence,
               enum rlock_lost_reason reason, void *arg)
{
    (void)c;
    struct h_lost *l = arg;
    int64_t zero = 0;
    atomic_compare_exchange_strong(&l->first_ms, &zero, h_now_ms());
    atomic_store(&l->reason, (int)reason);
    atomic_fetch_add(&l->count, 1);
    fprintf(stderr, "lost: resource=%s token=%s fence=%llu reason=%s\n", resource, token,
            (unsigned long long)fence, rlock_lost_reason_str(reason));
}

/* --- runner -------------------------------------------------------------- */

/* Report and remove env dirs left behind by test processes that were killed. */
static void sweep_base(const char *base)
{
    DIR *d = opendir(base);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "env.", 4) != 0)
            continue;
        char dir[512], log[600];
        snprintf(dir, sizeof dir, "%s/%s", base, de->d_name);
        snprintf(log, sizeof log, "%s/rlockd.log", dir);
        fprintf(stderr, "harness: env %s was not stopped (its test failed or timed out)\n", dir);
        h_print_tail(log, H_LOG_TAIL_LINES);
        if (getenv("RLIT_KEEP") != NULL)
            fprintf(stderr, "harness: kept %s (RLIT_KEEP)\n", dir);
        else
            h_rm_tree(dir);
    }
    closedir(d);
    rmdir(base);
}

int h_run_suite(Suite *s)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char base[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(base, sizeof base, "%s/rlit.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    int have_base = mkdtemp(base) != NULL;
    if (have_base)
        setenv(H_BASE_ENV, base, 1);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_VERBOSE);
    int run = srunner_ntests_run(sr);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);

    if (have_base) {
        sweep_base(base);
        unsetenv(H_BASE_ENV);
    }
    if (run == 0)
        fprintf(stderr, "harness: no test ran: counting that as a failure\n");
    return (run == 0 || failed != 0) ? EXIT_FAILURE : EXIT_SUCCESS;
}
