/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl.c — the command-line client of rlockd: global options, the auth
 * token, the table of subcommands, and the small ones (ping, stats). `run`
 * and `elect` live in rlockctl_run.c, `leader` in rlockctl_leader.c, the
 * operators' views in rlockctl_admin.c.
 */
#include "rlockctl.h"
#include "rlockctl_out.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <protobuf-c/protobuf-c.h>

#include "duration.h"

#ifndef RLOCK_VERSION
#define RLOCK_VERSION "unknown"
#endif

/* Every exit status rlockctl uses, for --help (docs/rlockctl.md repeats it). */
#define CTL_EXIT_CODES(X)                                                                     \
    X("0", "success (run, elect: the command's own exit status; 128+N if killed by")         \
    X("", "signal N; leader: a candidate leads)")                                             \
    X("64", "usage error, or the daemon refused an argument as invalid")                      \
    X("65", "run, elect: the name is held as another kind (a semaphore, a lock, another")     \
    X("", "--limit): WRONG_KIND")                                                             \
    X("66", "release --force: no session of the daemon holds the resource; kill-session:") \
    X("", "no such session; leader: nobody leads the election")                               \
    X("69", "cannot connect, or the daemon is unavailable, shutting down or not answering")   \
    X("70", "any other failure")                                                              \
    X("75", "lock not acquired: held elsewhere, --wait ran out, a deadlock, or a daemon limit")\
    X("", "reached (too many locks on the session or waiters on the resource); elect:")       \
    X("", "not elected within --wait")                                                        \
    X("77", "the daemon refused the auth token (missing or wrong), or the command needs")    \
    X("", "an admin token")                                                                   \
    X("79", "run: the lock was lost before the job was over (it was stopped), or before")     \
    X("", "the command started (it was not started); elect: the leadership, likewise")        \
    X("126", "run, elect: the command could not be executed")                                 \
    X("127", "run, elect: the command was not found")

void ctl_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rlockctl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int ctl_exit_code(enum rlock_err e)
{
    switch (e) {
    case RLOCK_OK:
        return EX_OK;
    case RLOCK_ERR_NOT_ACQUIRED:
    case RLOCK_ERR_TIMEOUT:
    case RLOCK_ERR_DEADLOCK:       /* the cycle ends as its other waits end: try again */
    case RLOCK_ERR_LIMIT_EXCEEDED: /* a limit frees up as locks and waiters go: try later */
        return EX_TEMPFAIL;
    case RLOCK_ERR_ARG:
    case RLOCK_ERR_INVALID:
        return EX_USAGE;
    case RLOCK_ERR_NOT_FOUND:
        return EX_NOINPUT;
    case RLOCK_ERR_WRONG_KIND:
        return EX_DATAERR;
    case RLOCK_ERR_UNAUTHENTICATED:
    case RLOCK_ERR_PERMISSION_DENIED:
        return EX_NOPERM;
    case RLOCK_ERR_CONNECT:
    case RLOCK_ERR_UNAVAILABLE:
    case RLOCK_ERR_SHUTTING_DOWN:
    case RLOCK_ERR_CLOSED:
    case RLOCK_ERR_DEADLINE:
        return EX_UNAVAILABLE;
    default:
        return EX_SOFTWARE;
    }
}

/* Longest token read from a token file (the daemon accepts 256 characters). */
#define CTL_TOKEN_MAX 256

/*
 * The token in the file at path: its first line that is neither blank nor a
 * comment ('#'), either the token alone or "ROLE TOKEN" as in the daemon's
 * own token file. 0, or -1 after printing why (never the token).
 */
