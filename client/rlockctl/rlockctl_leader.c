/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl_leader.c — `rlockctl leader NAME [--json] [--watch]`: who leads an
 * election, once (exit 0 when a candidate leads, CTL_EX_NO_LEADER when none
 * does), or every change as it comes (--watch, until interrupted).
 *
 * --watch observes the election (rlock_observe). Its changes come to
 * watch_on_leader on the library's callback thread while the main thread
 * waits for a signal or the session's end. The leader the Observe found and
 * the changes pass through one filter under one mutex (a higher term, or the
 * leader of the same term gone), so the lines come out in the order of terms
 * even when a change is reported before the Observe has returned.
 * docs/rlockctl.md gives the JSON schemas.
 */
#include "rlockctl.h"
#include "rlockctl_out.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

static void leader_usage(FILE *f)
{
    fprintf(f,
            "Usage: rlockctl [OPTIONS] leader [--json] [--watch] NAME\n"
            "\n"
            "Print who leads the election NAME (the value a candidate of 'rlockctl elect', or\n"
            "of rlock_acquire with a campaign value, gave, its term and the lease it has\n"
            "left), or that nobody leads it. With --watch, print the leader now and then one\n"
            "line per change (a new leader, with a higher term; or the leader gone with no\n"
            "successor yet) until interrupted (SIGINT, SIGTERM, SIGHUP).\n"
            "\n"
            "  -j, --json          JSON output: one object (with --watch, one per line)\n"
            "      --watch         observe the election and print each change\n"
            "  -h, --help          show this help\n" CTL_GLOBAL_HELP
            "\n"
            "Exit status: 0 a candidate leads (--watch: interrupted); 66 nobody leads; 69\n"
            "daemon unreachable or unavailable, or (--watch) the session ended; 64 usage\n"
            "error; 70 other.\n");
}

/* One line: the leader (or none) of name; ttl_ms < 0 when not known, time when watching. */
static void leader_print(int json, const char *name, int elected, uint64_t term,
                         const char *value, int64_t ttl_ms, int with_time)
{
    char when[40] = "";
    if (with_time) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ctl_fmt_time((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000, when,
                     sizeof when);
    }
    if (json) {
        struct ctl_json j;
        ctl_json_open(&j);
        if (with_time)
            ctl_json_str(&j, "time", when);
        ctl_json_str(&j, "resource", name);
        ctl_json_bool(&j, "elected", elected);
        ctl_json_num(&j, "term", term);
        ctl_json_str(&j, "value", value);
        if (ttl_ms >= 0)
            ctl_json_num(&j, "ttl_ms", (uint64_t)ttl_ms);
        ctl_json_close(&j);
        putchar('\n');
        return;
    }
    if (with_time)
        printf("%s ", when);
    fputs(name, stdout);
    if (!elected) {
        if (term > 0)
            printf(": no leader (last term %" PRIu64 ")\n", term);
        else
            fputs(": no leader\n", stdout);
        return;
    }
    fputs(": leader ", stdout);
    ctl_json_string(value); /* quoted, controls escaped */
    printf(" (term %" PRIu64, term);
    if (ttl_ms >= 0) {
        char left[32];
        ctl_fmt_duration((uint64_t)ttl_ms, left, sizeof left);
        printf(", lease %s left", left);
    }
    fputs(")\n", stdout);
}

/* --- --watch ---------------------------------------------------------------------- */

struct watch {
    pthread_mutex_t mu;
    int json;
    int seen;      /* a line was printed */
    uint64_t term; /* and what it said */
    int elected;
};

/* Print a line for (elected, term) unless it is old news; any thread. */
static void watch_emit(struct watch *w, const char *name, int elected, uint64_t term,
                       const char *value)
{
    pthread_mutex_lock(&w->mu);
    if (!elected && term < w->term)
        term = w->term; /* none leads since w->term */
    if (!w->seen || term > w->term || (term == w->term && w->elected && !elected)) {
        leader_print(w->json, name, elected, term, value, -1, 1);
        fflush(stdout);
        w->seen = 1;
        w->term = term;
        w->elected = elected;
    }
    pthread_mutex_unlock(&w->mu);
}

static void watch_on_leader(struct rlock_client *c, const char *resource, int elected,
                            uint64_t term, const char *value, void *arg)
{
    (void)c;
    watch_emit(arg, resource, elected, term, value);
}

/*
 * Wait for a signal of set (through fd) or the end of c's session. Returns 0
 * on a signal, else the exit code after saying why.
 */
