/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_reload.c — SIGHUP re-reads the configuration file:
 *
 *  - a new log.level takes effect for what is logged next (debug lines
 *    appear, then info lines vanish);
 *  - a file with errors changes nothing: every problem is logged with its
 *    file and line, the daemon keeps serving with the old values, and the
 *    same change in a fixed file then applies;
 *  - keys that need a restart are named as such and keep their value while
 *    reloadable ones in the same file apply, the metrics endpoint moves;
 *  - a file valid on its own whose reloadable keys conflict with the running
 *    restart-only ones is refused as a whole.
 */
#include "harness.h"
#include "harness_raw.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Replace the first `from` in e's config file with `to` (which may hold several lines). */
static void conf_edit(struct h_env *e, const char *from, const char *to)
{
    char *text = h_read_file(e->conf);
    ck_assert_ptr_nonnull(text);
    char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "\"%s\" is not in %s:\n%s", from, e->conf, text);
    FILE *f = fopen(e->conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    ck_assert_int_eq(fclose(f), 0);
    free(text);
}

/* The 1-based number of the line of e's config file that starts with prefix. */
static int conf_line(const struct h_env *e, const char *prefix)
{
    char *text = h_read_file(e->conf);
    ck_assert_ptr_nonnull(text);
    int line = 1, found = 0;
    for (const char *p = text; *p != '\0'; line++) {
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            found = line;
            break;
        }
        const char *nl = strchr(p, '\n');
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    free(text);
    ck_assert_msg(found > 0, "no line \"%s\" in %s", prefix, e->conf);
    return found;
}

/* SIGHUP e's rlockd and wait for the log line that says how the reload ended. */
static char *reload(struct h_env *e, const char *until)
{
    size_t at = h_log_size(e);
    ck_assert_int_eq(kill(e->rlockd_pid, SIGHUP), 0);
    return h_log_wait_from(e, at, until, 5000);
}

/* Open a raw session named name and return the session timeout its Hello was granted. */
static uint32_t hello_timeout(struct h_env *e, const char *name)
{
    struct h_raw c;
    h_raw_open(&c, e);
    uint32_t t = h_raw_hello(&c, 1, name, 0);
    h_raw_close(&c);
    return t;
}

START_TEST(test_reload_log_level)
{
    struct h_env e;
    h_env_start_or_fail(&e, "[log]\nlevel = info\n");
    size_t at = h_log_size(&e);
    hello_timeout(&e, "at-info");
    char *log = h_log_wait_from(&e, at, "at-info): open", 5000);
    ck_assert_msg(strstr(log, "): accepted") == NULL, "a debug line at level info:\n%s", log);
    free(log);

    conf_edit(&e, "level = info", "level = debug");
    log = reload(&e, "reloaded ");
    ck_assert_msg(strstr(log, "reload: log.level: info -> debug") != NULL, "%s", log);
    free(log);
    at = h_log_size(&e);
    hello_timeout(&e, "at-debug");
    log = h_log_wait_from(&e, at, "at-debug): open", 5000);
    ck_assert_msg(strstr(log, " debug session ") != NULL && strstr(log, "): accepted") != NULL,
                  "no debug line at level debug:\n%s", log);
    free(log);

    conf_edit(&e, "level = debug", "level = warn");
    log = reload(&e, "reload: log.level: debug -> warn");
    free(log);
    at = h_log_size(&e);
    hello_timeout(&e, "at-warn"); /* answered: its open line would be logged by now */
    struct h_raw bad;
    h_raw_open(&bad, &e);
    h_raw_send_hello(&bad, 1, "warn\x01", 0);
    log = h_log_wait_from(&e, at, "refused Hello", 5000); /* a warning still is logged */
    ck_assert_msg(strstr(log, "at-warn") == NULL, "an info line at level warn:\n%s", log);
    free(log);
    h_raw_close(&bad);
    h_env_stop(&e);
}
END_TEST

