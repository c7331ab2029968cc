/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl_top.c — `rlockctl top`: where the daemon's acquires wait, live,
 * in the manner of top(1). Each refresh asks the daemon for its counters
 * (Stats: sessions, locks, waiters, grants, whose growth gives grants per
 * second) and its most contended resources (TopResources, with their
 * holders), and redraws the terminal; keys change the order, q quits.
 *
 * --once prints one snapshot and exits: a table, or with --json one JSON
 * document (docs/rlockctl.md). So does a run whose standard output or input
 * is not a terminal: nothing is redrawn into a pipe or read from one.
 *
 * The terminal is put in non-canonical mode without echo, on the alternate
 * screen, with the cursor hidden and lines cut at the right edge rather than
 * wrapped; all of it is undone on every way out (q, SIGINT, SIGTERM,
 * SIGHUP, an error). Resource and client names come from clients of the
 * daemon: control characters in them are shown escaped, never sent to the
 * terminal.
 */
#include "rlockctl.h"
#include "rlockctl_out.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define TOP_LIMIT_ONCE 10u
#define TOP_HEADER_LINES 5 /* lines above the table's rows, its header included */

static const struct top_order_name {
    const char *name;
    char key;
    enum rlock_top_order order;
} orders[] = {
    {"wait", 'w', RLOCK_TOP_WAIT},         {"contended", 'c', RLOCK_TOP_CONTENDED},
    {"timeouts", 't', RLOCK_TOP_TIMEOUTS}, {"hold", 'h', RLOCK_TOP_HOLD},
    {"waiters", 'n', RLOCK_TOP_WAITERS},   {"losses", 'l', RLOCK_TOP_LOSSES},
};
#define NORDERS (sizeof orders / sizeof orders[0])

struct top_opts {
    int json, once;
    uint32_t limit; /* 0: as many as the screen shows (once: TOP_LIMIT_ONCE) */
    uint32_t interval_ms;
    size_t order;   /* index in orders[] */
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: rlockctl [OPTIONS] top [--once] [--json] [--order KEY] [--limit N]\n"
            "                              [--interval D]\n"
            "\n"
            "Show where the daemon's acquires wait, refreshed every second: its sessions,\n"
            "locks, waiters and grants per second, and its most contended resources with\n"
            "their holders. Keys: w c t h n l order by wait, contended acquires, timeouts,\n"
            "time held, waiters, losses; < and > step through the orders; q quits. Needs an\n"
            "admin token when the daemon has tokens.\n"
            "\n"
            "  -1, --once          print one snapshot and exit (also when stdout or stdin\n"
            "                      is not a terminal)\n"
            "  -j, --json          with --once: one JSON document (docs/rlockctl.md)\n"
            "  -o, --order KEY     wait (default), contended, timeouts, hold, waiters, losses\n"
            "  -n, --limit N       resources shown, 1 to 1000 (default: what the screen\n"
            "                      holds; 10 with --once)\n"
            "  -i, --interval D    time between refreshes (default 1s, at least 100ms)\n"
            "  -h, --help          show this help\n" CTL_GLOBAL_HELP);
}

static int parse(struct ctl *ctl, int argc, char **argv, struct top_opts *o)
{
    static const struct option longopts[] = {
        {"once", no_argument, NULL, '1'},
        {"json", no_argument, NULL, 'j'},
        {"order", required_argument, NULL, 'o'},
        {"limit", required_argument, NULL, 'n'},
        {"interval", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        CTL_GLOBAL_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->interval_ms = 1000;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "+:1jo:n:i:h" CTL_GLOBAL_SHORTOPTS, longopts, NULL)) !=
           -1) {
        switch (ch) {
        case '1':
            o->once = 1;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'o': {
            size_t i = 0;
            while (i < NORDERS && strcmp(orders[i].name, optarg) != 0)
                i++;
            if (i == NORDERS) {
                ctl_err("top: --order: '%s' is not one of wait, contended, timeouts, hold, "
                        "waiters, losses", optarg);
                return EX_USAGE;
            }
            o->order = i;
            break;
        }
        case 'n': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || v < 1 || v > RLOCK_LIST_LIMIT_MAX) {
                ctl_err("top: --limit: '%s' is not a number from 1 to %u", optarg,
                        RLOCK_LIST_LIMIT_MAX);
                return EX_USAGE;
            }
            o->limit = (uint32_t)v;
            break;
        }
        case 'i':
            if (ctl_duration("--interval", optarg, &o->interval_ms) != 0)
                return EX_USAGE;
            if (o->interval_ms < 100) {
                ctl_err("top: --interval: at least 100ms");
                return EX_USAGE;
            }
            break;
        case 'h':
            usage(stdout);
            return EX_OK;
        default:
            if ((rc = ctl_other_option(ctl, "top", ch, argv)) != 0)
                return rc;
            break;
        }
    }
    if (optind != argc) {
        ctl_err("top: unexpected argument '%s'", argv[optind]);
        return EX_USAGE;
    }
    if (o->json && !o->once) {
        ctl_err("top: --json needs --once");
        return EX_USAGE;
    }
    return -1;
}

