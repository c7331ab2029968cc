/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl_run.c — `rlockctl run`: a distributed flock(1).
 *
 * Acquire the lock, run the command with RLOCK_FENCE, RLOCK_TOKEN and
 * RLOCK_RESOURCE in its environment while the library's background thread
 * keeps the session (and so the lock) alive, and exit with the command's
 * status. The lock covers the whole job: the command and every process it
 * started (rlockctl_job.c). Like flock(1), whose lock lasts as long as any
 * holder of its descriptor, rlockctl releases it only once every process of
 * the job has exited, unless --no-wait-children (for commands that start a
 * daemon on purpose). If the lock is lost meanwhile, every process of the
 * job gets SIGTERM, then SIGKILL after the grace period, and rlockctl exits
 * with CTL_EX_LOST once they are all gone.
 *
 * The supervisor (enum run_phase) sleeps in poll() on a self-pipe. Three
 * things write to it: the SIGCHLD handler, the handler of the signals passed
 * on to the job (and SIGCONT), and the lost-lock callback (on the library's
 * thread). Before it sleeps it looks at the lock; after every wake-up it
 * reaps first, and a command found to have exited is judged by the lock as
 * seen before that sleep. So a command that finished before rlockctl noticed
 * the loss keeps its own status, even when rlockctl was stopped (or the
 * machine suspended) until long after, and the lock's session with it. The
 * command dies with rlockctl (PR_SET_PDEATHSIG), since the lock dies with
 * its session; the rest of the job cannot be covered that way.
 *
 * `rlockctl elect` is the same job under a campaign: the lock is the
 * election's (rlock_acquire_opts.campaign_value), its fence the leader's term
 * (RLOCK_TERM too), the wait is for ever unless --wait, losing the lock is
 * losing the leadership (the job is stopped as on any loss), and the release
 * when the job is over is the resignation.
 */
#include "rlockctl.h"
#include "rlockctl_job.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
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
/* Added to a signal's number on the self-pipe when the terminal sent it (SI_KERNEL). */
#define RUN_WAKE_TTY 0x40
/*
 * After SIGKILL, how often the job is looked for and killed again (a process
 * may have forked just before), and how long until rlockctl gives up on a
 * process that does not die (stuck in the kernel, state D) and says so.
 */
#define RUN_KILL_ROUND_MS 20
#define RUN_KILL_WAIT_MS 10000
/*
 * The wait asked for by a campaign that waits for ever (elect without
 * --wait): the daemon caps it ([limits] max_wait) and answers TIMEOUT at the
 * cap; the campaign then asks again.
 */
#define RUN_FOREVER_WAIT_MS (24u * 3600u * 1000u)

/*
 * Write end of the self-pipe. A signal handler can reach nothing else, and
 * the lost-lock callback reads it on the library's thread: atomic (lock-free,
 * so async-signal-safe). Set before any handler is installed; reset only
 * after the handlers are gone and the client is closed, and only then is
 * the pipe closed, so no write can land on a reused descriptor.
 */
static atomic_int run_wake_fd = -1;

/*
 * Signals caught while the job runs: those passed on to the job, then
 * SIGCONT (rlockctl was continued: it may have the terminal now) and SIGCHLD.
 */
static const int run_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCONT, SIGCHLD};
#define RUN_NSIGNALS (sizeof run_signals / sizeof run_signals[0])

struct run {
    const char *resource;                        /* resources[0] */
    const char *resources[RLOCK_ACQUIRE_ALL_MAX]; /* RESOURCE, then each --also */
    struct rlock_kind kinds[RLOCK_ACQUIRE_ALL_MAX]; /* how each is taken (--also-shared) */
    size_t nres;
    char **argv;         /* the command */
    uint32_t ttl_ms;
    uint32_t wait_ms;
    uint32_t grace_ms;
    int no_watchdog;
    int shared;           /* --shared: a shared (read) hold of every resource */
    uint32_t limit;       /* --limit N: RESOURCE is a semaphore of N permits (0: a lock) */
    uint32_t permits;     /* --permits K: permits taken (0: 1) */
    int no_wait_children; /* release when the command exits, whatever it left running */
    const char *campaign_value; /* elect: the candidate's value (NULL: run) */
    int wait_forever;     /* elect without --wait */
    const char *name;
    int caught[RUN_NSIGNALS]; /* 1 where our handler is installed */
    sigset_t old_mask;        /* the signal mask rlockctl was started with */
    int wake[2];              /* self-pipe; -1 when not open */
};

/* The subcommand, for messages: "run" or "elect" (one per process), and what it holds. */
static const char *run_cmd = "run";
static const char *run_noun = "lock";

/* "rlockctl: run: " (or "elect: ") + message + newline on stderr. */
static void run_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void run_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rlockctl: %s: ", run_cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* "run: OPT" (or "elect: OPT"), for ctl_duration's messages. */
static const char *run_opt(const char *opt)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "%s: %s", run_cmd, opt);
    return buf;
}