START_TEST(test_reload_broken_file_keeps_config)
{
    struct h_env e;
    h_env_start_or_fail(&e, "[session]\ntimeout = 4s\n");
    ck_assert_uint_eq(hello_timeout(&e, "before"), 4000);

    /* The wanted change, plus an unknown key and a bad value on known lines. */
    conf_edit(&e, "timeout = 4s", "timeout = 6s\nbogus = 1\n\n[limits]\ndefault_ttl = forever");
    int bogus = conf_line(&e, "bogus = 1"), ttl = conf_line(&e, "default_ttl = forever");
    char *log = reload(&e, "refused; the running configuration stays");
    char want[512];
    snprintf(want, sizeof want, "%s:%d: session.bogus: unknown key", e.conf, bogus);
    ck_assert_msg(strstr(log, want) != NULL, "no \"%s\" in:\n%s", want, log);
    snprintf(want, sizeof want, "%s:%d: limits.default_ttl: not a duration", e.conf, ttl);
    ck_assert_msg(strstr(log, want) != NULL, "no \"%s\" in:\n%s", want, log);
    ck_assert_msg(strstr(log, "reloaded ") == NULL, "reloaded anyway:\n%s", log);
    free(log);

    /* Still serving, with the old values. */
    h_assert_env_alive(&e);
    ck_assert_uint_eq(hello_timeout(&e, "after-broken"), 4000);
    struct rlock_client *c = h_client_or_fail(&e, NULL);
    struct rlock_lock *l = h_acquire_ok(c, "reload-1", NULL);
    ck_assert_uint_eq(rlock_lock_ttl_ms(l), 30000);
    rlock_lock_free(l);
    rlock_close(c);

    /* Fixed, the same change applies. */
    conf_edit(&e, "bogus = 1\n", "");
    conf_edit(&e, "default_ttl = forever", "default_ttl = 20s");
    log = reload(&e, "reloaded ");
    ck_assert_msg(strstr(log, "reload: session.timeout: 4s -> 6s") != NULL, "%s", log);
    free(log);
    ck_assert_uint_eq(hello_timeout(&e, "after-fix"), 6000);
    c = h_client_or_fail(&e, NULL);
    l = h_acquire_ok(c, "reload-2", NULL);
    ck_assert_uint_eq(rlock_lock_ttl_ms(l), 20000);
    rlock_lock_free(l);
    rlock_close(c);
    h_env_stop(&e);
}
END_TEST

START_TEST(test_reload_restart_keys_and_metrics)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    char moved[320];
    h_env_path(&e, "metrics2.sock", moved, sizeof moved);
    char to[400];
    snprintf(to, sizeof to, "listen = unix:%s", moved);

    conf_edit(&e, "key_prefix = ", "pool_size = 3\nkey_prefix = ");
    char from[400];
    snprintf(from, sizeof from, "listen = unix:%s", e.metrics_sock);
    conf_edit(&e, from, to);
    char *log = reload(&e, "reloaded ");
    ck_assert_msg(strstr(log, "redis.pool_size: 2 -> 3: needs a restart; the running value "
                              "stays") != NULL,
                  "%s", log);
    ck_assert_msg(strstr(log, " warn ") != NULL, "the restart notice is not a warning:\n%s", log);
    free(log);
    struct rlock_stats st;
    h_stats_or_fail(&e, &st);
    ck_assert_uint_eq(st.redis_connections, 2);

    struct h_http_reply r;
    ck_assert_msg(h_http_get(moved, "/healthz", 2000, &r) == 0, "%s", r.error);
    ck_assert_int_eq(r.status, 200);
    h_http_free(&r);
    ck_assert_msg(h_http_get(e.metrics_sock, "/healthz", 2000, &r) != 0,
                  "the old metrics socket still answers");
    h_env_stop(&e);
}
END_TEST

START_TEST(test_reload_merged_conflict)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    /* Valid alone: the server moves, metrics take its old address. But the server cannot
     * move without a restart, so the merge would put both on one address. */
    char old_listen[400], new_listen[400], metrics_from[400], metrics_to[400];
    snprintf(old_listen, sizeof old_listen, "listen = %s", e.rlockd_addr);
    snprintf(new_listen, sizeof new_listen, "listen = unix:%s/other.sock", e.dir);
    snprintf(metrics_from, sizeof metrics_from, "listen = unix:%s", e.metrics_sock);
    snprintf(metrics_to, sizeof metrics_to, "listen = %s", e.rlockd_addr);
    conf_edit(&e, metrics_from, metrics_to);
    conf_edit(&e, old_listen, new_listen);
    char *log = reload(&e, "refused; the running configuration stays");
    ck_assert_msg(strstr(log, " error reload: metrics.listen: the same address as "
                              "server.listen\n") != NULL,
                  "%s", log);
    free(log);
    struct h_http_reply r;
    ck_assert_msg(h_http_get(e.metrics_sock, "/healthz", 2000, &r) == 0, "%s", r.error);
    ck_assert_int_eq(r.status, 200);
    h_http_free(&r);
    ck_assert_uint_eq(hello_timeout(&e, "after-conflict"), 10000);
    h_env_stop(&e);
}
END_TEST

/*
 * A reload that lowers redis.command_timeout applies to calls at once: a
 * connection timer armed for the old, longer timeout must not hide a stall.
 */
