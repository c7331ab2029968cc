/*
 * rlockctl_run.c — `rlockctl run`: a distributed flock(1).
 *
 * Acquire the lock, run the command with RLOCK_FENCE, RLOCK_TOKEN and
 * RLOCK_RESOURCE in its environment while the library's background thread
 * keeps the session (and so the lock) alive, release it when the command
 * exits, and exit with the command's status. If the lock is lost meanwhile,
 * the command gets SIGTERM, then SIGKILL after the grace period, and
 * rlockctl exits with CTL_EX_LOST.
 *
 * The supervisor sleeps in poll() on a self-pipe. Three things write to it:
 * the SIGCHLD handler, the handler of the signals forwarded to the command,
 * and the lost-lock callback (on the library's thread). Before it sleeps it
 * looks at the lock; after every wake-up it reaps the child first, and a
 * command found to have exited is judged by the lock as seen before that
 * sleep. So a command that finished before rlockctl noticed the loss keeps
 * its own status, even when rlockctl was stopped (or the machine suspended)
 * until long after, and the lock's session with it. The command dies with
 * rlockctl (PR_SET_PDEATHSIG), since the lock dies with its session.
 */
#include "rlockctl.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Byte written to the self-pipe by the lost-lock callback (signals write their number). */
#define RUN_WAKE_LOST 0xff

/*
 * Write end of the self-pipe. A signal handler can reach nothing else, and
 * the lost-lock callback reads it on the library's thread: atomic (lock-free,
 * so async-signal-safe). Set before any handler is installed; reset only
 * after the handlers are gone and the client is closed, and only then is
 * the pipe closed, so no write can land on a reused descriptor.
 */
static atomic_int run_wake_fd = -1;

/* Signals caught while the command runs; SIGCHLD last. */
static const int run_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
#define RUN_NSIGNALS (sizeof run_signals / sizeof run_signals[0])

struct run {
    const char *resource;
    char **argv;         /* the command */
    uint32_t ttl_ms;
    uint32_t wait_ms;
    uint32_t grace_ms;
    int no_watchdog;
    const char *name;
    int caught[RUN_NSIGNALS]; /* 1 where our handler is installed */
    sigset_t old_mask;        /* the signal mask rlockctl was started with */
    int wake[2];              /* self-pipe; -1 when not open */
};

static void run_usage(FILE *f)
{
    fprintf(f,
            "Usage: rlockctl [OPTIONS] run [RUN-OPTIONS] RESOURCE [--] COMMAND [ARGS...]\n"
            "\n"
            "Acquire RESOURCE, run COMMAND while holding it, release it when COMMAND exits,\n"
            "and exit with COMMAND's status. COMMAND finds RLOCK_FENCE (decimal), RLOCK_TOKEN\n"
            "and RLOCK_RESOURCE in its environment; pass the fence to the storage you guard.\n"
            "\n"
            "  -l, --ttl D         lease (default: the daemon's default_ttl)\n"
            "  -w, --wait D        wait up to D for the lock (default 0: try once)\n"
            "  -g, --grace D       after the lock is lost, time between SIGTERM and SIGKILL\n"
            "                      (default 5s)\n"
            "  -N, --no-watchdog   the daemon does not renew the lease: COMMAND is stopped\n"
            "                      once the lease runs out\n"
            "  -n, --name NAME     client name shown in the daemon's logs (default rlockctl)\n"
            "  -h, --help          show this help\n" CTL_GLOBAL_HELP
            "\n"
            "SIGINT, SIGTERM and SIGHUP sent to rlockctl are passed on to COMMAND (those the\n"
            "terminal sends reach COMMAND directly; signalling the whole process group\n"
            "delivers them to COMMAND twice).\n"
            "\n"
            "Exit status: COMMAND's (128+N if killed by signal N); 75 lock not acquired\n"
            "(held elsewhere, --wait ran out, or a daemon limit reached);\n"
            "79 lock lost (COMMAND was stopped, or not started); 69 daemon unreachable or\n"
            "unavailable; 64 usage error; 126 COMMAND not executable; 127 COMMAND not found;\n"
            "70 other.\n");
}

