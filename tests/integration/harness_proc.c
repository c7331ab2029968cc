/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_proc.c — time, files and child processes for the integration
 * harness: spawning with redirected output and PR_SET_PDEATHSIG, waiting with
 * deadlines, and telling live children from exited ones.
 *
 * Exit statuses reaped while polling for life (h_alive) are kept in a small
 * table so that a later h_wait_exit on the same pid still sees them.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* --- time and files ------------------------------------------------------ */

int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

int h_wait_for(int (*cond)(void *arg), void *arg, int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    int v;
    while (!(v = cond(arg)) && h_now_ms() < deadline)
        h_sleep_ms(10);
    return v;
}

char *h_lua_script(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.lua", RLOCK_LUA_DIR, name);
    char *text = h_read_file(path);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    return text;
}

redisReply *h_eval(redisContext *r, const char *text, const char *const *keys, int n,
                   const char *const *args, int m)
{
    const char *argv[3 + 64];
    ck_assert_int_le(n + m, 64);
    char nkeys[16];
    snprintf(nkeys, sizeof nkeys, "%d", n);
    argv[0] = "EVAL", argv[1] = text, argv[2] = nkeys;
    for (int i = 0; i < n; i++)
        argv[3 + i] = keys[i];
    for (int i = 0; i < m; i++)
        argv[3 + n + i] = args[i];
    redisReply *rep = redisCommandArgv(r, 3 + n + m, argv, NULL);
    ck_assert_msg(rep != NULL, "EVAL: %s", r->errstr);
    return rep;
}

char *h_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n + 1 < cap)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void h_rm_tree(const char *dir)
{
    if (dir[0])
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void h_keydir_make(struct h_keydir *k, const char *extra)
{
    snprintf(k->dir, sizeof k->dir, "/tmp/itest_keydir.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(k->dir));
    snprintf(k->ini, sizeof k->ini, "[session]\nresume_key_file = %s/resume.key\n%s", k->dir,
             extra != NULL ? extra : "");
}

void h_keydir_remove(struct h_keydir *k)
{
    h_rm_tree(k->dir);
}

/* The first warnings and errors of an rlockd log: the tail alone may be a
 * flood of routine lines printed after what went wrong. */
static void print_first_problems(const char *text, const char *path, int max)
{
    int shown = 0;
    for (const char *line = text; *line && shown < max;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *lvl = memchr(line, 'Z', len < 32 ? len : 32);
        if (lvl && (strncmp(lvl, "Z warn ", 7) == 0 || strncmp(lvl, "Z error ", 8) == 0)) {
            if (shown++ == 0)
                fprintf(stderr, "---- first warnings and errors of %s:\n", path);
            fprintf(stderr, "%.*s\n", (int)len, line);
        }
        line += len + (end != NULL);
    }
}

void h_print_tail(const char *path, int lines)
{
    char *text = h_read_file(path);
    if (!text) {
        fprintf(stderr, "---- %s: (none)\n", path);
        return;
    }
    print_first_problems(text, path, 20);
    size_t n = strlen(text);
    const char *start = text + n;
    int seen = 0;
    while (start > text) {
        if (start[-1] == '\n' && start != text + n && ++seen >= lines)
            break;
        start--;
    }
    fprintf(stderr, "---- last %d lines of %s:\n%s%s---- end\n", lines, path, start,
            (n && text[n - 1] != '\n') ? "\n" : "");
    free(text);
}

const char *h_status_str(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "status 0x%x", status);
    return buf;
}

/* --- processes ----------------------------------------------------------- */

/* Exit statuses reaped by h_alive, so h_wait_exit still finds them. */
#define H_REAPED_MAX 64
static struct {
    pid_t pid;
    int status;
} reaped[H_REAPED_MAX];
static unsigned reaped_next;

static void reaped_put(pid_t pid, int status)
{
    reaped[reaped_next % H_REAPED_MAX].pid = pid;
    reaped[reaped_next % H_REAPED_MAX].status = status;
    reaped_next++;
}

static int reaped_take(pid_t pid, int *status)
{
    for (unsigned i = 0; i < H_REAPED_MAX; i++) {
        if (reaped[i].pid == pid) {
            if (status)
                *status = reaped[i].status;
            reaped[i].pid = 0;
            return 1;
        }
    }
    return 0;
}

static int reaped_has(pid_t pid)
{
    for (unsigned i = 0; i < H_REAPED_MAX; i++)
        if (reaped[i].pid == pid)
            return 1;
    return 0;
}

int h_alive(pid_t pid)
{
    if (pid <= 0 || reaped_has(pid))
        return 0;
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
        reaped_put(pid, status);
        return 0;
    }
    if (r == 0)
        return 1;
    /* Not our child: fall back to existence. */
    return kill(pid, 0) == 0;
}

int h_pid_gone(pid_t pid)
{
    if (kill(pid, 0) == -1 && errno == ESRCH)
        return 1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *stat = h_read_file(path);
    if (!stat)
        return 1;
    /* "pid (comm) S ...": the state follows the last ')'. */
    const char *p = strrchr(stat, ')');
    int zombie = p && p[1] == ' ' && p[2] == 'Z';
    free(stat);
    return zombie;
}

int h_wait_exit(pid_t pid, int timeout_ms, int *status)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    int st = 0;
    for (;;) {
        if (reaped_take(pid, &st))
            break;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (r == -1 && errno == ECHILD && kill(pid, 0) == -1) {
            st = 0;
            break;
        }
        if (h_now_ms() >= deadline)
            return -1;
        h_sleep_ms(5);
    }
    if (status)
        *status = st;
    return 0;
}

