/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness.h — the integration-test harness: a private redis-server and a real
 * rlockd per test case, hiredis access to the keys, process helpers with
 * deadlines, and a Check runner that fails when no test ran.
 *
 * Every env lives in its own temp dir (unix sockets only, no ports), uses its
 * own key prefix, and kills its processes by pid. Children get
 * PR_SET_PDEATHSIG(SIGKILL), so a test process that dies (an assertion in a
 * forked Check test, a Check timeout) takes them along; the env dir of a test
 * that did not stop its env (a failed assertion ends a forked test at once)
 * is reported with the tail of its rlockd.log and removed by h_run_suite.
 * Spawn from the thread that will wait for the children: PR_SET_PDEATHSIG
 * fires when the spawning thread ends.
 */
#ifndef RLOCK_ITEST_HARNESS_H
#define RLOCK_ITEST_HARNESS_H

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>
#include "rlock.h"
#include "harness_proxy.h"

struct h_env {
    char dir[256];          /* private temp dir (mkdtemp under $TMPDIR or /tmp) */
    char redis_sock[320];   /* DIR/redis.sock */
    pid_t redis_pid;
    char rlockd_sock[320];  /* DIR/rlockd.sock */
    char rlockd_addr[330];  /* "unix:DIR/rlockd.sock", for rlock_connect and rlockctl --server */
    pid_t rlockd_pid;
    char conf[320];         /* DIR/rlockd.conf */
    char prefix[64];        /* unique key prefix for this env, e.g. "t<pid>_<n>:" */
    char redis_password[64]; /* requirepass of the env's redis-server; empty = none */
    char metrics_sock[320];  /* DIR/metrics.sock: rlockd's HTTP endpoint, unless the test's
                                extra_ini has a [metrics] section of its own */
    int redis_shared;        /* redis_sock is another env's Redis (h_env_start_peer): not ours
                                to start, stop or watch */
    struct h_proxy *proxy;   /* h_env_start_proxied: between rlockd and Redis, else NULL */
    char proxy_sock[320];    /* DIR/proxy.sock, where rlockd connects then */
};

/* Start redis-server (unix socket only, --port 0, --save "", no appendonly) and
 * rlockd with a config of [server] listen = unix:DIR/rlockd.sock, [redis]
 * address = unix:DIR/redis.sock, key_prefix = e->prefix, plus extra_ini appended
 * verbatim (may be NULL; it may add e.g. "[session]\ntimeout = 2s\n" but must not
 * repeat listen/address/key_prefix). Waits (deadline 10 s, checking the child is
 * alive) until each accepts connections (rlockd: sessions served, every Redis
 * connection ready). Returns 0, or -1 after printing why. */
int h_env_start(struct h_env *e, const char *extra_ini);
/* The same with redis-server requiring password (AUTH); rlockd's config and the
 * harness's own connections use it. */
int h_env_start_auth(struct h_env *e, const char *password, const char *extra_ini);
/* Kill rlockd and redis by pid (SIGTERM, then SIGKILL after 3 s), reap them, remove DIR.
 * Fails the running test (ck_abort) when rlockd.log holds a sanitizer report or rlockd
 * ended with anything but exit 0 on this SIGTERM; the log is printed first. */
void h_env_stop(struct h_env *e);
/* The same without redis-server: only rlockd is started (its [redis] address names the env's
 * socket, where nothing listens yet), and the wait is until it answers a Ping. Start Redis
 * later with h_redis_start. */
int h_env_start_without_redis(struct h_env *e, const char *extra_ini);
/* A second rlockd on the Redis of e (its socket, password and key prefix): peer gets a dir,
 * listening socket, config (extra_ini as for h_env_start) and rlockd.log of its own, and
 * shares e's Redis without owning it. h_env_stop(peer) stops its rlockd only; stop peers
 * before e. Returns 0, or -1 after printing why. */
int h_env_start_peer(struct h_env *peer, const struct h_env *e, const char *extra_ini);
/* The same with the peer's Redis connections through a fault-injecting proxy (peer->proxy,
 * as for h_env_start_proxied); e's rlockd and the harness's connections go straight to Redis. */
int h_env_start_peer_proxied(struct h_env *peer, const struct h_env *e, const char *extra_ini);
/* rlockd alone on Redis servers the test runs itself (Sentinel, Cluster): its [redis] section
 * gets redis_lines (each ending in "\n", e.g. "sentinels = ...\nmaster_name = m\n") instead
 * of the env's address; extra_ini as for h_env_start. The env owns no Redis (h_redis and
 * h_redis_kill do not apply); waits as h_rlockd_start does. 0, or -1 after printing why. */