/* --- one snapshot ------------------------------------------------------------------ */

#define SNAP_MAX RLOCK_LIST_LIMIT_MAX
/* The longest resource name a daemon accepts (rlockd.conf's limits.max_resource_bytes, at most). */
#define TOP_NAME_MAX 4096

/* A resource of the snapshot, its strings copied out of the visit. */
struct snap_entry {
    struct rlock_resource_stats st;
    char name[TOP_NAME_MAX + 1];
};

struct snap {
    struct rlock_stats stats;
    struct rlock_top_summary sum;
    uint32_t n;
    struct snap_entry *e; /* SNAP_MAX of them */
};

static int snap_visit(const struct rlock_resource_stats *r, void *arg)
{
    struct snap *s = arg;
    if (s->n >= SNAP_MAX)
        return 1;
    struct snap_entry *e = &s->e[s->n++];
    e->st = *r;
    snprintf(e->name, sizeof e->name, "%s", r->resource);
    e->st.resource = e->name;
    return 0;
}

static enum rlock_err snap_take(struct rlock_client *c, const struct ctl *ctl,
                                const struct top_opts *o, uint32_t limit, struct snap *s)
{
    s->n = 0;
    enum rlock_err e = rlock_stats(c, ctl->timeout_ms, &s->stats);
    if (e == RLOCK_OK)
        e = rlock_top_resources(c, orders[o->order].order, limit, snap_visit, s, &s->sum,
                                ctl->timeout_ms);
    return e;
}

/* A time in microseconds for people. */
static void fmt_us(uint64_t us, char *buf, size_t len)
{
    if (us < 1000)
        snprintf(buf, len, "%" PRIu64 "us", us);
    else
        ctl_fmt_duration(us / 1000, buf, len);
}

static void json_holder(struct ctl_json *j, const struct rlock_resource_stats *r)
{
    ctl_json_key(j, "holder");
    if (!r->held) {
        fputs("null", stdout);
        return;
    }
    struct ctl_json h;
    char owner[24];
    snprintf(owner, sizeof owner, "%" PRIu64, r->holder.owner);
    ctl_json_open(&h);
    ctl_json_str(&h, "session_id", r->holder.session_id);
    ctl_json_str(&h, "client_name", r->holder.client_name);
    ctl_json_str(&h, "owner", owner);
    ctl_json_num(&h, "since_ms", r->holder.since_ms);
    ctl_json_num(&h, "holders", r->holder.holders);
    ctl_json_num(&h, "ttl_left_ms", r->holder.ttl_left_ms);
    ctl_json_close(&h);
}