static int watch_wait(struct rlock_client *c, int sigfd)
{
    int lostfd = rlock_lost_fd(c);
    for (;;) {
        struct pollfd p[2] = {{.fd = sigfd, .events = POLLIN}, {.fd = lostfd, .events = POLLIN}};
        if (poll(p, lostfd >= 0 ? 2 : 1, lostfd >= 0 ? -1 : 1000) < 0) {
            if (errno == EINTR)
                continue;
            ctl_err("leader: poll: %s", strerror(errno));
            return EX_SOFTWARE;
        }
        if (p[0].revents & POLLIN) {
            /* Taken, so that it does not act once the mask is restored: an ordinary end. */
            struct signalfd_siginfo si;
            ssize_t got = read(sigfd, &si, sizeof si);
            (void)got;
            return 0;
        }
        if (lostfd >= 0 && (p[1].revents & POLLIN)) {
            uint64_t n;
            ssize_t got = read(lostfd, &n, sizeof n);
            (void)got; /* cleared; the session's state is what counts */
        }
        if (!rlock_client_alive(c)) {
            ctl_err("leader: the session ended: no further changes can be seen");
            return EX_UNAVAILABLE;
        }
    }
}

static int leader_watch(struct ctl *ctl, const char *name, int json)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, &old) < 0) {
        ctl_err("leader: sigprocmask: %s", strerror(errno));
        return EX_SOFTWARE;
    }
    int sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0) {
        ctl_err("leader: signalfd: %s", strerror(errno));
        sigprocmask(SIG_SETMASK, &old, NULL);
        return EX_SOFTWARE;
    }
    struct watch w = {.mu = PTHREAD_MUTEX_INITIALIZER, .json = json};
    struct rlock_options opts = {.client_name = "rlockctl leader",
                                 .on_leader = watch_on_leader,
                                 .on_leader_arg = &w};
    struct rlock_client *c;
    int rc = ctl_connect(ctl, &opts, &c);
    if (rc == 0) {
        struct rlock_leader now;
        enum rlock_err e = rlock_observe(c, name, ctl->timeout_ms, &now);
        if (e == RLOCK_OK) {
            watch_emit(&w, name, now.elected, now.term, now.value);
            rc = watch_wait(c, sigfd);
        } else {
            ctl_err("leader: observe '%s': %s", name, rlock_last_error()->message);
            rc = ctl_exit_code(e);
        }
        rlock_close(c); /* no callback runs after this */
    }
    close(sigfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_destroy(&w.mu);
    return rc;
}

/* --- the command ------------------------------------------------------------------- */

static int leader_once(struct ctl *ctl, const char *name, int json)
{
    struct rlock_options opts = {.client_name = "rlockctl leader"};
    struct rlock_client *c;
    int rc = ctl_connect(ctl, &opts, &c);
    if (rc != 0)
        return rc;
    struct rlock_leader l;
    enum rlock_err e = rlock_leader(c, name, ctl->timeout_ms, &l);
    if (e == RLOCK_OK) {
        leader_print(json, name, l.elected, l.term, l.value, l.elected ? (int64_t)l.ttl_ms : 0,
                     0);
        rc = l.elected ? EX_OK : CTL_EX_NO_LEADER;
    } else {
        ctl_err("leader: '%s': %s", name, rlock_last_error()->message);
        rc = ctl_exit_code(e);
    }
    rlock_close(c);
    return rc;
}

enum { LEADER_OPT_WATCH = 0x100 };

int ctl_leader(struct ctl *ctl, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"watch", no_argument, NULL, LEADER_OPT_WATCH},
        {"help", no_argument, NULL, 'h'},
        CTL_GLOBAL_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int json = 0, watch = 0, ch, rc;
    while ((ch = getopt_long(argc, argv, "+:jh" CTL_GLOBAL_SHORTOPTS, longopts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            json = 1;
            break;
        case LEADER_OPT_WATCH:
            watch = 1;
            break;
        case 'h':
            leader_usage(stdout);
            return EX_OK;
        default:
            if ((rc = ctl_other_option(ctl, "leader", ch, argv)) != 0)
                return rc;
            break;
        }
    }
    if (argc - optind != 1) {
        if (argc - optind > 1)
            ctl_err("leader: unexpected argument '%s'", argv[optind + 1]);
        else
            ctl_err("leader: no NAME given (see rlockctl leader --help)");
        return EX_USAGE;
    }
    const char *name = argv[optind];
    if (name[0] == '\0') {
        ctl_err("leader: NAME is empty");
        return EX_USAGE;
    }
    return watch ? leader_watch(ctl, name, json) : leader_once(ctl, name, json);
}