static int read_token(const char *path, char *tok, size_t len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        ctl_err("--token-file %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IROTH | S_IWOTH)) != 0)
        ctl_err("warning: token file %s can be read or written by others", path);
    char line[CTL_TOKEN_MAX + 64];
    int rc = -1, lineno = 0, found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        lineno++;
        int whole = strchr(line, '\n') != NULL || feof(f);
        char *words[3], *save = NULL;
        int nwords = 0;
        for (char *w = strtok_r(line, " \t\r\n", &save); w != NULL && nwords < 3;
             w = strtok_r(NULL, " \t\r\n", &save))
            words[nwords++] = w;
        if (whole && (nwords == 0 || words[0][0] == '#'))
            continue;
        found = 1;
        if (!whole || nwords > 2 || strlen(words[nwords - 1]) >= len)
            ctl_err("--token-file %s: line %d: expected TOKEN or ROLE TOKEN", path, lineno);
        else
            rc = snprintf(tok, len, "%s", words[nwords - 1]) > 0 ? 0 : -1;
    }
    if (!found)
        ctl_err("--token-file %s: no token in the file", path);
    memset(line, 0, sizeof line);
    fclose(f);
    return rc;
}

int ctl_connect(const struct ctl *ctl, struct rlock_options *opts, struct rlock_client **out)
{
    char err[512], token[CTL_TOKEN_MAX + 1] = "";
    opts->connect_timeout_ms = ctl->timeout_ms;
    if (ctl->token_file != NULL) {
        if (read_token(ctl->token_file, token, sizeof token) < 0)
            return EX_NOPERM;
        opts->auth_token = token;
    }
    opts->tls_ca_file = ctl->tls_ca;
    opts->tls_cert_file = ctl->tls_cert;
    opts->tls_key_file = ctl->tls_key;
    opts->tls_server_name = ctl->tls_server_name;
    enum rlock_err e = rlock_connect(ctl->server, opts, out, err, sizeof err);
    memset(token, 0, sizeof token);
    opts->auth_token = NULL;
    if (e == RLOCK_OK)
        return 0;
    ctl_err("%s", err);
    return ctl_exit_code(e);
}

int ctl_duration(const char *opt, const char *s, uint32_t *out_ms)
{
    uint64_t v;
    if (duration_parse_ms(s, 1000, &v) < 0) {
        ctl_err("%s: '%s' is not a duration (try 30, 500ms, 10s, 5m, 1h)", opt, s);
        return -1;
    }
    *out_ms = (uint32_t)v;
    return 0;
}

static int ctl_global_option(struct ctl *ctl, int ch, const char *arg)
{
    switch (ch) {
    case 's':
        ctl->server = arg;
        return 1;
    case 't':
        return ctl_duration("--timeout", arg, &ctl->timeout_ms) < 0 ? -1 : 1;
    case CTL_OPT_TOKEN_FILE:
        ctl->token_file = arg;
        return 1;
    case CTL_OPT_TLS_CA:
        ctl->tls_ca = arg;
        return 1;
    case CTL_OPT_TLS_CERT:
        ctl->tls_cert = arg;
        return 1;
    case CTL_OPT_TLS_KEY:
        ctl->tls_key = arg;
        return 1;
    case CTL_OPT_TLS_SERVER_NAME:
        ctl->tls_server_name = arg;
        return 1;
    default:
        return 0;
    }
}

static int ctl_bad_option(const char *cmd, int ch, int opt, char *const argv[])
{
    const char *arg = argv[optind - 1];
    const char *where = cmd ? cmd : "";
    const char *sep = cmd ? ": " : "";
    if (ch == ':')
        ctl_err("%s%soption '%s' needs a value", where, sep, arg);
    else if (opt != 0)
        ctl_err("%s%sunknown option '-%c'", where, sep, opt);
    else
        ctl_err("%s%sunknown option '%s'", where, sep, arg);
    fprintf(stderr, "Try 'rlockctl %s%s--help'.\n", where, cmd ? " " : "");
    return EX_USAGE;
}

int ctl_other_option(struct ctl *ctl, const char *cmd, int ch, char *const argv[])
{
    int rc = ctl_global_option(ctl, ch, optarg);
    if (rc > 0)
        return 0;
    return rc == 0 ? ctl_bad_option(cmd, ch, optopt, argv) : EX_USAGE;
}

/* --- ping --------------------------------------------------------------- */