static void print_json(const struct snap *s, const struct top_opts *o)
{
    struct ctl_json j;
    ctl_json_open(&j);
    ctl_json_str(&j, "order", orders[o->order].name);
    ctl_json_num(&j, "sessions", s->stats.sessions);
    ctl_json_num(&j, "held_locks", s->stats.held_locks);
    ctl_json_num(&j, "waiters", s->stats.waiters);
    ctl_json_num(&j, "grants", s->stats.grants);
    ctl_json_num(&j, "capacity", s->sum.capacity);
    ctl_json_num(&j, "followed", s->sum.followed);
    ctl_json_num(&j, "total_weight", s->sum.total_weight);
    ctl_json_num(&j, "error_bound", s->sum.error_bound);
    ctl_json_key(&j, "resources");
    fputs("[", stdout);
    for (uint32_t i = 0; i < s->n; i++) {
        const struct rlock_resource_stats *r = &s->e[i].st;
        struct ctl_json e;
        fputs(i > 0 ? ",\n    " : "\n    ", stdout);
        ctl_json_open(&e);
        ctl_json_str(&e, "resource", r->resource);
        ctl_json_num(&e, "weight", r->weight);
        ctl_json_num(&e, "weight_error", r->weight_error);
        ctl_json_num(&e, "contended", r->contended);
        ctl_json_num(&e, "grants", r->grants);
        ctl_json_num(&e, "timeouts", r->timeouts);
        ctl_json_num(&e, "refusals", r->refusals);
        ctl_json_num(&e, "cancels", r->cancels);
        ctl_json_num(&e, "wait_total_us", r->wait_total_us);
        ctl_json_num(&e, "wait_p50_us", r->wait_p50_us);
        ctl_json_num(&e, "wait_p99_us", r->wait_p99_us);
        ctl_json_num(&e, "wait_max_us", r->wait_max_us);
        ctl_json_num(&e, "holds", r->holds);
        ctl_json_num(&e, "losses", r->losses);
        ctl_json_num(&e, "hold_total_us", r->hold_total_us);
        ctl_json_num(&e, "hold_p50_us", r->hold_p50_us);
        ctl_json_num(&e, "hold_p99_us", r->hold_p99_us);
        ctl_json_num(&e, "hold_max_us", r->hold_max_us);
        ctl_json_num(&e, "waiters", r->waiters);
        ctl_json_num(&e, "waiters_max", r->waiters_max);
        json_holder(&e, r);
        ctl_json_close(&e);
    }
    fputs(s->n > 0 ? "\n]" : "]", stdout);
    ctl_json_close(&j);
    putchar('\n');
}

static const char *const headers[] = {"WAITED", "CONTENDED", "TIMEOUTS", "WAIT_P99", "WAIT_MAX",
                                      "QUEUE",  "HOLD_P99",  "LOST",     "HOLDER",   "RESOURCE"};
static const int right[] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};

/* The snapshot's resources as a table (to stdout); 0, or -1 when out of memory. */
static int print_table(const struct snap *s)
{
    struct ctl_table *t = ctl_table_new(sizeof headers / sizeof headers[0], headers, right);
    if (t == NULL)
        return -1;
    int rc = 0;
    for (uint32_t i = 0; i < s->n && rc == 0; i++) {
        const struct rlock_resource_stats *r = &s->e[i].st;
        char waited[24], contended[24], timeouts[24], p99[24], max[24], queue[32], hold[24],
            lost[24], holder[160];
        fmt_us(r->wait_total_us, waited, sizeof waited);
        snprintf(contended, sizeof contended, "%" PRIu64, r->contended);
        snprintf(timeouts, sizeof timeouts, "%" PRIu64, r->timeouts);
        fmt_us(r->wait_p99_us, p99, sizeof p99);
        fmt_us(r->wait_max_us, max, sizeof max);
        snprintf(queue, sizeof queue, "%" PRIu32 "/%" PRIu32, r->waiters, r->waiters_max);
        fmt_us(r->hold_p99_us, hold, sizeof hold);
        snprintf(lost, sizeof lost, "%" PRIu64, r->losses);
        if (r->held)
            snprintf(holder, sizeof holder, "%.8s %s", r->holder.session_id,
                     r->holder.client_name[0] ? r->holder.client_name : "-");
        else
            snprintf(holder, sizeof holder, "-");
        const char *cells[] = {waited, contended, timeouts, p99, max, queue, hold, lost, holder,
                               r->resource};
        rc = ctl_table_row(t, cells);
    }
    ctl_table_end(t);
    return rc;
}

/* The lines above the table. */
static void print_header(const struct snap *s, const struct top_opts *o, const struct ctl *ctl,
                         double grants_per_s)
{
    char up[24];
    ctl_fmt_duration(s->stats.uptime_ms, up, sizeof up);
    printf("%s at %s, up %s\n", s->stats.server_version, ctl->server, up);
    printf("sessions %" PRIu64 "   locks %" PRIu64 "   waiters %" PRIu64 "   grants %" PRIu64,
           s->stats.sessions, s->stats.held_locks, s->stats.waiters, s->stats.grants);
    if (grants_per_s >= 0)
        printf(" (%.1f/s)", grants_per_s);
    putchar('\n');
    if (s->sum.capacity == 0) {
        printf("contention is not followed (rlockd.conf: metrics.top_resources = 0)\n");
    } else {
        char bound[24];
        fmt_us(s->sum.error_bound, bound, sizeof bound);
        printf("%" PRIu32 " of %" PRIu32 " resources followed, error at most %s   order: %s\n",
               s->sum.followed, s->sum.capacity, bound, orders[o->order].name);
    }
}