int h_env_start_topology(struct h_env *e, const char *redis_lines, const char *extra_ini);
/* The same as h_env_start, with rlockd's Redis connections through a fault-injecting proxy
 * (harness_proxy.h: e->proxy, on DIR/proxy.sock) run by a thread of the test process; the
 * harness's own connections (h_redis) go straight to Redis. h_env_stop frees the proxy
 * once rlockd has stopped: release what it holds before, or the shutdown waits for it. */
int h_env_start_proxied(struct h_env *e, const char *extra_ini);
/* kill -9 redis and reap it; and start it again on the same socket path (waits until ready). */
int h_redis_kill(struct h_env *e);
int h_redis_start(struct h_env *e);
/* kill -SIG rlockd and reap (for SIGKILL / SIGTERM tests); start rlockd again with the same conf. */
int h_rlockd_signal(struct h_env *e, int sig);
int h_rlockd_start(struct h_env *e);

/* A synchronous hiredis connection to the env's redis (NULL on failure). */
redisContext *h_redis(struct h_env *e);
/* "PREFIX{resource}" and "PREFIX{resource}:fence" written into buf. */
const char *h_lock_key(const struct h_env *e, const char *resource, char *buf, size_t len);
const char *h_fence_key(const struct h_env *e, const char *resource, char *buf, size_t len);
/* 1 if the key exists, 0 if not, -1 on error. */
int h_key_exists(redisContext *r, const char *key);

/* Connect a client to the env's rlockd with opts (NULL = defaults); NULL on failure (prints why). */
struct rlock_client *h_client(struct h_env *e, const struct rlock_options *opts);

/* Absolute path of a built executable in build/bin (e.g. "rlockd", "rlockctl", "rlock-holder"). */
const char *h_bin(const char *name, char *buf, size_t len);
/* fork+exec argv[0] (a path) with argv; stdout to stdout_path if not NULL (append), stderr inherited.
 * The child gets PR_SET_PDEATHSIG(SIGKILL) so nothing outlives a crashed test. Returns pid or -1. */
pid_t h_spawn(char *const argv[], const char *stdout_path);
/* Wait up to timeout_ms for pid to exit; 0 and *status (waitpid status) on exit, -1 on timeout. */
int h_wait_exit(pid_t pid, int timeout_ms, int *status);
/* Milliseconds on CLOCK_MONOTONIC. */
int64_t h_now_ms(void);
/* Sleep ms milliseconds. */
void h_sleep_ms(int ms);
/* Poll cond(arg) every 10 ms until it returns non-zero or timeout_ms passes; returns the last value. */
int h_wait_for(int (*cond)(void *arg), void *arg, int timeout_ms);
/* Read a whole small file into a malloc'd NUL-terminated buffer (NULL on error). */
char *h_read_file(const char *path);
/* The text of lua/NAME.lua from the source tree (the file rlockd embeds), malloc'd; fails the
 * test when it cannot be read. */
char *h_lua_script(const char *name);
/* EVAL text with keys[n] then args[m] (n + m <= 64) on r: the reply, an error reply
 * included; fails the test when the connection is lost. */
redisReply *h_eval(redisContext *r, const char *text, const char *const *keys, int n,
                   const char *const *args, int m);
/* Run a suite (Check) and return the exit code for main(): non-zero if any test failed OR zero ran. */
int h_run_suite(Suite *s);

/* tests/integration/holder.c builds build/bin/rlock-holder:
 *   rlock-holder ADDR RESOURCE [TTL_MS] [SESSION_TIMEOUT_MS]
 * connects, acquires RESOURCE (wait 30 s; watchdog on), prints "HELD <fence> <token>\n" and
 * flushes, then polls rlock_lock_state every 20 ms; when the lock is LOST prints
 * "LOST <reason-name>\n", flushes and exits 3. On acquire failure prints "FAIL <err>\n", exits 2.
 */

/* --- additions beyond the fixed contract --------------------------------- */

/* 1 while pid (a child of this process) has not exited; reaps it if it has. */
int h_alive(pid_t pid);
/* Like h_spawn, with stderr too redirected (appending) when stderr_path is not NULL. */
pid_t h_spawn_io(char *const argv[], const char *stdout_path, const char *stderr_path);
/* Send sig to pid, SIGKILL it after grace_ms, reap it; *status (may be NULL) gets the wait
 * status. Returns 0 when it left in time by itself, -1 when it needed the SIGKILL. */