/* Parse options and operands. Returns -1 to go on, else the exit code. */
static int run_parse(struct ctl *ctl, struct run *r, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ttl", required_argument, NULL, 'l'},
        {"wait", required_argument, NULL, 'w'},
        {"grace", required_argument, NULL, 'g'},
        {"no-watchdog", no_argument, NULL, 'N'},
        {"name", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        CTL_GLOBAL_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "+:l:w:g:Nn:h" CTL_GLOBAL_SHORTOPTS, longopts, NULL)) != -1) {
        switch (ch) {
        case 'l':
            if (ctl_duration("run: --ttl", optarg, &r->ttl_ms) < 0)
                return EX_USAGE;
            break;
        case 'w':
            if (ctl_duration("run: --wait", optarg, &r->wait_ms) < 0)
                return EX_USAGE;
            break;
        case 'g':
            if (ctl_duration("run: --grace", optarg, &r->grace_ms) < 0)
                return EX_USAGE;
            break;
        case 'N':
            r->no_watchdog = 1;
            break;
        case 'n':
            r->name = optarg;
            break;
        case 'h':
            run_usage(stdout);
            return EX_OK;
        default:
            if ((rc = ctl_other_option(ctl, "run", ch, argv)) != 0)
                return rc;
            break;
        }
    }
    if (optind >= argc) {
        ctl_err("run: no RESOURCE given (see rlockctl run --help)");
        return EX_USAGE;
    }
    r->resource = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        ctl_err("run: no COMMAND given (see rlockctl run --help)");
        return EX_USAGE;
    }
    r->argv = argv + optind;
    return -1;
}

static void run_wake(unsigned char what)
{
    int saved = errno;
    ssize_t n = write(atomic_load(&run_wake_fd), &what, 1);
    (void)n; /* a full pipe already holds a wake-up */
    errno = saved;
}

static void run_on_signal(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    /* The terminal signals the whole foreground group: the command has it already. */
    if (sig != SIGCHLD && si != NULL && si->si_code == SI_KERNEL)
        return;
    run_wake((unsigned char)sig);
}

static void run_on_lost(struct rlock_client *c, const char *resource, const char *token,
                        uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c, (void)resource, (void)token, (void)fence, (void)reason, (void)arg;
    run_wake(RUN_WAKE_LOST);
}

/*
 * Install the handlers (SIGINT/SIGTERM/SIGHUP only where not ignored, so a
 * command started in the background keeps ignoring them), then unblock the
 * caught signals: started with SIGCHLD blocked, rlockctl would never learn
 * that the command ended and would hold the lock for ever. Before the fork,
 * so no SIGCHLD can be missed.
 */
static int run_catch_signals(struct run *r)
{
    sigset_t caught;
    sigemptyset(&caught);
    if (sigprocmask(SIG_BLOCK, NULL, &r->old_mask) < 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = run_on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < RUN_NSIGNALS; i++) {
        struct sigaction old;
        if (sigaction(run_signals[i], NULL, &old) < 0)
            return -1;
        if (run_signals[i] != SIGCHLD && old.sa_handler == SIG_IGN)
            continue;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | (run_signals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
        if (sigaction(run_signals[i], &sa, NULL) < 0)
            return -1;
        r->caught[i] = 1;
        sigaddset(&caught, run_signals[i]);
    }
    return sigprocmask(SIG_UNBLOCK, &caught, NULL);
}

static void run_default_signals(const struct run *r)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (size_t i = 0; i < RUN_NSIGNALS; i++) {
        if (r->caught[i])
            sigaction(run_signals[i], &dfl, NULL);
    }
}

/* Undo run_catch_signals: default handlers, and the mask rlockctl was started with. */
static void run_restore_signals(struct run *r)
{
    int any = 0;
    for (size_t i = 0; i < RUN_NSIGNALS; i++)
        any |= r->caught[i];
    run_default_signals(r);
    if (any)
        sigprocmask(SIG_SETMASK, &r->old_mask, NULL);
    memset(r->caught, 0, sizeof r->caught);
}

/* In the child: only async-signal-safe calls until exec. */
static void run_exec(const struct run *r, int errfd, pid_t parent)
{
    /*
     * The lock lives as long as rlockctl's session: if rlockctl dies, even by
     * SIGKILL, the command must not go on unprotected.
     */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(CTL_EX_LOST);
    run_default_signals(r);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(r->argv[0], r->argv);
    int err = errno;
    ssize_t n = write(errfd, &err, sizeof err);
    (void)n;
    _exit(err == ENOENT || err == ENOTDIR ? CTL_EX_NOTFOUND : CTL_EX_NOEXEC);
}