static void ping_usage(FILE *f)
{
    fprintf(f, "Usage: rlockctl [OPTIONS] ping [-c N] [-i D]\n"
               "\n"
               "Open a session and time round trips to the daemon.\n"
               "\n"
               "  -c, --count N       pings to send (default 1)\n"
               "  -i, --interval D    pause between pings (default 1s)\n"
               "  -h, --help          show this help\n" CTL_GLOBAL_HELP);
}

static double elapsed_ms(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

static int cmd_ping(struct ctl *ctl, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"count", required_argument, NULL, 'c'},
        {"interval", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        CTL_GLOBAL_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    long count = 1;
    uint32_t interval_ms = 1000;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "+:c:i:h" CTL_GLOBAL_SHORTOPTS, longopts, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'c':
            errno = 0;
            count = strtol(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || count < 1) {
                ctl_err("ping: --count: '%s' is not a positive number", optarg);
                return EX_USAGE;
            }
            break;
        case 'i':
            if (ctl_duration("ping: --interval", optarg, &interval_ms) < 0)
                return EX_USAGE;
            break;
        case 'h':
            ping_usage(stdout);
            return EX_OK;
        default:
            if ((rc = ctl_other_option(ctl, "ping", ch, argv)) != 0)
                return rc;
            break;
        }
    }
    if (optind != argc) {
        ctl_err("ping: unexpected argument '%s'", argv[optind]);
        return EX_USAGE;
    }
    struct rlock_options opts = {.client_name = "rlockctl ping"};
    struct rlock_client *c;
    rc = ctl_connect(ctl, &opts, &c);
    if (rc != 0)
        return rc;
    for (long i = 0; i < count && rc == 0; i++) {
        if (i > 0) {
            struct timespec pause = {.tv_sec = interval_ms / 1000,
                                     .tv_nsec = (long)(interval_ms % 1000) * 1000000};
            nanosleep(&pause, NULL);
        }
        struct timespec t0, t1;
        uint64_t server_ms = 0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        enum rlock_err e = rlock_ping(c, ctl->timeout_ms, &server_ms);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (e != RLOCK_OK) {
            char msg[256];
            rlock_errmsg(c, msg, sizeof msg);
            ctl_err("ping %s: %s", ctl->server, msg);
            rc = ctl_exit_code(e);
            break;
        }
        time_t secs = (time_t)(server_ms / 1000);
        struct tm tm;
        char when[32] = "?";
        if (gmtime_r(&secs, &tm) != NULL)
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        printf("pong from %s: rtt %.3f ms, server time %s.%03uZ\n", ctl->server,
               elapsed_ms(&t0, &t1), when, (unsigned)(server_ms % 1000));
        fflush(stdout);
    }
    rlock_close(c);
    return rc;
}

/* --- stats -------------------------------------------------------------- */

/* Every StatsReply field once; drives both the table and the JSON output. */
#define CTL_STATS_FIELDS(X)                                                                   \
    X(NUM, sessions)                                                                          \
    X(NUM, held_locks)                                                                        \
    X(NUM, waiters)                                                                           \
    X(NUM, redis_connections)                                                                 \
    X(NUM, redis_connections_ready)                                                           \
    X(BOOL, redis_up)                                                                         \
    X(NUM, script_reloads)                                                                    \
    X(NUM, acquires)                                                                          \
    X(NUM, grants)                                                                            \
    X(NUM, locks_lost)                                                                        \
    X(NUM, redis_errors)                                                                      \
    X(NUM, uptime_ms)                                                                         \
    X(STR, server_version)

#define STAT_ROW_NUM(f) {#f, CTL_FIELD_NUM, (uint64_t)s->f, NULL},
#define STAT_ROW_BOOL(f) {#f, CTL_FIELD_BOOL, (uint64_t)(s->f != 0), NULL},
#define STAT_ROW_STR(f) {#f, CTL_FIELD_STR, 0, s->f},
#define STAT_ROW(kind, f) STAT_ROW_##kind(f)