int h_stop_pid(pid_t pid, int sig, int grace_ms, const char *what, int *status);
/* Print the last lines of the file at path to stderr. */
void h_print_tail(const char *path, int lines);
/* Remove a directory tree (no symlinks followed). */
void h_rm_tree(const char *dir);
/* A private directory holding the resume key file several daemons share. */
struct h_keydir {
    char dir[128];
    char ini[512]; /* [session] resume_key_file = DIR/resume.key, plus extra */
};
/* Make one (extra: more configuration after that line, or NULL); fails the test if it cannot. */
void h_keydir_make(struct h_keydir *k, const char *extra);
void h_keydir_remove(struct h_keydir *k);
/* 1 when no process pid exists any more, or only its zombie (pid need not be our child). */
int h_pid_gone(pid_t pid);
/* 1 while both redis-server and rlockd of e are running. */
int h_env_alive(const struct h_env *e);
/* Print the last lines of DIR/rlockd.log and DIR/redis.log to stderr. */
void h_env_dump_logs(const struct h_env *e);
/* "DIR/name" written into buf. */
const char *h_env_path(const struct h_env *e, const char *name, char *buf, size_t len);

/* PTTL of key: >= 0 ms, -1 no expiry, -2 no key, -3 on error. */
long long h_pttl(redisContext *r, const char *key);
/* GET key into buf: 1 found, 0 no key, -1 on error. */
int h_get(redisContext *r, const char *key, char *buf, size_t len);
/* The first reply of command fmt as an integer; -1 (and a message) on error. */
long long h_redis_int(redisContext *r, const char *fmt, ...);

/*
 * Wait up to timeout_ms for a line starting with prefix in the file at path
 * (a child's stdout), while pid stays alive (pid <= 0: no check). Copies the
 * whole line (without newline) into line. Returns 0 when found, -1 on timeout
 * or when pid exits first (prints which, and the file so far).
 */
int h_wait_line(const char *path, const char *prefix, pid_t pid, int timeout_ms, char *line,
                size_t len);

/* The state letter of process pid in /proc/PID/stat ('R', 'S', 'T', ...), or 0 if unknown. */
char h_proc_state(pid_t pid);
/* SIGSTOP pid and wait (at most 2 s) until it is stopped; fails the test otherwise. */
void h_sigstop(pid_t pid, const char *what);
/* SIGCONT pid; fails the test when that is impossible. */
void h_sigcont(pid_t pid, const char *what);
/* CPU time (user + system) pid has used so far, in ms; -1 if unknown. */
int64_t h_proc_cpu_ms(pid_t pid);
/* VmRSS of pid in KiB, or -1. */
long h_proc_rss_kib(pid_t pid);
/* Milliseconds since the epoch (CLOCK_REALTIME), the clock of rlockd.log's timestamps. */
int64_t h_wall_ms(void);

/*
 * The first line of e's rlockd.log that contains text: 1 and, when at_wall_ms is not NULL,
 * its timestamp (ms since the epoch) in *at_wall_ms; 0 when there is none (yet).
 */
int h_log_find(const struct h_env *e, const char *text, int64_t *at_wall_ms);
/*
 * In the first line of e's rlockd.log that contains text, the number that follows `after`
 * (e.g. "; noticed "); -1 when there is no such line or it does not say `after`.
 */
long long h_log_number_after(const struct h_env *e, const char *text, const char *after);
/* The number of lines of e's rlockd.log that contain text. */
int h_log_count(const struct h_env *e, const char *text);
/* Wait up to timeout_ms for such a line (e's processes must stay alive); 0 found, -1 not. */
int h_log_wait(const struct h_env *e, const char *text, int timeout_ms, int64_t *at_wall_ms);
/* Run cmd (no arguments to quote) on r: 0 unless it failed or Redis answered an error. */
int h_redis_ok(redisContext *r, const char *cmd);
/* The number after field (e.g. "errorstat_NOPERM:count=") in INFO section; 0 when absent. */
long long h_redis_info_num(redisContext *r, const char *section, const char *field);

/*
 * Servers on loopback TCP ports (harness_tcp.c), for Sentinel and Cluster. A
 * port found free may be taken by another program before the server started
 * on it binds it: wait for the server with h_tcp_redis_wait, and start it
 * again on another port when that fails.
 */