static int run_export(const struct rlock_lock *l)
{
    char fence[32];
    snprintf(fence, sizeof fence, "%" PRIu64, rlock_lock_fence(l));
    if (setenv("RLOCK_FENCE", fence, 1) < 0 || setenv("RLOCK_TOKEN", rlock_lock_token(l), 1) < 0 ||
        setenv("RLOCK_RESOURCE", rlock_lock_resource(l), 1) < 0) {
        ctl_err("run: setenv: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * Fork and exec the command. Returns its pid; 0 when the exec failed (the
 * child has been reaped into *status); -1 when no child could be started.
 */
static pid_t run_spawn(const struct run *r, int *status)
{
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) < 0) {
        ctl_err("run: pipe: %s", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        run_exec(r, errpipe[1], parent);
    close(errpipe[1]);
    if (pid < 0) {
        ctl_err("run: fork: %s", strerror(errno));
        close(errpipe[0]);
        return -1;
    }
    /* EOF means the exec succeeded (the pipe is close-on-exec). */
    int err = 0;
    ssize_t n;
    do
        n = read(errpipe[0], &err, sizeof err);
    while (n < 0 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof err) {
        ctl_err("run: cannot execute '%s': %s", r->argv[0], strerror(err));
        while (waitpid(pid, status, 0) < 0 && errno == EINTR)
            ;
        return 0;
    }
    return pid;
}

/*
 * Milliseconds on CLOCK_BOOTTIME: a lease in Redis runs on while this machine
 * is suspended, so the lease end (--no-watchdog) must be judged by a clock
 * that does too.
 */
static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read every pending wake-up byte; pass forwarded signals on to the command. */
static void run_drain(const struct run *r, pid_t pid)
{
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(r->wake[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == SIGINT || buf[i] == SIGTERM || buf[i] == SIGHUP)
                kill(pid, buf[i]);
        }
    }
}

/* 1 once the lock can no longer be counted on: lost, or (watchdog off) its lease is over. */
static int run_lock_gone(const struct rlock_lock *l, int64_t lease_end, int64_t now)
{
    return rlock_lock_state(l) != RLOCK_HELD || (lease_end && now >= lease_end);
}

/*
 * Wait for the command, stopping it if the lock is lost or (watchdog off)
 * its lease runs out. Returns the waitpid status; *lost says whether the
 * loss was noticed while the command was still running.
 */
static int run_supervise(const struct run *r, struct rlock_lock *l, pid_t pid,
                         int64_t lease_end, int *lost)
{
    int64_t kill_at = 0;
    int killed = 0;
    *lost = 0;
    for (;;) {
        int status;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w < 0 && errno != EINTR) {
            ctl_err("run: waitpid: %s", strerror(errno));
            return -1;
        }
        /*
         * Reaped: the command ended during the sleep just over, when the lock
         * was last seen held unless *lost says otherwise. Looking at the lock
         * again now would also count a loss that came after the command's end
         * but was only noticed at this wake-up (after rlockctl was stopped or
         * the machine suspended, both turn up together).
         */
        if (w == pid)
            return status;
        int64_t now = now_ms();
        if (!*lost && run_lock_gone(l, lease_end, now)) {
            *lost = 1;
            const char *why = rlock_lock_state(l) == RLOCK_HELD
                                  ? "lease ran out"
                                  : rlock_lost_reason_str(rlock_lock_lost_reason(l));
            ctl_err("run: lock '%s' lost (%s): stopping the command (pid %ld)", r->resource, why,
                    (long)pid);
            kill(pid, SIGTERM);
            kill_at = now + r->grace_ms;
        }
        if (*lost && !killed && now >= kill_at) {
            ctl_err("run: command still running after %" PRIu32 " ms: SIGKILL", r->grace_ms);
            kill(pid, SIGKILL);
            killed = 1;
        }
        int64_t wake = -1;
        if (*lost && !killed)
            wake = kill_at - now;
        else if (!*lost && lease_end)
            wake = lease_end - now;
        struct pollfd p = {.fd = r->wake[0], .events = POLLIN};
        if (poll(&p, 1, wake < 0 ? -1 : (int)(wake > INT32_MAX ? INT32_MAX : wake)) > 0)
            run_drain(r, pid);
    }
}

static int run_exit_status(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EX_SOFTWARE;
}