static void run_usage(FILE *f)
{
    fprintf(f,
            "Usage: rlockctl [OPTIONS] run [RUN-OPTIONS] RESOURCE [--] COMMAND [ARGS...]\n"
            "\n"
            "Acquire RESOURCE, run COMMAND while holding it, release it once COMMAND and every\n"
            "process it started have exited, and exit with COMMAND's status. COMMAND finds\n"
            "RLOCK_FENCE (decimal), RLOCK_TOKEN and RLOCK_RESOURCE in its environment; pass\n"
            "the fence to the storage you guard.\n"
            "\n"
            "  -a, --also RESOURCE hold this lock too (up to 15 times): all are taken together\n"
            "                      or none, in one order that cannot deadlock with another\n"
            "                      rlockctl run naming them in another order; losing any\n"
            "                      stops the job. RLOCK_FENCES lists every fence, RESOURCE's\n"
            "                      first, then in the order of the --also options (without\n"
            "                      --also: RLOCK_FENCE alone)\n"
            "      --shared        a shared (read) hold: any number of shared holders run at\n"
            "                      once, none while an exclusive one (a run without --shared)\n"
            "                      holds the lock; waiting is first come, first served across\n"
            "                      both modes (with --also: every lock shared)\n"
            "      --also-shared RESOURCE\n"
            "                      as --also, the lock taken shared (whatever --shared says\n"
            "                      of the others)\n"
            "      --limit N       RESOURCE is a semaphore of N permits: at most N jobs (or N\n"
            "                      permits, with --permits) hold it at once across every\n"
            "                      rlockctl and daemon on the Redis; every run on it names\n"
            "                      the same N. A job killed, or whose session ends, gives\n"
            "                      its permits back (a distributed sem)\n"
            "      --permits K     with --limit: take K permits, all at once (default 1)\n"
            "  -l, --ttl D         lease (default: the daemon's default_ttl)\n"
            "  -w, --wait D        wait up to D for the lock (default 0: try once); a daemon\n"
            "                      that cannot reach Redis is asked again meanwhile\n"
            "  -g, --grace D       after the lock is lost, time between SIGTERM and SIGKILL\n"
            "                      to the job (default 5s)\n"
            "  -N, --no-watchdog   the daemon does not renew the lease: the job is stopped\n"
            "                      once the lease runs out\n"
            "      --no-wait-children\n"
            "                      release the lock as soon as COMMAND exits, and leave what\n"
            "                      it started running (a daemon it starts on purpose)\n"
            "  -n, --name NAME     client name shown in the daemon's logs (default rlockctl)\n"
            "  -h, --help          show this help\n" CTL_GLOBAL_HELP
            "\n"
            "The job is COMMAND and every process descended from it, including those that\n"
            "left its process group or session (rlockctl is their subreaper). If the lock is\n"
            "lost, all of them get SIGTERM, then SIGKILL after --grace, and rlockctl exits 79\n"
            "once they are gone. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to rlockctl are\n"
            "passed on to the job; once COMMAND has exited (also when it exits after one of\n"
            "them) they stop what it left running (SIGTERM, SIGKILL after --grace). Started\n"
            "by a shell on a terminal, COMMAND gets the terminal: Ctrl-C and Ctrl-Z reach it,\n"
            "fg and bg work.\n"
            "\n"
            "Exit status: COMMAND's (128+N if killed by signal N); 75 lock not acquired\n"
            "(held elsewhere, --wait ran out, or a daemon limit reached);\n"
            "79 lock lost (the job was stopped, or COMMAND not started); 69 daemon unreachable\n"
            "or unavailable; 64 usage error; 126 COMMAND not executable; 127 COMMAND not found;\n"
            "70 other.\n");
}

static void elect_usage(FILE *f)
{
    fprintf(f,
            "Usage: rlockctl [OPTIONS] elect [ELECT-OPTIONS] NAME [--] COMMAND [ARGS...]\n"
            "\n"
            "Campaign in the election NAME, waiting (for ever, unless --wait) until elected,\n"
            "then run COMMAND as the leader, as 'rlockctl run' runs it, and resign once\n"
            "COMMAND and every process it started have exited; exit with COMMAND's status.\n"
            "COMMAND finds RLOCK_TERM (decimal: the leader's term, which only grows), and\n"
            "RLOCK_FENCE (the same number), RLOCK_TOKEN and RLOCK_RESOURCE (NAME) in its\n"
            "environment; pass the term to the storage you guard, which should refuse writes\n"
            "with a term below the highest it has seen. 'rlockctl leader NAME' shows who\n"
            "leads, by the value given with --value.\n"
            "\n"
            "      --value V       this candidate's value, shown to everyone who asks who\n"
            "                      leads (an address, a name; at most %u bytes; default\n"
            "                      HOST:PID of this rlockctl)\n"
            "  -w, --wait D        give up after waiting D to be elected (exit 75; default:\n"
            "                      wait for ever; 0: try once); a daemon that cannot reach\n"
            "                      Redis is asked again meanwhile\n"
            "  -l, --ttl D         lease of the leadership (default: the daemon's default_ttl);\n"
            "                      renewed while rlockctl's session lives, so a leader that\n"
            "                      dies or is cut off is replaced at the latest after it\n"
            "  -g, --grace D       after the leadership is lost, time between SIGTERM and\n"
            "                      SIGKILL to the job (default 5s)\n"
            "  -N, --no-watchdog   the daemon does not renew the lease: the job is stopped\n"
            "                      once the lease runs out\n"
            "      --no-wait-children\n"
            "                      resign as soon as COMMAND exits, and leave what it started\n"
            "                      running\n"
            "  -n, --name NAME     client name shown in the daemon's logs (default rlockctl)\n"
            "  -h, --help          show this help\n" CTL_GLOBAL_HELP
            "\n"
            "If the leadership is lost (the session ended, an operator took it away), every\n"
            "process of the job gets SIGTERM, then SIGKILL after --grace, and rlockctl exits\n"
            "79 once they are gone: another candidate may be leader by then. Signals and the\n"
            "terminal are handled as by 'rlockctl run'. If rlockctl itself dies (kill -9),\n"
            "COMMAND is killed with it, the session ends and the next candidate is elected.\n"
            "\n"
            "Exit status: COMMAND's (128+N if killed by signal N); 75 not elected within\n"
            "--wait (or a daemon limit reached); 79 leadership lost (the job was stopped, or\n"
            "COMMAND not started); 69 daemon unreachable or unavailable; 64 usage error; 126\n"
            "COMMAND not executable; 127 COMMAND not found; 70 other.\n",
            RLOCK_VALUE_MAX);
}