/* --- the live view ----------------------------------------------------------------- */

static struct termios saved_tio;
static int term_raw;
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void term_restore(void)
{
    if (!term_raw)
        return;
    term_raw = 0;
    fputs("\033[?7h\033[?25h\033[?1049l", stdout); /* wrap, cursor, main screen */
    fflush(stdout);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
}

static int term_enter(void)
{
    if (tcgetattr(STDIN_FILENO, &saved_tio) != 0)
        return -1;
    struct termios raw = saved_tio;
    raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0)
        return -1;
    term_raw = 1;
    fputs("\033[?1049h\033[?25l\033[?7l", stdout); /* alternate screen, no cursor, no wrap */
    return 0;
}

static uint32_t screen_rows(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0)
        return 24;
    return ws.ws_row;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A key typed: 1 to quit, 0 to go on (the order may have changed). */
static int on_key(char k, struct top_opts *o)
{
    if (k == 'q' || k == 'Q')
        return 1;
    if (k == '<')
        o->order = (o->order + NORDERS - 1) % NORDERS;
    else if (k == '>')
        o->order = (o->order + 1) % NORDERS;
    for (size_t i = 0; i < NORDERS; i++)
        if (orders[i].key == k)
            o->order = i;
    return 0;
}

static int live(struct rlock_client *c, const struct ctl *ctl, struct top_opts *o,
                struct snap *s)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (term_enter() != 0) {
        ctl_err("top: cannot set up the terminal: %s", strerror(errno));
        return EX_SOFTWARE;
    }
    atexit(term_restore);
    uint64_t last_grants = 0;
    double last_t = 0;
    int rc = EX_OK;
    while (!stop_signal) {
        uint32_t rows = screen_rows();
        uint32_t limit = o->limit;
        if (limit == 0)
            limit = rows > TOP_HEADER_LINES + 1 ? rows - TOP_HEADER_LINES - 1 : 1;
        enum rlock_err e = snap_take(c, ctl, o, limit, s);
        if (e != RLOCK_OK) {
            term_restore();
            ctl_err("top: %s", rlock_last_error()->message);
            return ctl_exit_code(e);
        }
        double t = now_s();
        double rate = last_t > 0 && t > last_t
                          ? (double)(s->stats.grants - last_grants) / (t - last_t)
                          : -1;
        last_grants = s->stats.grants;
        last_t = t;
        fputs("\033[H\033[2J", stdout);
        print_header(s, o, ctl, rate);
        printf("keys: w c t h n l order, < > step, q quits\n\n");
        if (print_table(s) != 0) {
            rc = EX_SOFTWARE;
            break;
        }
        fflush(stdout);
        /* Wait for the interval or a key, whichever comes first. */
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int n = poll(&p, 1, (int)o->interval_ms);
        if (n > 0) {
            char k;
            ssize_t got = read(STDIN_FILENO, &k, 1);
            if (got == 0)
                break; /* the terminal is gone */
            if (got == 1 && on_key(k, o))
                break;
        }
    }
    term_restore();
    return rc;
}

int ctl_top(struct ctl *ctl, int argc, char **argv)
{
    struct top_opts o;
    int rc = parse(ctl, argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO))
        o.once = 1;
    struct snap s = {.e = calloc(SNAP_MAX, sizeof(struct snap_entry))};
    if (s.e == NULL) {
        ctl_err("top: out of memory");
        return EX_SOFTWARE;
    }
    struct rlock_options opts = {.client_name = "rlockctl top"};
    struct rlock_client *c;
    rc = ctl_connect(ctl, &opts, &c);
    if (rc != 0) {
        free(s.e);
        return rc;
    }
    if (o.once) {
        enum rlock_err e = snap_take(c, ctl, &o, o.limit != 0 ? o.limit : TOP_LIMIT_ONCE, &s);
        if (e != RLOCK_OK) {
            ctl_err("top: %s", rlock_last_error()->message);
            rc = ctl_exit_code(e);
        } else if (o.json) {
            print_json(&s, &o);
        } else {
            print_header(&s, &o, ctl, -1);
            putchar('\n');
            rc = print_table(&s) == 0 ? EX_OK : EX_SOFTWARE;
        }
    } else {
        rc = live(c, ctl, &o, &s);
    }
    rlock_close(c);
    free(s.e);
    return rc;
}