START_TEST(test_reload_lower_command_timeout)
{
    struct h_fixture f;
    h_fixture_start(&f, "[redis]\ncommand_timeout = 20s\n[limits]\nmin_ttl = 60s\n"
                        "default_ttl = 60s\n");
    /* A call on the resource's connection arms its timer for 20 s from now. */
    struct rlock_lock *l = h_acquire_ok(f.c, "reload/timeout", NULL);
    h_release_gone(&f, f.c, l);
    rlock_lock_free(l);
    conf_edit(&f.e, "command_timeout = 20s", "command_timeout = 300ms");
    conf_edit(&f.e, "min_ttl = 60s", "min_ttl = 1s");
    free(reload(&f.e, "reloaded"));

    h_sigstop(f.e.redis_pid, "redis-server");
    struct rlock_acquire_opts o = {.ttl_ms = 60000};
    int64_t t0 = h_now_ms();
    enum rlock_err rc = rlock_acquire(f.c, "reload/timeout", &o, 5000, &l);
    int64_t took = h_now_ms() - t0;
    h_sigcont(f.e.redis_pid, "redis-server");
    printf("reload: FIGURE acquire on a stalled Redis after command_timeout 20 s -> 300 ms: "
           "%s after %lld ms\n", rlock_strerror(rc), (long long)took);
    ck_assert_msg(rc == RLOCK_ERR_UNAVAILABLE && took < 3000,
                  "want UNAVAILABLE after about 300 ms, got %s after %lld ms",
                  rlock_strerror(rc), (long long)took);
    h_fixture_stop(&f);
}
END_TEST

/* A unix socket listening at path (another program holding the address); its fd. */
static int listen_unix(const char *path)
{
    struct sockaddr_un sa;
    h_unix_sockaddr(&sa, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    return fd;
}

/*
 * A reload moving metrics.listen to an address another program holds: the endpoint stays
 * where it was (not off), and the log says so. A second daemon started on a busy unix
 * address names it without a stray port.
 */
START_TEST(test_reload_metrics_busy)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    char busy[320];
    h_env_path(&e, "busy.sock", busy, sizeof busy);
    int fd = listen_unix(busy);
    char from[400], to[400];
    snprintf(from, sizeof from, "listen = unix:%s", e.metrics_sock);
    snprintf(to, sizeof to, "listen = unix:%s", busy);
    conf_edit(&e, from, to);
    char expect[800];
    snprintf(expect, sizeof expect, "cannot listen on unix:%s; the endpoint stays on unix:%s",
             busy, e.metrics_sock);
    free(reload(&e, expect));
    struct h_http_reply r;
    ck_assert_msg(h_http_get(e.metrics_sock, "/healthz", 2000, &r) == 0,
                  "the endpoint went off after a failed move: %s", r.error);
    ck_assert_int_eq(r.status, 200);
    h_http_free(&r);

    char conf[320], log[320];
    h_env_path(&e, "second.conf", conf, sizeof conf);
    h_env_path(&e, "second.log", log, sizeof log);
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[server]\nlisten = unix:%s\n[metrics]\nlisten =\n", busy);
    ck_assert_int_eq(fclose(f), 0);
    char bin[512];
    char *argv[] = {(char *)h_bin("rlockd", bin, sizeof bin), "-c", conf, NULL};
    pid_t pid = h_spawn_io(argv, log, log);
    ck_assert_int_gt(pid, 0);
    int status;
    ck_assert_msg(h_wait_exit(pid, 10000, &status) == 0, "rlockd on a busy address kept running");
    char *text = h_read_file(log);
    ck_assert_ptr_nonnull(text);
    snprintf(expect, sizeof expect, "cannot listen on unix:%s: Address already in use\n", busy);
    ck_assert_msg(strstr(text, expect) != NULL, "want \"%s\" in:\n%s", expect, text);
    free(text);
    close(fd);
    h_env_stop(&e);
}
END_TEST

/*
 * Extend with ttl_ms 0 keeps the lock's own ttl, granted under the limits of its time: a
 * reload raising min_ttl above it does not make it INVALID (a new ttl below it is).
 */
START_TEST(test_reload_extend_own_ttl)
{
    struct h_fixture f;
    h_fixture_start(&f, "[limits]\nmin_ttl = 1s\n");
    struct rlock_acquire_opts o = {.ttl_ms = 2000};
    struct rlock_lock *l = h_acquire_ok(f.c, "reload/extend", &o);
    conf_edit(&f.e, "min_ttl = 1s", "min_ttl = 5s");
    free(reload(&f.e, "reloaded"));
    h_assert_ok(f.c, rlock_extend(l, 0, 5000));
    ck_assert_int_eq(rlock_extend(l, 2000, 5000), RLOCK_ERR_INVALID);
    h_assert_ok(f.c, rlock_release(l, 5000));
    h_fixture_stop(&f);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_reload_log_level, test_reload_broken_file_keeps_config,
                            test_reload_restart_keys_and_metrics, test_reload_merged_conflict,
                            test_reload_lower_command_timeout, test_reload_metrics_busy,
                            test_reload_extend_own_ttl};
    return h_run_tests("reload", 120, tests, H_LEN(tests));
}