static void stats_usage(FILE *f)
{
    fprintf(f, "Usage: rlockctl [OPTIONS] stats [--json]\n"
               "\n"
               "Print the daemon's counters as a table, or as one JSON object.\n"
               "\n"
               "  -j, --json          JSON output\n"
               "  -h, --help          show this help\n" CTL_GLOBAL_HELP);
}

static void stats_print(const struct rlock_stats *s, int json)
{
    const struct ctl_field rows[] = {CTL_STATS_FIELDS(STAT_ROW)};
    ctl_print_fields(rows, sizeof rows / sizeof rows[0], json);
}

static int cmd_stats(struct ctl *ctl, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        CTL_GLOBAL_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int json = 0, ch, rc;
    while ((ch = getopt_long(argc, argv, "+:jh" CTL_GLOBAL_SHORTOPTS, longopts, NULL)) != -1) {
        switch (ch) {
        case 'j':
            json = 1;
            break;
        case 'h':
            stats_usage(stdout);
            return EX_OK;
        default:
            if ((rc = ctl_other_option(ctl, "stats", ch, argv)) != 0)
                return rc;
            break;
        }
    }
    if (optind != argc) {
        ctl_err("stats: unexpected argument '%s'", argv[optind]);
        return EX_USAGE;
    }
    struct rlock_options opts = {.client_name = "rlockctl stats"};
    struct rlock_client *c;
    rc = ctl_connect(ctl, &opts, &c);
    if (rc != 0)
        return rc;
    struct rlock_stats st;
    enum rlock_err e = rlock_stats(c, ctl->timeout_ms, &st);
    if (e == RLOCK_OK) {
        stats_print(&st, json);
    } else {
        char msg[256];
        rlock_errmsg(c, msg, sizeof msg);
        ctl_err("stats: %s", msg);
        rc = ctl_exit_code(e);
    }
    rlock_close(c);
    return rc;
}

/* --- main --------------------------------------------------------------- */

static const struct ctl_cmd {
    const char *name;
    int (*fn)(struct ctl *ctl, int argc, char **argv);
    const char *summary;
} ctl_cmds[] = {
    {"run", ctl_run, "run a command while holding a lock (a distributed flock)"},
    {"elect", ctl_elect, "campaign in an election, run a command while leader"},
    {"leader", ctl_leader, "print who leads an election, or watch it change"},
    {"ping", cmd_ping, "time round trips to the daemon"},
    {"stats", cmd_stats, "print the daemon's counters"},
    {"info", ctl_info, "describe the daemon: version, configuration, Redis, limits"},
    {"sessions", ctl_sessions, "list the daemon's sessions"},
    {"locks", ctl_locks, "list the locks held through the daemon"},
    {"top", ctl_top, "show where acquires wait, live: the most contended resources"},
    {"release", ctl_release, "release --force: take a lock away from its holder"},
    {"kill-session", ctl_kill_session, "end a session of the daemon, releasing its locks"},
};