/* getopt_long's value for the options without a short form (above any char). */
enum {
    RUN_OPT_NO_WAIT_CHILDREN = 0x100,
    RUN_OPT_SHARED = 0x101,
    RUN_OPT_LIMIT = 0x102,
    RUN_OPT_PERMITS = 0x103,
    RUN_OPT_VALUE = 0x104,
    RUN_OPT_ALSO_SHARED = 0x105
};

/* A count from 1 to max for option what; 0, or -1 after saying why. */
static int run_count(const char *what, const char *text, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || v < 1 || v > max) {
        run_err("%s: '%s' is not a number from 1 to %u", what, text, max);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* Parse options and operands. Returns -1 to go on, else the exit code. */
static int run_parse(struct ctl *ctl, struct run *r, int argc, char **argv)
{
    static const struct option run_longopts[] = {
        {"ttl", required_argument, NULL, 'l'},
        {"also", required_argument, NULL, 'a'},
        {"also-shared", required_argument, NULL, RUN_OPT_ALSO_SHARED},
        {"wait", required_argument, NULL, 'w'},
        {"grace", required_argument, NULL, 'g'},
        {"no-watchdog", no_argument, NULL, 'N'},
        {"shared", no_argument, NULL, RUN_OPT_SHARED},
        {"limit", required_argument, NULL, RUN_OPT_LIMIT},
        {"permits", required_argument, NULL, RUN_OPT_PERMITS},
        {"no-wait-children", no_argument, NULL, RUN_OPT_NO_WAIT_CHILDREN},
        {"name", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        CTL_GLOBAL_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    /* elect: run's options that make sense for one exclusive lock, and --value. */
    static const struct option elect_longopts[] = {
        {"value", required_argument, NULL, RUN_OPT_VALUE},
        {"ttl", required_argument, NULL, 'l'},
        {"wait", required_argument, NULL, 'w'},
        {"grace", required_argument, NULL, 'g'},
        {"no-watchdog", no_argument, NULL, 'N'},
        {"no-wait-children", no_argument, NULL, RUN_OPT_NO_WAIT_CHILDREN},
        {"name", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        CTL_GLOBAL_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int elect = r->campaign_value != NULL;
    const struct option *longopts = elect ? elect_longopts : run_longopts;
    const char *shortopts = elect ? "+:l:w:g:Nn:h" CTL_GLOBAL_SHORTOPTS
                                  : "+:l:a:w:g:Nn:h" CTL_GLOBAL_SHORTOPTS;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        switch (ch) {
        case 'l':
            if (ctl_duration(run_opt("--ttl"), optarg, &r->ttl_ms) < 0)
                return EX_USAGE;
            break;
        case 'a':
        case RUN_OPT_ALSO_SHARED:
            if (r->nres + 1 >= RLOCK_ACQUIRE_ALL_MAX) {
                run_err("at most %d resources (RESOURCE and %d --also or --also-shared)",
                        RLOCK_ACQUIRE_ALL_MAX, RLOCK_ACQUIRE_ALL_MAX - 1);
                return EX_USAGE;
            }
            r->resources[++r->nres] = optarg; /* [0] is RESOURCE, known after the options */
            r->kinds[r->nres].shared = ch == RUN_OPT_ALSO_SHARED;
            break;
        case 'w':
            if (ctl_duration(run_opt("--wait"), optarg, &r->wait_ms) < 0)
                return EX_USAGE;
            r->wait_forever = 0;
            break;
        case RUN_OPT_VALUE:
            if (strlen(optarg) > RLOCK_VALUE_MAX) {
                run_err("--value is %zu bytes long: at most %u", strlen(optarg),
                        RLOCK_VALUE_MAX);
                return EX_USAGE;
            }
            r->campaign_value = optarg;
            break;
        case 'g':
            if (ctl_duration(run_opt("--grace"), optarg, &r->grace_ms) < 0)
                return EX_USAGE;
            break;
        case 'N':
            r->no_watchdog = 1;
            break;
        case RUN_OPT_SHARED:
            r->shared = 1;
            break;
        case RUN_OPT_LIMIT:
            if (run_count("--limit", optarg, RLOCK_LIMIT_MAX, &r->limit) < 0)
                return EX_USAGE;
            break;
        case RUN_OPT_PERMITS:
            if (run_count("--permits", optarg, RLOCK_LIMIT_MAX, &r->permits) < 0)
                return EX_USAGE;
            break;
        case RUN_OPT_NO_WAIT_CHILDREN:
            r->no_wait_children = 1;
            break;
        case 'n':
            r->name = optarg;
            break;
        case 'h':
            if (elect)
                elect_usage(stdout);
            else
                run_usage(stdout);
            return EX_OK;
        default:
            if ((rc = ctl_other_option(ctl, run_cmd, ch, argv)) != 0)
                return rc;
            break;
        }
    }
    if (optind >= argc) {
        run_err("no %s given (see rlockctl %s --help)", elect ? "NAME" : "RESOURCE", run_cmd);
        return EX_USAGE;
    }
    r->resource = r->resources[0] = argv[optind++];
    r->nres++;
    for (size_t i = 0; i < r->nres; i++) /* --shared: RESOURCE and every --also shared */
        r->kinds[i].shared |= r->shared;
    for (size_t i = 1; i < r->nres; i++)
        for (size_t k = 0; k < i; k++)
            if (strcmp(r->resources[i], r->resources[k]) == 0) {
                run_err("'%s' is named twice", r->resources[i]);
                return EX_USAGE;
            }
    if (r->limit > 0 && (r->shared || r->nres > 1)) {
        run_err("--limit takes one RESOURCE, without --shared or --also");
        return EX_USAGE;
    }
    if (r->permits > 0 && (r->limit == 0 || r->permits > r->limit)) {
        run_err("--permits needs --limit, and at most that many");
        return EX_USAGE;
    }
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (optind >= argc) {
        run_err("no COMMAND given (see rlockctl %s --help)", run_cmd);
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
    /* Whether the terminal sent it matters when the job shares rlockctl's group (run_on_wake). */
    int from_tty = sig != SIGCHLD && si != NULL && si->si_code == SI_KERNEL;
    run_wake((unsigned char)(sig + (from_tty ? RUN_WAKE_TTY : 0)));
}

static void run_on_lost(struct rlock_client *c, const char *resource, const char *token,
                        uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c, (void)resource, (void)token, (void)fence, (void)reason, (void)arg;
    run_wake(RUN_WAKE_LOST);
}

/* 1 for the signals rlockctl passes on to the job. */
static int run_forwards(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

/*
 * Install the handlers (those passed on only where not ignored, so a
 * command started in the background keeps ignoring them), then unblock the
 * caught signals: started with SIGCHLD blocked, rlockctl would never learn
 * that the command ended and would hold the lock for ever. Before the fork,
 * so no SIGCHLD can be missed. SIGCHLD also comes when the command stops
 * (no SA_NOCLDSTOP): a stop by the terminal is passed on to rlockctl.
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
        if (run_forwards(run_signals[i]) && old.sa_handler == SIG_IGN)
            continue;
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
static void run_exec(const struct run *r, const struct job *j, int errfd, pid_t parent)
{
    /*
     * The lock lives as long as rlockctl's session: if rlockctl dies, even by
     * SIGKILL, the command must not go on unprotected.
     */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(CTL_EX_LOST);
    job_child(j);
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

/* RESOURCE's fence, token and name; every fence in RLOCK_FENCES (always set: a run nested in
 * a run with --also must not inherit the outer one's list); elect: the fence as RLOCK_TERM
 * (and a run nested in an elect's job does not inherit it). */
static int run_export(struct rlock_lock *const *locks, size_t n, int elect)
{
    char fence[32], fences[RLOCK_ACQUIRE_ALL_MAX * 21 + 1];
    size_t used = 0;
    snprintf(fence, sizeof fence, "%" PRIu64, rlock_lock_fence(locks[0]));
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(fences + used, sizeof fences - used, "%s%" PRIu64,
                                 i ? " " : "", rlock_lock_fence(locks[i]));
    if (setenv("RLOCK_FENCE", fence, 1) < 0 ||
        setenv("RLOCK_TOKEN", rlock_lock_token(locks[0]), 1) < 0 ||
        setenv("RLOCK_RESOURCE", rlock_lock_resource(locks[0]), 1) < 0 ||
        setenv("RLOCK_FENCES", fences, 1) < 0 ||
        (elect ? setenv("RLOCK_TERM", fence, 1) : unsetenv("RLOCK_TERM")) < 0) {
        run_err("setenv: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * Fork and exec the command as job j. Returns its pid; 0 when the exec
 * failed (the child has been reaped into *status); -1 when no child could
 * be started.
 */
static pid_t run_spawn(const struct run *r, struct job *j, int *status)
{
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) < 0) {
        run_err("pipe: %s", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        run_exec(r, j, errpipe[1], parent);
    close(errpipe[1]);
    if (pid < 0) {
        run_err("fork: %s", strerror(errno));
        close(errpipe[0]);
        return -1;
    }
    job_started(j, pid);
    /* EOF means the exec succeeded (the pipe is close-on-exec). */
    int err = 0;
    ssize_t n;
    do
        n = read(errpipe[0], &err, sizeof err);
    while (n < 0 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof err) {
        run_err("cannot execute '%s': %s", r->argv[0], strerror(err));
        while (waitpid(pid, status, 0) < 0 && errno == EINTR)
            ;
        return 0;
    }
    return pid;
}

/*
 * Milliseconds on CLOCK_BOOTTIME, for the grace and kill deadlines of a
 * stopping job: they count on while the machine is suspended.
 */
static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t run_valid_for(const struct rlock_lock *l);

/*
 * 1 once the lock can no longer be counted on: lost, or past the time the
 * library can vouch for it (with the watchdog off, the lease running out;
 * with it on, no news from the daemon for too long). UNCERTAIN alone is not
 * enough: while the session moves to another daemon (its daemon restarted or
 * died) the lock is uncertain but still valid until its valid-until time,
 * which has the daemon's loss margin taken off already; the job is stopped
 * only if the resume has not confirmed the lock by then.
 */
static int run_lock_gone(const struct rlock_lock *l)
{
    enum rlock_lock_state st = rlock_lock_state(l);
    if (st == RLOCK_HELD)
        return 0;
    return st != RLOCK_UNCERTAIN || run_valid_for(l) <= 0;
}

/* Why the lock is gone, for messages. */
static const char *run_lock_why(const struct rlock_lock *l)
{
    enum rlock_lock_state st = rlock_lock_state(l);
    if (st == RLOCK_UNCERTAIN || st == RLOCK_HELD)
        return "its validity ran out with no word from the daemon";
    return rlock_lost_reason_str(rlock_lock_lost_reason(l));
}

/* Milliseconds (CLOCK_MONOTONIC) until the library stops vouching for l, or -1 (not held). */
static int64_t run_valid_for(const struct rlock_lock *l)
{
    int64_t until = rlock_lock_valid_until(l);
    if (until == 0)
        return -1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return until - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* What the supervisor waits for; run_enter is the only place that changes it. */
enum run_phase {
    RUN_COMMAND,   /* the command runs */
    RUN_LEFTOVERS, /* the command has exited; processes it started still run */
    RUN_STOPPING,  /* the job got SIGTERM; SIGKILL at the deadline */
    RUN_KILLING,   /* the job got SIGKILL, again each round until it is gone */
    RUN_DONE,      /* nothing left to wait for */
};

struct run_sup {
    enum run_phase phase;
    int lost;         /* the lock was lost before the job was over: exit CTL_EX_LOST */
    int stop_sig;     /* a signal passed on to the job while the command ran (0: none) */
    int64_t deadline; /* RUN_STOPPING: when to SIGKILL; RUN_KILLING: when to give up */
    struct rlock_lock *const *locks; /* RESOURCE's, then each --also's */
    size_t nlocks;
    const struct rlock_lock *gone;   /* the first lock found gone */
};

/* The first of s's locks that can no longer be counted on (remembered in s->gone), or NULL. */
static const struct rlock_lock *run_first_gone(struct run_sup *s)
{
    for (size_t i = 0; i < s->nlocks; i++)
        if (run_lock_gone(s->locks[i]))
            return s->gone = s->locks[i];
    return NULL;
}

/* Milliseconds until the library stops vouching for the first of s's locks, or -1. */
static int64_t run_sup_valid_for(const struct run_sup *s)
{
    int64_t min = -1;
    for (size_t i = 0; i < s->nlocks; i++) {
        int64_t v = run_valid_for(s->locks[i]);
        if (v >= 0 && (min < 0 || v < min))
            min = v;
    }
    return min;
}

static void run_enter(const struct run *r, const struct job *j, struct run_sup *s,
                      enum run_phase to)
{
    int64_t now = now_ms();
    if (to == RUN_STOPPING) {
        job_signal(j, SIGTERM);
        /* A stopped process acts on SIGTERM only once continued. */
        job_signal(j, SIGCONT);
        s->deadline = now + r->grace_ms;
    } else if (to == RUN_KILLING) {
        /*
         * Sent again each round, not only now: a process forked since the
         * last look (by a parent busy in a SIGTERM handler) is found next
         * time. SIGTERM went out once: what is forked after it is the
         * job's own clean-up, which the grace period is for.
         */
        run_err("the job is still running %" PRIu32 " ms after SIGTERM: SIGKILL",
                r->grace_ms);
        s->deadline = now + RUN_KILL_WAIT_MS;
    }
    s->phase = to;
}

/* The lock was found gone: stop the job (unless already stopping it), exit CTL_EX_LOST. */
static void run_lost(const struct run *r, const struct job *j, struct run_sup *s)
{
    s->lost = 1;
    const char *why = run_lock_why(s->gone);
    const char *name = rlock_lock_resource(s->gone);
    if (s->phase == RUN_COMMAND)
        run_err("%s '%s' lost (%s): stopping the job (command pid %ld)", run_noun, name, why,
                (long)j->pid);
    else if (s->phase == RUN_LEFTOVERS)
        run_err("%s '%s' lost (%s): stopping what the command left running", run_noun, name, why);
    else
        run_err("%s '%s' lost (%s) while stopping the job", run_noun, name, why);
    if (s->phase < RUN_STOPPING)
        run_enter(r, j, s, RUN_STOPPING);
}

/*
 * The command stopped. By the terminal, while rlockctl runs it as a job of
 * its own: stop rlockctl too, and when continued, continue the job unless
 * the lock was lost meanwhile (then it is stopped for good).
 */
static void run_job_stopped(const struct run *r, struct job *j, struct run_sup *s)
{
    if (s->phase == RUN_COMMAND && job_stopped_by_tty(j)) {
        job_suspend(j);
        if (run_first_gone(s) != NULL)
            run_lost(r, j, s);
        else
            job_continue(j);
    }
    j->stop_sig = 0;
}

/* Asked by signal sig to stop: stop what the command left running (SIGTERM, then SIGKILL). */
static void run_stop_leftovers(const struct run *r, const struct job *j, struct run_sup *s,
                               int sig)
{
    run_err("SIG%s: stopping what the command left running", sigabbrev_np(sig));
    run_enter(r, j, s, RUN_STOPPING);
}

/*
 * A signal arrived (from_tty: sent by the terminal). While the command runs,
 * the ones rlockctl passes on go to the job, except those from the terminal
 * when the job shares rlockctl's process group: it got them too. Once the
 * command has exited, they end the wait for what it left running: those
 * processes rarely heed them (a shell starts its background jobs with SIGINT
 * ignored), and the lock cannot be released while they run, so they are
 * stopped as on a loss. One that came while the command ran counts too,
 * once the command has exited: the command often ends *because* of it, and
 * what it left running would otherwise keep the lock (and rlockctl) for as
 * long as it likes, the signal long forgotten.
 */
static void run_on_wake(const struct run *r, const struct job *j, struct run_sup *s, int sig,
                        int from_tty)
{
    if (sig == SIGCONT && s->phase == RUN_COMMAND) {
        job_tty_give(j); /* fg of an rlockctl started in the background */
        return;
    }
    if (!run_forwards(sig))
        return;
    if (s->phase == RUN_COMMAND) {
        if (!(from_tty && j->mode == JOB_SHARED_GROUP))
            job_signal(j, sig);
        s->stop_sig = sig;
    } else if (s->phase == RUN_LEFTOVERS) {
        run_stop_leftovers(r, j, s, sig);
    }
}

/* A poll() timeout for a wait of ms milliseconds (0 when already over). */
static int run_poll_ms(int64_t ms)
{
    return ms <= 0 ? 0 : ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Sleep until a wake-up byte or the phase's next deadline; act on every byte read. */
static void run_sleep(const struct run *r, const struct job *j, struct run_sup *s, int64_t now)
{
    int timeout = -1;
    if (s->phase == RUN_STOPPING || s->phase == RUN_KILLING)
        timeout = run_poll_ms(s->deadline - now);
    else if (!s->lost && run_sup_valid_for(s) >= 0)
        timeout = run_poll_ms(run_sup_valid_for(s) + 1); /* look again once it has passed */
    if (s->phase == RUN_KILLING && timeout > RUN_KILL_ROUND_MS)
        timeout = RUN_KILL_ROUND_MS;
    struct pollfd p = {.fd = r->wake[0], .events = POLLIN};
    if (poll(&p, 1, timeout) <= 0)
        return;
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(r->wake[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != RUN_WAKE_LOST)
                run_on_wake(r, j, s, buf[i] & ~RUN_WAKE_TTY, (buf[i] & RUN_WAKE_TTY) != 0);
        }
    }
}

/*
 * Supervise the job until it is over: wait for the command, then (unless
 * --no-wait-children) for every process it left running; stop the whole job
 * if the lock is lost or the library can no longer vouch for it (watchdog off:
 * its lease runs out; on: no news from the daemon past its validity). Returns 1 when
 * the lock was lost before the job was over, else 0. The command's wait
 * status is in j once it has been reaped.
 */
static int run_supervise(const struct run *r, struct job *j, struct rlock_lock *const *locks)
{
    struct run_sup s = {.phase = RUN_COMMAND, .locks = locks, .nlocks = r->nres};
    for (;;) {
        int none_left = job_reap(j);
        /* The command is over: the terminal goes back to rlockctl before it says anything. */
        if (j->reaped)
            job_tty_take(j);
        /*
         * Reaped: the command ended during the sleep just over, when the lock
         * was last seen held unless s.lost says otherwise. Looking at the
         * lock again now would also count a loss that came after the
         * command's end but was only noticed at this wake-up (after rlockctl
         * was stopped or the machine suspended, both turn up together).
         */
        if (s.phase == RUN_COMMAND && j->reaped) {
            if (none_left || r->no_wait_children)
                run_enter(r, j, &s, RUN_DONE);
            else if (s.stop_sig != 0)
                run_stop_leftovers(r, j, &s, s.stop_sig);
            else
                run_enter(r, j, &s, RUN_LEFTOVERS);
        } else if (s.phase != RUN_COMMAND && none_left)
            run_enter(r, j, &s, RUN_DONE);
        if (s.phase == RUN_DONE)
            return s.lost;
        int64_t now = now_ms();
        if (!s.lost && run_first_gone(&s) != NULL)
            run_lost(r, j, &s);
        if (j->stop_sig)
            run_job_stopped(r, j, &s);
        if (s.phase == RUN_STOPPING && now >= s.deadline)
            run_enter(r, j, &s, RUN_KILLING);
        if (s.phase == RUN_KILLING) {
            if (now >= s.deadline) {
                if (job_survivors(j) > 0)
                    run_err("warning: not waiting any longer, %d ms after SIGKILL",
                            RUN_KILL_WAIT_MS);
                return s.lost;
            }
            job_signal(j, SIGKILL);
        }
        run_sleep(r, j, &s, now);
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

/*
 * Sleep as the last UNAVAILABLE answer suggests (its retry hint, else dflt
 * ms) and return 0; or -1 at once when that would pass end.
 */
static int run_pause_retry(int64_t end, uint32_t dflt)
{
    uint32_t pause = rlock_last_error()->retry_after_ms ? rlock_last_error()->retry_after_ms : dflt;
    if (now_ms() + pause >= end)
        return -1;
    struct timespec ts = {.tv_sec = pause / 1000, .tv_nsec = (long)(pause % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    return 0;
}

/*
 * Release l. A session moving to another daemon refuses calls UNAVAILABLE
 * until it has resumed there: ask again, within --timeout.
 */
static enum rlock_err run_release(const struct ctl *ctl, struct rlock_lock *l)
{
    int64_t end = now_ms() + ctl->timeout_ms;
    for (;;) {
        enum rlock_err e = rlock_release(l, ctl->timeout_ms);
        if (e != RLOCK_ERR_UNAVAILABLE || rlock_lock_state(l) == RLOCK_LOST)
            return e;
        if (run_pause_retry(end, 100) < 0)
            return e;
    }
}

/* The job is over and no lock lost on the way: release them. Returns the exit code. */
static int run_settle(const struct ctl *ctl, const struct run *r, struct rlock_client *c,
                      struct rlock_lock *const *locks, int status)
{
    for (size_t i = 0; i < r->nres; i++) {
        struct rlock_lock *l = locks[i];
        if (rlock_lock_state(l) == RLOCK_LOST) {
            /* Noticed only after the job's end: its status stands, nothing to release. */
            run_err("note: %s '%s' found lost (%s) only after the command ended",
                    run_noun, r->resources[i], rlock_lost_reason_str(rlock_lock_lost_reason(l)));
        } else if (run_release(ctl, l) != RLOCK_OK) {
            char msg[256];
            rlock_errmsg(c, msg, sizeof msg);
            run_err("warning: release of '%s' failed: %s (closing the session releases "
                    "it)", r->resources[i], msg);
        }
    }
    return run_exit_status(status);
}

/* With the locks held: run the job to its end and settle the locks. */
static int run_locked(const struct ctl *ctl, struct run *r, struct rlock_client *c,
                      struct rlock_lock *const *locks)
{
    if (run_export(locks, r->nres, r->campaign_value != NULL) < 0)
        return EX_SOFTWARE;
    if (pipe2(r->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        run_err("pipe: %s", strerror(errno));
        r->wake[0] = r->wake[1] = -1;
        return EX_SOFTWARE;
    }
    atomic_store(&run_wake_fd, r->wake[1]);
    int rc = EX_SOFTWARE;
    struct job j = {.tty = -1};
    if (run_catch_signals(r) < 0) {
        run_err("sigaction: %s", strerror(errno));
        goto out;
    }
    /* Lost already (e.g. rlockctl was stopped right after the grant): never start unguarded. */
    struct run_sup first = {.locks = locks, .nlocks = r->nres};
    if (run_first_gone(&first) != NULL) {
        run_err("%s '%s' lost (%s) before the command started; not running it",
                run_noun, rlock_lock_resource(first.gone), run_lock_why(first.gone));
        rc = CTL_EX_LOST;
        goto out;
    }
    if (job_init(&j) < 0)
        goto out;
    int status = 0;
    pid_t pid = run_spawn(r, &j, &status);
    if (pid < 0)
        goto out;
    int lost = pid > 0 ? run_supervise(r, &j, locks) : 0;
    job_fini(&j); /* the terminal back, if the job still has it, before any message */
    if (lost) {
        run_err("%s lost while the job ran", r->campaign_value != NULL ? "the leadership was"
                                             : r->nres > 1                ? "a lock was"
                                                                          : "the lock was");
        rc = CTL_EX_LOST;
    } else {
        rc = run_settle(ctl, r, c, locks, pid > 0 ? j.status : status);
    }
out:
    /* Before the signal mask is restored: taking the terminal back needs SIGTTOU blocked. */
    job_fini(&j);
    /* The pipe stays open: the lost-lock callback may still write until rlock_close. */
    run_restore_signals(r);
    return rc;
}

/*
 * Acquire, waiting up to --wait. A daemon that cannot reach Redis for a
 * moment (UNAVAILABLE, with its retry hint) is asked again while the wait
 * lasts: waiting for the lock includes waiting for the daemon to be able to
 * grant it.
 */
static enum rlock_err run_acquire(const struct ctl *ctl, const struct run *r,
                                  struct rlock_client *c, struct rlock_lock **locks)
{
    int64_t end = r->wait_forever ? INT64_MAX : now_ms() + r->wait_ms;
    for (;;) {
        int64_t left = r->wait_forever ? RUN_FOREVER_WAIT_MS : end - now_ms();
        struct rlock_acquire_opts ao = {.ttl_ms = r->ttl_ms,
                                        .wait_ms = left > 0 ? (uint32_t)left : 0,
                                        .watchdog_off = r->no_watchdog,
                                        .shared = r->shared,
                                        .limit = r->limit,
                                        .permits = r->permits,
                                        .campaign_value = r->campaign_value};
        enum rlock_err e =
            r->nres == 1 ? rlock_acquire(c, r->resource, &ao, ctl->timeout_ms, &locks[0])
                         : rlock_acquire_all_kinds(c, r->resources, r->kinds, r->nres, &ao,
                                                   ctl->timeout_ms, locks);
        if (e == RLOCK_ERR_TIMEOUT && r->wait_forever)
            continue; /* the daemon's max_wait, not ours: campaign again */
        if (e != RLOCK_ERR_UNAVAILABLE || (r->wait_ms == 0 && !r->wait_forever))
            return e;
        if (run_pause_retry(end, 250) < 0)
            return e;
    }
}

/* run or elect, with r's defaults: parse, connect, acquire, run the job; the exit code. */
static int run_main(struct ctl *ctl, const struct run *defaults, int argc, char **argv)
{
    struct run r = *defaults;
    int rc = run_parse(ctl, &r, argc, argv);
    if (rc >= 0)
        return rc;
    struct rlock_options opts = {.client_name = r.name, .on_lost = run_on_lost};
    struct rlock_client *c;
    rc = ctl_connect(ctl, &opts, &c);
    if (rc != 0)
        return rc;
    struct rlock_lock *locks[RLOCK_ACQUIRE_ALL_MAX] = {NULL};
    enum rlock_err e = run_acquire(ctl, &r, c, locks);
    if (e == RLOCK_OK) {
        /* How long the lease lasts is the library's to say (rlock_lock_valid_until). */
        rc = run_locked(ctl, &r, c, locks);
    } else {
        char msg[256], what[160];
        rlock_errmsg(c, msg, sizeof msg);
        if (r.campaign_value != NULL)
            snprintf(what, sizeof what, "leadership of '%.120s'", r.resource);
        else if (r.nres == 1)
            snprintf(what, sizeof what, "lock '%.120s'", r.resource);
        else
            snprintf(what, sizeof what, "locks '%.120s' and %zu more", r.resource, r.nres - 1);
        if (e == RLOCK_ERR_NOT_ACQUIRED)
            run_err("%s not acquired: held elsewhere (%s)", what, msg);
        else if (e == RLOCK_ERR_TIMEOUT)
            run_err("%s not acquired within %" PRIu32 " ms (%s)", what, r.wait_ms, msg);
        else if (e == RLOCK_ERR_LIMIT_EXCEEDED)
            run_err("%s not acquired: a limit of the daemon was reached (%s)", what, msg);
        else
            run_err("acquire of %s: %s", what, msg);
        rc = ctl_exit_code(e);
    }
    for (size_t i = 0; i < r.nres; i++)
        rlock_lock_free(locks[i]);
    rlock_close(c);
    /* No handler and no callback is left to write to the pipe now. */
    atomic_store(&run_wake_fd, -1);
    if (r.wake[0] >= 0) {
        close(r.wake[0]);
        close(r.wake[1]);
    }
    return rc;
}

int ctl_run(struct ctl *ctl, int argc, char **argv)
{
    struct run r = {.grace_ms = 5000, .name = "rlockctl", .wake = {-1, -1}};
    run_cmd = "run";
    return run_main(ctl, &r, argc, argv);
}

int ctl_elect(struct ctl *ctl, int argc, char **argv)
{
    /* The default value says who leads: this host and rlockctl's pid. */
    char host[256] = "", value[300];
    if (gethostname(host, sizeof host - 1) < 0)
        snprintf(host, sizeof host, "?");
    snprintf(value, sizeof value, "%s:%ld", host, (long)getpid());
    struct run r = {.grace_ms = 5000,
                    .name = "rlockctl",
                    .wake = {-1, -1},
                    .campaign_value = value,
                    .wait_forever = 1};
    run_cmd = "elect";
    run_noun = "leadership of";
    return run_main(ctl, &r, argc, argv);
}