/* With the lock held: run the command to its end and settle the lock. */
static int run_locked(const struct ctl *ctl, struct run *r, struct rlock_client *c,
                      struct rlock_lock *l, int64_t granted_at)
{
    if (run_export(l) < 0)
        return EX_SOFTWARE;
    if (pipe2(r->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        ctl_err("run: pipe: %s", strerror(errno));
        r->wake[0] = r->wake[1] = -1;
        return EX_SOFTWARE;
    }
    atomic_store(&run_wake_fd, r->wake[1]);
    int rc = EX_SOFTWARE;
    if (run_catch_signals(r) < 0) {
        ctl_err("run: sigaction: %s", strerror(errno));
        goto out;
    }
    int status = 0, lost = 0;
    int64_t lease_end = r->no_watchdog ? granted_at + rlock_lock_ttl_ms(l) : 0;
    /* Lost already (e.g. rlockctl was stopped right after the grant): never start unguarded. */
    if (run_lock_gone(l, lease_end, now_ms())) {
        const char *why = rlock_lock_state(l) == RLOCK_HELD
                              ? "lease ran out"
                              : rlock_lost_reason_str(rlock_lock_lost_reason(l));
        ctl_err("run: lock '%s' lost (%s) before the command started; not running it",
                r->resource, why);
        rc = CTL_EX_LOST;
        goto out;
    }
    pid_t pid = run_spawn(r, &status);
    if (pid < 0)
        goto out;
    if (pid > 0) {
        status = run_supervise(r, l, pid, lease_end, &lost);
        if (status < 0)
            goto out;
    }
    if (lost) {
        ctl_err("run: lock '%s' was lost while the command ran", r->resource);
        rc = CTL_EX_LOST;
    } else {
        rc = run_exit_status(status);
        if (rlock_lock_state(l) == RLOCK_LOST) {
            /* Noticed only after the command's end: its status stands, nothing to release. */
            ctl_err("run: note: lock '%s' found lost (%s) only after the command ended",
                    r->resource,
                    rlock_lost_reason_str(rlock_lock_lost_reason(l)));
        } else if (rlock_release(l, ctl->timeout_ms) != RLOCK_OK) {
            char msg[256];
            rlock_errmsg(c, msg, sizeof msg);
            ctl_err("run: warning: release of '%s' failed: %s (closing the session releases it)",
                    r->resource, msg);
        }
    }
out:
    /* The pipe stays open: the lost-lock callback may still write until rlock_close. */
    run_restore_signals(r);
    return rc;
}

int ctl_run(struct ctl *ctl, int argc, char **argv)
{
    struct run r = {.grace_ms = 5000, .name = "rlockctl", .wake = {-1, -1}};
    int rc = run_parse(ctl, &r, argc, argv);
    if (rc >= 0)
        return rc;
    struct rlock_options opts = {.client_name = r.name, .on_lost = run_on_lost};
    struct rlock_client *c;
    rc = ctl_connect(ctl, &opts, &c);
    if (rc != 0)
        return rc;
    struct rlock_acquire_opts ao = {
        .ttl_ms = r.ttl_ms, .wait_ms = r.wait_ms, .watchdog_off = r.no_watchdog};
    struct rlock_lock *l = NULL;
    int64_t asked_at = now_ms();
    enum rlock_err e = rlock_acquire(c, r.resource, &ao, ctl->timeout_ms, &l);
    if (e == RLOCK_OK) {
        /*
         * The lease started at the grant. Without a wait that lies between
         * asked_at and now, so asked_at is safe; after a wait the grant
         * came just before the reply, so now is late only by its trip.
         */
        rc = run_locked(ctl, &r, c, l, r.wait_ms ? now_ms() : asked_at);
    } else {
        char msg[256];
        rlock_errmsg(c, msg, sizeof msg);
        if (e == RLOCK_ERR_NOT_ACQUIRED)
            ctl_err("run: lock '%s' not acquired: it is held elsewhere (%s)", r.resource, msg);
        else if (e == RLOCK_ERR_TIMEOUT)
            ctl_err("run: lock '%s' not acquired within %" PRIu32 " ms (%s)", r.resource,
                    r.wait_ms, msg);
        else if (e == RLOCK_ERR_LIMIT_EXCEEDED)
            ctl_err("run: lock '%s' not acquired: a limit of the daemon was reached (%s)",
                    r.resource, msg);
        else
            ctl_err("run: acquire '%s': %s", r.resource, msg);
        rc = ctl_exit_code(e);
    }
    rlock_lock_free(l);
    rlock_close(c);
    /* No handler and no callback is left to write to the pipe now. */
    atomic_store(&run_wake_fd, -1);
    if (r.wake[0] >= 0) {
        close(r.wake[0]);
        close(r.wake[1]);
    }
    return rc;
}