#define CTL_NCMDS (sizeof ctl_cmds / sizeof ctl_cmds[0])

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: rlockctl [OPTIONS] COMMAND [ARGS...]\n"
            "\n"
            "Command-line client of rlockd, the distributed lock daemon.\n"
            "The options below may also follow COMMAND.\n"
            "\n"
            "Options:\n"
            "  -s, --server ADDR   daemon address, HOST:PORT or unix:/path, either behind\n"
            "                      tls:// for a TLS listener; several, comma-separated\n"
            "                      (default: $RLOCK_SERVER, else %s)\n"
            "  -t, --timeout D     longest wait for each answer of the daemon (default 5s)\n"
            "      --token-file F  file holding the auth token, for a daemon that requires\n"
            "                      one (default: $RLOCK_TOKEN_FILE, else none)\n"
            "      --tls-ca F      CA certificates the daemon's must chain to (tls://;\n"
            "                      default: $RLOCK_TLS_CA, else the system's)\n"
            "      --tls-cert F    this client's certificate, for a daemon that asks for\n"
            "                      one (default: $RLOCK_TLS_CERT)\n"
            "      --tls-key F     its private key (default: $RLOCK_TLS_KEY)\n"
            "      --tls-server-name NAME\n"
            "                      the name the daemon's certificate must carry (default:\n"
            "                      $RLOCK_TLS_SERVER_NAME, else the address's host)\n"
            "  -h, --help          show this help\n"
            "  -V, --version       show the versions of rlockctl and its libraries\n"
            "\n"
            "Commands:\n",
            RLOCK_DEFAULT_ADDRESS);
    for (size_t i = 0; i < CTL_NCMDS; i++)
        fprintf(f, "  %-12s  %s\n", ctl_cmds[i].name, ctl_cmds[i].summary);
    fprintf(f, "\n'rlockctl COMMAND --help' shows the options of a command.\n"
               "Durations are seconds, or a number with a unit: 250ms, 10s, 5m, 1h.\n"
               "\n"
               "Exit status:\n");
#define CTL_EXIT_LINE(code, text) fprintf(f, "  %-4s %s\n", code, text);
    CTL_EXIT_CODES(CTL_EXIT_LINE)
#undef CTL_EXIT_LINE
}

/* An environment variable's value, or NULL when unset or empty. */
static const char *ctl_env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static void version(void)
{
    printf("rlockctl %s\nlibrlock %s\nprotobuf-c %s\n", RLOCK_VERSION, rlock_version(),
           protobuf_c_version());
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"server", required_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 't'},
        {"token-file", required_argument, NULL, CTL_OPT_TOKEN_FILE},
        {"tls-ca", required_argument, NULL, CTL_OPT_TLS_CA},
        {"tls-cert", required_argument, NULL, CTL_OPT_TLS_CERT},
        {"tls-key", required_argument, NULL, CTL_OPT_TLS_KEY},
        {"tls-server-name", required_argument, NULL, CTL_OPT_TLS_SERVER_NAME},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *env = getenv("RLOCK_SERVER");
    const char *token_env = getenv("RLOCK_TOKEN_FILE");
    struct ctl ctl = {
        .server = env != NULL && env[0] ? env : RLOCK_DEFAULT_ADDRESS,
        .timeout_ms = RLOCK_DEFAULT_TIMEOUT_MS,
        .token_file = token_env != NULL && token_env[0] ? token_env : NULL,
        .tls_ca = ctl_env("RLOCK_TLS_CA"),
        .tls_cert = ctl_env("RLOCK_TLS_CERT"),
        .tls_key = ctl_env("RLOCK_TLS_KEY"),
        .tls_server_name = ctl_env("RLOCK_TLS_SERVER_NAME"),
    };
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "+:s:t:hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
        case 't':
        case CTL_OPT_TOKEN_FILE:
        case CTL_OPT_TLS_CA:
        case CTL_OPT_TLS_CERT:
        case CTL_OPT_TLS_KEY:
        case CTL_OPT_TLS_SERVER_NAME:
            if (ctl_global_option(&ctl, ch, optarg) < 0)
                return EX_USAGE;
            break;
        case 'h':
            usage(stdout);
            return EX_OK;
        case 'V':
            version();
            return EX_OK;
        default:
            return ctl_bad_option(NULL, ch, optopt, argv);
        }
    }
    if (optind >= argc) {
        ctl_err("no command given");
        usage(stderr);
        return EX_USAGE;
    }
    const char *name = argv[optind];
    for (size_t i = 0; i < CTL_NCMDS; i++) {
        if (strcmp(ctl_cmds[i].name, name) == 0) {
            int sub_argc = argc - optind;
            char **sub_argv = argv + optind;
            optind = 0; /* glibc: restart getopt for the subcommand's own options */
            return ctl_cmds[i].fn(&ctl, sub_argc, sub_argv);
        }
    }
    ctl_err("unknown command '%s' (see rlockctl --help)", name);
    return EX_USAGE;
}