/* fork + exec with stdout/stderr redirected (appending) when paths are given. */
pid_t h_spawn_io(char *const argv[], const char *out_path, const char *err_path)
{
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == -1) {
        fprintf(stderr, "harness: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid > 0)
        return pid;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    const char *paths[2] = { out_path, err_path };
    for (int i = 0; i < 2; i++) {
        if (!paths[i])
            continue;
        int fd = open(paths[i], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd == -1 || dup2(fd, 1 + i) == -1) {
            fprintf(stderr, "harness: %s: %s\n", paths[i], strerror(errno));
            _exit(127);
        }
    }
    /* Sockets of the test's own clients must not keep sessions alive. */
    close_range(3, ~0U, 0);
    execvp(argv[0], argv);
    fprintf(stderr, "harness: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

pid_t h_spawn(char *const argv[], const char *stdout_path)
{
    return h_spawn_io(argv, stdout_path, NULL);
}

/*
 * Send sig, then SIGKILL after grace_ms; reap. *status (may be NULL) gets
 * the wait status. Returns 0 when it left in time by itself, -1 otherwise.
 */
int h_stop_pid(pid_t pid, int sig, int grace_ms, const char *what, int *status)
{
    int st = 0;
    if (status)
        *status = 0;
    if (pid <= 0)
        return 0;
    kill(pid, sig);
    int rc = 0;
    if (h_wait_exit(pid, grace_ms, &st) != 0) {
        fprintf(stderr, "harness: %s (pid %d) still running %d ms after signal %d; SIGKILL\n",
                what, (int)pid, grace_ms, sig);
        kill(pid, SIGKILL);
        h_wait_exit(pid, 5000, &st);
        rc = -1;
    }
    if (status)
        *status = st;
    return rc;
}

/* --- waiting on output and groups ----------------------------------------- */

/* The line in text starting with prefix (at a line start, complete), or NULL. */
static const char *find_line(const char *text, const char *prefix)
{
    size_t plen = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, prefix, plen) == 0 && strchr(p, '\n'))
            return p;
    }
    return NULL;
}

int h_wait_line(const char *path, const char *prefix, pid_t pid, int timeout_ms, char *line,
                size_t len)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        /* Read the liveness before the file, so a line written just before exiting counts. */
        int alive = pid <= 0 || h_alive(pid);
        char *text = h_read_file(path);
        const char *p = text ? find_line(text, prefix) : NULL;
        if (p) {
            size_t n = (size_t)(strchr(p, '\n') - p);
            if (line && len) {
                if (n >= len)
                    n = len - 1;
                memcpy(line, p, n);
                line[n] = '\0';
            }
            free(text);
            return 0;
        }
        if (!alive || h_now_ms() >= deadline) {
            fprintf(stderr, "harness: no line \"%s...\" in %s %s; output so far:\n%s\n", prefix,
                    path, alive ? "before the deadline" : "before the process exited",
                    text ? text : "(none)");
            free(text);
            return -1;
        }
        free(text);
        h_sleep_ms(10);
    }
}

int h_wait_all(const pid_t *pids, int n, int timeout_ms, int *statuses, const struct h_env *e)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    for (int i = 0; i < n; i++) {
        int st = 0;
        while (h_wait_exit(pids[i], 0, &st) != 0) {
            if (e && !h_env_alive(e)) {
                fprintf(stderr, "harness: the env died while waiting for pid %d\n", (int)pids[i]);
                h_env_dump_logs(e);
                return -1;
            }
            if (h_now_ms() >= deadline) {
                fprintf(stderr, "harness: pid %d still running after %d ms\n", (int)pids[i],
                        timeout_ms);
                return -1;
            }
            h_sleep_ms(50);
        }
        if (statuses)
            statuses[i] = st;
    }
    return 0;
}

/* --- process state --------------------------------------------------------- */

int64_t h_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The fields of /proc/PID/stat after "(comm) ", in buf; NULL if unreadable. */
static const char *proc_stat_fields(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return p != NULL && p[1] == ' ' ? p + 2 : NULL;
}

char h_proc_state(pid_t pid)
{
    char buf[1024];
    const char *p = proc_stat_fields(pid, buf, sizeof buf);
    return p != NULL ? p[0] : 0;
}

int64_t h_proc_cpu_ms(pid_t pid)
{
    char buf[1024];
    const char *p = proc_stat_fields(pid, buf, sizeof buf);
    unsigned long long utime, stime;
    /* state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (p == NULL || sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                            &stime) != 2)
        return -1;
    long tck = sysconf(_SC_CLK_TCK);
    return tck > 0 ? (int64_t)((utime + stime) * 1000ULL / (unsigned long long)tck) : -1;
}

long h_proc_rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

void h_sigstop(pid_t pid, const char *what)
{
    ck_assert_msg(pid > 0 && kill(pid, SIGSTOP) == 0, "SIGSTOP %s (pid %d): %s", what, (int)pid,
                  strerror(errno));
    int64_t deadline = h_now_ms() + 2000;
    char st;
    while ((st = h_proc_state(pid)) != 'T' && h_now_ms() < deadline)
        h_sleep_ms(1);
    if (st != 'T')
        kill(pid, SIGCONT);
    ck_assert_msg(st == 'T', "%s (pid %d) not stopped 2 s after SIGSTOP (state %c)", what,
                  (int)pid, st ? st : '?');
}

void h_sigcont(pid_t pid, const char *what)
{
    ck_assert_msg(pid > 0 && kill(pid, SIGCONT) == 0, "SIGCONT %s (pid %d): %s", what, (int)pid,
                  strerror(errno));
}