/* A TCP port on 127.0.0.1 that nothing was bound to when asked. */
int h_free_port(void);
/* The pid (INFO server's process_id) of the server answering on 127.0.0.1:port, after AUTH
 * with password (NULL or "": none); 0 when nothing answers or it gives none. */
pid_t h_tcp_redis_pid(int port, const char *password);
/* Wait up to timeout_ms until the server answering on 127.0.0.1:port is pid (our child): 0;
 * -1 when pid exits first (its port was taken, most likely) or the time runs out. */
int h_tcp_redis_wait(pid_t pid, int port, const char *password, int timeout_ms);

/* Status-from-waitpid as text: "exit 3", "signal 9". */
const char *h_status_str(int status, char *buf, size_t len);

/*
 * Wait up to timeout_ms for every pid in pids[n] to exit, checking every
 * 50 ms that e's processes (if e is not NULL) are still alive. Statuses go
 * to statuses[n] (may be NULL). Returns 0 when all exited, -1 on timeout or
 * when the env died (prints which).
 */
int h_wait_all(const pid_t *pids, int n, int timeout_ms, int *statuses, const struct h_env *e);

/*
 * Poll (every 5 ms) until key no longer exists, at most timeout_ms, checking
 * that e's processes (if e is not NULL) stay alive. Returns the ms it took,
 * or -1 on timeout / error / a dead env (prints which).
 */
int64_t h_wait_key_gone(redisContext *r, const char *key, int timeout_ms, const struct h_env *e);

/*
 * The number of lock keys of e in Redis: keys with e's prefix, less the fence
 * keys ("...:fence", which outlive their locks by design). The first one found
 * goes to example (may be NULL). -1 on error.
 */
long long h_count_lock_keys(redisContext *r, const struct h_env *e, char *example, size_t len);
/*
 * The same less tombstones ("tombstone:..." values, which keep a lock taken
 * until a lost holder's promise is over and expire by themselves).
 */
long long h_count_held_keys(redisContext *r, const struct h_env *e, char *example, size_t len);
/* 1 when key holds no token: it is gone, or a tombstone. */
int h_key_unheld(redisContext *r, const char *key);

/* The number of threads of this process (entries of /proc/self/task); -1 on error. */
int h_thread_count(void);

/*
 * Poll the daemon's Stats through client c every 10 ms until held_locks == held
 * and waiters == waiters, at most timeout_ms. Returns the ms it took, or -1 on
 * timeout or when Stats fails (prints why); *last (may be NULL) gets the last
 * Stats read. (h_wait_stats does the same through a fresh client of an env.)
 */
int64_t h_wait_stats_of(struct rlock_client *c, uint64_t held, uint64_t waiters, int timeout_ms,
                        struct rlock_stats *last);
/* The same until key no longer holds token (it may be gone or hold another value). */
int64_t h_wait_token_gone(redisContext *r, const char *key, const char *token, int timeout_ms,
                          const struct h_env *e);

/* "rlock_strerror(rc): <the client's last message>" for a failed call on c. */
const char *h_rlock_err(struct rlock_client *c, enum rlock_err rc, char *buf, size_t len);

/* Assert that a librlock call on client c returned RLOCK_OK. */
#define h_assert_ok(c, expr)                                                                  \
    do {                                                                                      \
        enum rlock_err h_rc_ = (expr);                                                        \
        char h_msg_[320];                                                                     \
        ck_assert_msg(h_rc_ == RLOCK_OK, "%s failed: %s", #expr,                              \
                      h_rlock_err((c), h_rc_, h_msg_, sizeof h_msg_));                        \
    } while (0)

/*
 * A lost-lock recorder: pass h_lost_cb as rlock_options.on_lost and a zeroed
 * struct h_lost as on_lost_arg. Safe to read from the test thread.
 */
struct h_lost {
    atomic_int count;
    atomic_int reason;        /* of the latest call */
    _Atomic int64_t first_ms; /* h_now_ms() of the first call, 0 before */
};
void h_lost_cb(struct rlock_client *c, const char *resource, const char *token, uint64_t fence,
               enum rlock_lost_reason reason, void *arg);

/* Assert that e's processes are alive, printing their logs when not. */
#define h_assert_env_alive(e)                                                                 \
    do {                                                                                      \
        if (!h_env_alive(e))                                                                  \
            h_env_dump_logs(e);                                                               \
        ck_assert_msg(h_env_alive(e), "redis-server or rlockd died (dir %s)", (e)->dir);      \
    } while (0)

/* Start an env or fail the test. */
#define h_env_start_or_fail(e, extra)                                                         \
    ck_assert_msg(h_env_start((e), (extra)) == 0, "could not start redis-server + rlockd")

/* The size of e's rlockd.log now: what is logged later starts there. */
size_t h_log_size(const struct h_env *e);
/*
 * rlockd.log from offset on (malloc'd), once it contains needle; polls every 20 ms and
 * fails the test, printing the log's tail, when timeout_ms passes first.
 */
char *h_log_wait_from(const struct h_env *e, size_t offset, const char *needle, int timeout_ms);

/* --- HTTP on the metrics endpoint (harness_http.c) ------------------------ */

struct sockaddr_un;
/* Fill *sa with the unix socket address path; fails the test when path does not fit. */
void h_unix_sockaddr(struct sockaddr_un *sa, const char *path);

/* One HTTP reply: head and body share one allocation; free with h_http_free. */
struct h_http_reply {
    int status;       /* 200, 503, ... */
    char *head;       /* status line and headers, NUL-terminated */
    char *body;       /* the body, NUL-terminated */
    char error[256];  /* why h_http_get failed */
};
/*
 * GET path with HTTP/1.0 from the unix socket at sock_path (e.g. e->metrics_sock), the
 * whole exchange within timeout_ms. 0 with *out filled, or -1 with out->error set.
 */
int h_http_get(const char *sock_path, const char *path, int timeout_ms, struct h_http_reply *out);
/* Send the n bytes of req as they are and read the reply the same way. */
int h_http_request(const char *sock_path, const char *req, size_t n, int timeout_ms,
                   struct h_http_reply *out);
void h_http_free(struct h_http_reply *r);
/*
 * The value of the sample of e's /metrics named sample (with its labels, as the text shows
 * them: 'rlockd_grants_total', 'rlockd_acquires_total{result="ok"}'); -1 when there is
 * none. Fails the test when /metrics does not answer.
 */
double h_metric(const struct h_env *e, const char *sample);

/* --- test bodies: fixture, assertions, holder, threads, suites ----------- */
/* (harness_fixture.c; every function here fails the running test on error) */

/* h_client, failing the test when it cannot connect. */
struct rlock_client *h_client_or_fail(struct h_env *e, const struct rlock_options *opts);

/* The usual test setup: an env, a hiredis connection to its redis and (when started with
 * h_fixture_start) one client of its rlockd, whose lost locks are recorded in lost. */
struct h_fixture {
    struct h_env e;
    struct rlock_client *c; /* NULL after h_fixture_start_env */
    redisContext *r;
    struct h_lost lost;     /* c's on_lost calls */
};
/* Start the env (extra_ini as for h_env_start), connect r, and connect c (on_lost recorded
 * in f->lost). f must stay in place until h_fixture_stop. */
void h_fixture_start(struct h_fixture *f, const char *extra_ini);
/* The same without a client (f->c stays NULL; a test may set it later, and stop closes it). */
void h_fixture_start_env(struct h_fixture *f, const char *extra_ini);
/* h_fixture_start with rlockd's Redis connections through the proxy (h_env_start_proxied). */
void h_fixture_start_proxied(struct h_fixture *f, const char *extra_ini);
/* Assert the env is still alive, close c (when set) and r, and stop the env. Locks of c must
 * be freed first. */
void h_fixture_stop(struct h_fixture *f);

/* rlock_acquire(c, resource, o, 0, &lock), asserted to succeed; returns the lock. */
struct rlock_lock *h_acquire_ok(struct rlock_client *c, const char *resource,
                                const struct rlock_acquire_opts *o);
/* Assert that key holds token (GET). */
void h_assert_key_token(redisContext *r, const char *key, const char *token);
/* Release l (a lock of client c) and assert that it went: RLOCK_OK, state RELEASED, and its
 * key gone from f's redis. Does not free l. */
void h_release_gone(struct h_fixture *f, struct rlock_client *c, struct rlock_lock *l);

/* An rlock-holder child (see above) with its stdout in DIR/holder.out. */
struct h_holder {
    pid_t pid;
    char out[320];    /* DIR/holder.out */
    char line[256];   /* its HELD line */
    uint64_t fence;   /* and what it said */
    char token[128];
};
/* Spawn rlock-holder on resource (ttl_ms 0: the default lease) and wait up to held_within_ms
 * for its HELD line. */
void h_holder_start(struct h_holder *h, struct h_env *e, const char *resource, uint32_t ttl_ms,
                    int held_within_ms);
/* The same with the session timeout the holder asks for in Hello (0: the daemon's default). */
void h_holder_start_session(struct h_holder *h, struct h_env *e, const char *resource,
                            uint32_t ttl_ms, uint32_t session_timeout_ms, int held_within_ms);
/* kill -9 the holder and reap it (within 5 s); returns h_now_ms() read right before the kill
 * (a bound below the kill itself, so "not before X after the kill" can be asserted). */
int64_t h_holder_kill9(struct h_holder *h);

/* SIGSTOP rlockd and wait (at most 2 s) until it is stopped. */
void h_rlockd_sigstop(struct h_env *e);
/* SIGCONT rlockd. */
void h_rlockd_sigcont(struct h_env *e);

/* Daemon-wide Stats, asked by a fresh client (the caller's own may be closed or stopped). */
void h_stats_or_fail(struct h_env *e, struct rlock_stats *out);
/*
 * Poll Stats (fresh client, every 20 ms) until held_locks == held and waiters ==
 * waiters, at most timeout_ms. Returns 0 when seen, else -1; *last (may be NULL)
 * gets the last Stats read.
 */
int h_wait_stats(struct h_env *e, uint64_t held, uint64_t waiters, int timeout_ms,
                 struct rlock_stats *last);

/* A test thread whose end can be awaited with a deadline. */
struct h_thread {
    pthread_t id;
    void *(*fn)(void *);
    void *arg;
    atomic_int done; /* set once fn has returned */
};
/* Run fn(arg) on a new thread. */
void h_thread_start(struct h_thread *t, void *(*fn)(void *), void *arg);
/* 1 once t's function has returned. */
int h_thread_done(struct h_thread *t);
/* Wait until t's function has returned, at the latest until deadline (an h_now_ms() time),
 * and join it; fails the test with fail_msg when it still runs then. */
void h_thread_join(struct h_thread *t, int64_t deadline, const char *fail_msg);

/*
 * Another session waiting for a lock, on a thread of its own: connected by
 * h_waiter_start (on the test's thread), it acquires resource with wait_ms
 * and retries at once while the daemon answers UNAVAILABLE (Redis not
 * reachable), until its wait is over. When it gets the lock, the times of the
 * grant are recorded (as soon as rlock_acquire returns).
 */
struct h_waiter {
    struct rlock_client *c;
    const char *resource;
    uint32_t ttl_ms;
    int wait_ms;
    int64_t start_ms;       /* h_now_ms() when it started waiting */
    enum rlock_err rc;      /* of its last acquire */
    int unavailable;        /* UNAVAILABLE answers retried */
    struct rlock_lock *l;   /* the lock, when granted */
    int64_t granted_ms;     /* h_now_ms() of the grant; 0 when not granted */
    int64_t granted_wall_ms; /* h_wall_ms() of the grant */
    struct h_thread t;
};
/* Connect a client to e and start waiting (ttl_ms 0: the default lease). */
void h_waiter_start(struct h_waiter *w, struct h_env *e, const char *resource, uint32_t ttl_ms,
                    int wait_ms);
/* Wait for its end (at most its wait plus 10 s) and return the result of its acquire. */
enum rlock_err h_waiter_join(struct h_waiter *w);
/* Release what it got (when it still holds it) and close its client. */
void h_waiter_close(struct h_waiter *w);

/*
 * The mutual-exclusion counter (harness_counter.c): procs worker processes (at most
 * H_COUNTER_PROCS_MAX), worker i against the rlockd at addrs[i % naddrs], each run rounds
 * read-sleep-write increments of a counter file in e's dir under `rlockctl run --wait 60s
 * counter`. Fails the test unless every worker exits 0 within deadline_ms, the counter ends
 * at procs * rounds and the fences the sections saw, in entry order, strictly increase.
 * Prints the figures; returns the time it took, in ms. Sanitizer builds run a quarter of
 * the rounds (the plain build runs them all).
 */
#define H_COUNTER_PROCS_MAX 64
int64_t h_counter_run(struct h_env *e, const char *const addrs[], int naddrs, int procs,
                      int rounds, int deadline_ms);

/* The number of elements of array a. */
#define H_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A new TCase in s with a timeout of timeout_s seconds. */
TCase *h_tcase(Suite *s, const char *name, int timeout_s);
/* Run tests[n] through h_run_suite as suite name, each in its own TCase (named after the test
 * without its "test_" prefix) with a timeout of timeout_s seconds. Returns main()'s exit code. */
int h_run_tests(const char *name, int timeout_s, const TTest *const tests[], size_t n);

#endif
