/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl_admin.c — the operators' subcommands: info, sessions, locks,
 * release --force, kill-session.
 *
 * Listings page through the daemon (a request per page, the cursor of one
 * reply in the next request) and print as they go: a table for people, or
 * with --json one JSON document whose list has one entry per line. The JSON
 * schemas are in docs/rlockctl.md and do not change without notice there.
 */
#include "rlockctl.h"
#include "rlockctl_out.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Entries asked for per request when --page-size is not given. */
#define ADMIN_PAGE_DEFAULT 500u

/* Options every admin subcommand takes. */
struct admin_opts {
    int json;
    uint32_t page;      /* --page-size */
    const char *prefix; /* locks --prefix */
    const char *session; /* locks --session */
    int force;           /* release --force */
};

/* What each subcommand is called and accepts, for the shared option parser. */
struct admin_cmd {
    const char *name;
    const char *usage; /* its --help text, before CTL_GLOBAL_HELP */
    int list;          /* takes --page-size */
    int locks;         /* takes --prefix and --session */
    int release;       /* takes --force */
    int args;          /* positional arguments it needs */
};

enum { OPT_PAGE = 0x100, OPT_PREFIX, OPT_SESSION, OPT_FORCE };

/*
 * Parse the subcommand's options into o. Returns -1 to go on (the positional
 * arguments start at optind), or the exit code (after printing help or why).
 */
static int admin_parse(struct ctl *ctl, const struct admin_cmd *cmd, int argc, char **argv,
                       struct admin_opts *o)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"page-size", required_argument, NULL, OPT_PAGE},
        {"prefix", required_argument, NULL, OPT_PREFIX},
        {"session", required_argument, NULL, OPT_SESSION},
        {"force", no_argument, NULL, OPT_FORCE},
        CTL_GLOBAL_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->page = ADMIN_PAGE_DEFAULT;
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "+:jh" CTL_GLOBAL_SHORTOPTS, longopts, NULL)) != -1) {
        int known = 1;
        switch (ch) {
        case 'j':
            o->json = 1;
            break;
        case 'h':
            printf("%s" CTL_GLOBAL_HELP, cmd->usage);
            return EX_OK;
        case OPT_PAGE: {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            known = cmd->list;
            if (known && (errno != 0 || *end != '\0' || v < 1 || v > RLOCK_LIST_LIMIT_MAX)) {
                ctl_err("%s: --page-size: '%s' is not a number from 1 to %u", cmd->name, optarg,
                        RLOCK_LIST_LIMIT_MAX);
                return EX_USAGE;
            }
            o->page = (uint32_t)v;
            break;
        }
        case OPT_PREFIX:
            known = cmd->locks;
            o->prefix = optarg;
            break;
        case OPT_SESSION:
            known = cmd->locks;
            o->session = optarg;
            break;
        case OPT_FORCE:
            known = cmd->release;
            o->force = 1;
            break;
        default:
            if ((rc = ctl_other_option(ctl, cmd->name, ch, argv)) != 0)
                return rc;
            break;
        }
        if (!known) {
            ctl_err("%s: unknown option '%s'", cmd->name, argv[optind - 1]);
            fprintf(stderr, "Try 'rlockctl %s --help'.\n", cmd->name);
            return EX_USAGE;
        }
    }
    if (argc - optind != cmd->args) {
        if (argc - optind > cmd->args)
            ctl_err("%s: unexpected argument '%s'", cmd->name, argv[optind + cmd->args]);
        else
            ctl_err("%s: missing argument (see rlockctl %s --help)", cmd->name, cmd->name);
        return EX_USAGE;
    }
    return -1;
}

/* Connect as "rlockctl NAME"; 0 or the exit code. */
static int admin_connect(const struct ctl *ctl, const char *name, struct rlock_client **c)
{
    char client_name[64];
    snprintf(client_name, sizeof client_name, "rlockctl %s", name);
    struct rlock_options opts = {.client_name = client_name};
    return ctl_connect(ctl, &opts, c);
}

/* Report a failed call of subcommand name and return its exit code. */
static int admin_failed(const char *name, enum rlock_err e)
{
    ctl_err("%s: %s", name, rlock_last_error()->message);
    return ctl_exit_code(e);
}

static const char *role_name(enum rlock_role r)
{
    switch (r) {
    case RLOCK_ROLE_OPEN: return "open";
    case RLOCK_ROLE_CLIENT: return "client";
    case RLOCK_ROLE_ADMIN: return "admin";
    case RLOCK_ROLE_NONE: break;
    }
    return "none";
}

/* --- info ----------------------------------------------------------------------- */

/* Every field of struct rlock_server_info once, in the order printed. */
#define INFO_FIELDS(X)                                                                        \
    X(STR, server_version)                                                                    \
    X(NUM, protocol_version)                                                                  \
    X(NUM, pid)                                                                               \
    X(NUM, started_at_ms)                                                                     \
    X(NUM, uptime_ms)                                                                         \
    X(STR, config_file)                                                                       \
    X(STR, listen)                                                                            \
    X(STR, redis_address)                                                                     \
    X(NUM, redis_database)                                                                    \
    X(STR, key_prefix)                                                                        \
    X(BOOL, redis_up)                                                                         \
    X(NUM, redis_connections)                                                                 \
    X(NUM, redis_connections_ready)                                                           \
    X(NUM, sessions)                                                                          \
    X(NUM, held_locks)                                                                        \
    X(NUM, waiters)                                                                           \
    X(NUM, max_sessions)                                                                      \
    X(NUM, max_locks)                                                                         \
    X(NUM, max_locks_per_session)                                                             \
    X(NUM, max_waiters)                                                                       \
    X(NUM, max_frame_bytes)                                                                   \
    X(NUM, max_resource_bytes)                                                                \
    X(NUM, default_ttl_ms)                                                                    \
    X(NUM, min_ttl_ms)                                                                        \
    X(NUM, max_ttl_ms)                                                                        \
    X(NUM, max_wait_ms)                                                                       \
    X(NUM, session_timeout_ms)                                                                \
    X(NUM, min_session_timeout_ms)                                                            \
    X(NUM, max_session_timeout_ms)                                                            \
    X(BOOL, auth)                                                                             \
    X(NUM, admin_tokens)                                                                      \
    X(NUM, client_tokens)                                                                     \
    X(NUM, auth_failures)                                                                     \
    X(NUM, permission_denied)                                                                 \
    X(STR, redis_topology)                                                                    \
    X(STR, redis_master)                                                                      \
    X(NUM, redis_failovers)                                                                   \
    X(BOOL, redis_pubsub_connected)                                                           \
    X(NUM, redis_nodes)                                                                       \
    X(BOOL, resume)                                                                           \
    X(STR, shutdown)                                                                          \
    X(NUM, sessions_resumed)                                                                  \
    X(NUM, resumes_refused)                                                                   \
    X(NUM, locks_adopted)                                                                     \
    X(NUM, adopts_refused)                                                                    \
    X(NUM, sessions_handed_over)

#define INFO_ROW_NUM(f) {#f, CTL_FIELD_NUM, (uint64_t)in->f, NULL},
#define INFO_ROW_BOOL(f) {#f, CTL_FIELD_BOOL, (uint64_t)(in->f != 0), NULL},
#define INFO_ROW_STR(f) {#f, CTL_FIELD_STR, 0, in->f},
#define INFO_ROW(kind, f) INFO_ROW_##kind(f)

static const struct admin_cmd info_cmd = {
    .name = "info",
    .usage = "Usage: rlockctl [OPTIONS] info [--json]\n"
             "\n"
             "Describe the daemon: version, uptime, configuration file, listen addresses,\n"
             "Redis endpoint and state, limits, authentication. Needs an admin token when\n"
             "the daemon has tokens.\n"
             "\n"
             "  -j, --json          JSON output (one object)\n"
             "  -h, --help          show this help\n",
};

int ctl_info(struct ctl *ctl, int argc, char **argv)
{
    struct admin_opts o;
    int rc = admin_parse(ctl, &info_cmd, argc, argv, &o);
    if (rc >= 0)
        return rc;
    struct rlock_client *c;
    if ((rc = admin_connect(ctl, "info", &c)) != 0)
        return rc;
    struct rlock_server_info *in = malloc(sizeof *in);
    enum rlock_err e = in != NULL ? rlock_server_info(c, ctl->timeout_ms, in) : RLOCK_ERR_NOMEM;
    if (e == RLOCK_OK) {
        const struct ctl_field rows[] = {INFO_FIELDS(INFO_ROW)};
        ctl_print_fields(rows, sizeof rows / sizeof rows[0], o.json);
        rc = EX_OK;
    } else {
        rc = admin_failed("info", e);
    }
    free(in);
    rlock_close(c);
    return rc;
}

/* --- listings ------------------------------------------------------------------- */

/* Where a listing's entries go, page after page. */
struct list_out {
    const struct admin_opts *o;
    const char *name; /* the JSON member of the list */
    int begun;        /* with --json, the list's opening is printed */
    uint64_t count;
    struct ctl_table *table; /* NULL with --json */
    int nomem;
};

/* One listing: its table, and how to ask for a page (visiting each entry into out). */
struct listing {
    const char *name; /* the command, and the JSON member of the list */
    size_t ncols;
    const char *const *headers;
    const int *right;
    enum rlock_err (*page)(struct rlock_client *c, const char *cursor, struct list_out *out,
                           char *next, uint32_t timeout_ms);
};

/* With --json, the list's opening, printed with its first entry (or at its end): a listing
 * refused at its first page prints nothing but the error. */
static void list_begin(struct list_out *out)
{
    if (!out->begun)
        printf("{\n  \"%s\": [\n", out->name);
    out->begun = 1;
}

/* Start an entry: with --json, a JSON object on a line of its own (opened in j). */
static void entry_open(struct list_out *out, struct ctl_json *j)
{
    list_begin(out);
    printf("%s    ", out->count > 0 ? ",\n" : "");
    ctl_json_open(j);
}

/* A table row of cells; stops the listing when out of memory. */
static int entry_row(struct list_out *out, const char *const *cells)
{
    if (ctl_table_row(out->table, cells) != 0)
        out->nomem = 1;
    out->count++;
    return out->nomem;
}

/* Page through the listing and print it; returns the exit code. */
static int list_run(const struct ctl *ctl, const struct listing *ls, const struct admin_opts *o)
{
    struct list_out out = {.o = o, .name = ls->name};
    struct rlock_client *c;
    int rc = admin_connect(ctl, ls->name, &c);
    if (rc != 0)
        return rc;
    if (!o->json && (out.table = ctl_table_new(ls->ncols, ls->headers, ls->right)) == NULL) {
        rlock_close(c);
        ctl_err("%s: out of memory", ls->name);
        return EX_SOFTWARE;
    }
    char cursor[RLOCK_CURSOR_BYTES] = "";
    enum rlock_err e;
    do {
        char next[RLOCK_CURSOR_BYTES];
        e = ls->page(c, cursor, &out, next, ctl->timeout_ms);
        memcpy(cursor, next, sizeof cursor);
    } while (e == RLOCK_OK && !out.nomem && cursor[0] != '\0');
    if (e != RLOCK_OK && out.count == 0) {
        ctl_table_free(out.table); /* refused: no empty table or list before the error */
    } else if (o->json) {
        list_begin(&out);
        printf("%s  ],\n  \"count\": %" PRIu64 "\n}\n", out.count > 0 ? "\n" : "", out.count);
    } else {
        ctl_table_end(out.table);
    }
    if (e != RLOCK_OK) {
        rc = admin_failed(ls->name, e);
    } else if (out.nomem) {
        ctl_err("%s: out of memory", ls->name);
        rc = EX_SOFTWARE;
    }
    rlock_close(c);
    return rc;
}

/* --- sessions -------------------------------------------------------------------- */

static const struct admin_cmd sessions_cmd = {
    .name = "sessions",
    .usage = "Usage: rlockctl [OPTIONS] sessions [--json] [--page-size N]\n"
             "\n"
             "List the daemon's sessions, in the order they connected (this command's own\n"
             "session included). Needs an admin token when the daemon has tokens.\n"
             "\n"
             "  -j, --json          JSON output (docs/rlockctl.md)\n"
             "      --page-size N   sessions asked for per request, 1 to 1000 (default 500)\n"
             "  -h, --help          show this help\n",
    .list = 1,
};

static int session_visit(const struct rlock_session_entry *e, void *arg)
{
    struct list_out *out = arg;
    const char *state = e->state == RLOCK_SESSION_ACTIVE ? "active" : "accepted";
    if (out->o->json) {
        struct ctl_json j;
        entry_open(out, &j);
        ctl_json_str(&j, "id", e->id);
        ctl_json_str(&j, "client_name", e->client_name);
        ctl_json_str(&j, "peer", e->peer);
        ctl_json_str(&j, "state", state);
        ctl_json_str(&j, "role", role_name(e->role));
        ctl_json_num(&j, "connected_at_ms", e->connected_at_ms);
        ctl_json_num(&j, "idle_ms", e->idle_ms);
        ctl_json_num(&j, "locks_held", e->locks_held);
        ctl_json_num(&j, "waiting", e->waiting);
        ctl_json_num(&j, "in_flight", e->in_flight);
        ctl_json_num(&j, "requested_timeout_ms", e->requested_timeout_ms);
        ctl_json_num(&j, "timeout_ms", e->timeout_ms);
        ctl_json_bool(&j, "resumed", e->resumed);
        ctl_json_close(&j);
        out->count++;
        return 0;
    }
    char since[40], idle[24], locks[16], waiting[16], timeout[24], asked[24] = "default";
    ctl_fmt_time(e->connected_at_ms, since, sizeof since);
    ctl_fmt_duration(e->idle_ms, idle, sizeof idle);
    snprintf(locks, sizeof locks, "%" PRIu32, e->locks_held);
    snprintf(waiting, sizeof waiting, "%" PRIu32, e->waiting);
    ctl_fmt_duration(e->timeout_ms, timeout, sizeof timeout);
    if (e->requested_timeout_ms != 0)
        ctl_fmt_duration(e->requested_timeout_ms, asked, sizeof asked);
    const char *cells[] = {
        e->id,   state,  role_name(e->role), locks,   waiting,
        idle,    timeout, asked,             since,   e->peer,
        e->client_name[0] ? e->client_name : "-",
    };
    return entry_row(out, cells);
}

static enum rlock_err sessions_page(struct rlock_client *c, const char *cursor,
                                    struct list_out *out, char *next, uint32_t timeout_ms)
{
    return rlock_list_sessions(c, cursor, out->o->page, session_visit, out, next,
                               RLOCK_CURSOR_BYTES, timeout_ms);
}

static const char *const session_headers[] = {"SESSION", "STATE",   "ROLE",  "LOCKS",
                                              "WAITING", "IDLE",    "TIMEOUT", "ASKED",
                                              "CONNECTED", "PEER", "NAME"};
static const int session_right[COUNT(session_headers)] = {0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0};

int ctl_sessions(struct ctl *ctl, int argc, char **argv)
{
    static const struct listing ls = {"sessions", COUNT(session_headers), session_headers,
                                      session_right, sessions_page};
    struct admin_opts o;
    int rc = admin_parse(ctl, &sessions_cmd, argc, argv, &o);
    return rc >= 0 ? rc : list_run(ctl, &ls, &o);
}

/* --- locks -------------------------------------------------------------------------- */

static const struct admin_cmd locks_cmd = {
    .name = "locks",
    .usage = "Usage: rlockctl [OPTIONS] locks [--prefix P] [--session ID] [--json]\n"
             "                                [--page-size N]\n"
             "\n"
             "List the locks held through the daemon (not those other daemons or\n"
             "applications hold in the same Redis), in no particular order. Needs an admin\n"
             "token when the daemon has tokens.\n"
             "\n"
             "      --prefix P      only resources whose name starts with P\n"
             "      --session ID    only locks of the session ID\n"
             "  -j, --json          JSON output (docs/rlockctl.md)\n"
             "      --page-size N   locks asked for per request, 1 to 1000 (default 500)\n"
             "  -h, --help          show this help\n",
    .list = 1,
    .locks = 1,
};

static int lock_visit(const struct rlock_lock_entry *e, void *arg)
{
    struct list_out *out = arg;
    char fence[24];
    snprintf(fence, sizeof fence, "%" PRIu64, e->fence);
    if (out->o->json) {
        char owner[24];
        snprintf(owner, sizeof owner, "%" PRIu64, e->owner);
        struct ctl_json j;
        entry_open(out, &j);
        ctl_json_str(&j, "resource", e->resource);
        ctl_json_num(&j, "fence", e->fence);
        ctl_json_str(&j, "session_id", e->session_id);
        ctl_json_str(&j, "client_name", e->client_name);
        ctl_json_str(&j, "owner", owner); /* may pass 2^53: a string keeps every digit */
        ctl_json_str(&j, "token", e->token);
        ctl_json_num(&j, "acquired_at_ms", e->acquired_at_ms);
        ctl_json_num(&j, "ttl_ms", e->ttl_ms);
        ctl_json_num(&j, "ttl_left_ms", e->ttl_left_ms);
        ctl_json_bool(&j, "watchdog", e->watchdog);
        ctl_json_num(&j, "hold_count", e->hold_count);
        ctl_json_num(&j, "waiters", e->waiters);
        ctl_json_str(&j, "kind", e->limit > 0 ? "semaphore"
                                 : e->leader  ? "leader"
                                 : e->shared  ? "shared"
                                              : "exclusive");
        ctl_json_num(&j, "limit", e->limit);
        ctl_json_num(&j, "permits", e->permits);
        ctl_json_close(&j);
        out->count++;
        return 0;
    }
    char since[40], ttl[24], left[24], holds[16], waiters[16], kind[32];
    if (e->limit > 0)
        snprintf(kind, sizeof kind, "sem %" PRIu32 "/%" PRIu32, e->permits, e->limit);
    else
        snprintf(kind, sizeof kind, "%s", e->leader ? "leader" : e->shared ? "shared" : "excl");
    ctl_fmt_time(e->acquired_at_ms, since, sizeof since);
    ctl_fmt_duration(e->ttl_ms, ttl, sizeof ttl);
    ctl_fmt_duration(e->ttl_left_ms, left, sizeof left);
    snprintf(holds, sizeof holds, "%" PRIu32, e->hold_count);
    snprintf(waiters, sizeof waiters, "%" PRIu32, e->waiters);
    const char *cells[] = {
        e->session_id, fence, kind, e->watchdog ? ttl : "off", left, holds, waiters, since,
        e->client_name[0] ? e->client_name : "-", e->resource,
    };
    return entry_row(out, cells);
}

static enum rlock_err locks_page(struct rlock_client *c, const char *cursor,
                                 struct list_out *out, char *next, uint32_t timeout_ms)
{
    struct rlock_lock_filter filter = {.prefix = out->o->prefix, .session_id = out->o->session};
    return rlock_list_locks(c, &filter, cursor, out->o->page, lock_visit, out, next,
                            RLOCK_CURSOR_BYTES, timeout_ms);
}

/* The resource last: names vary most in length, and may be long. */
static const char *const lock_headers[] = {"SESSION", "FENCE", "KIND",     "RENEW", "LEFT",
                                           "HOLDS",   "WAITERS", "ACQUIRED", "NAME", "RESOURCE"};
static const int lock_right[COUNT(lock_headers)] = {0, 1, 0, 1, 1, 1, 1, 0, 0, 0};

int ctl_locks(struct ctl *ctl, int argc, char **argv)
{
    static const struct listing ls = {"locks", COUNT(lock_headers), lock_headers, lock_right,
                                      locks_page};
    struct admin_opts o;
    int rc = admin_parse(ctl, &locks_cmd, argc, argv, &o);
    return rc >= 0 ? rc : list_run(ctl, &ls, &o);
}

/* --- release --force ------------------------------------------------------------------ */

static const struct admin_cmd release_cmd = {
    .name = "release",
    .usage = "Usage: rlockctl [OPTIONS] release --force [--json] RESOURCE\n"
             "\n"
             "Take RESOURCE away from the session of the daemon that holds it: that session\n"
             "is told its lock is lost (FORCED), the lock's key is deleted, and the first\n"
             "client waiting for it on this daemon gets it. Only locks held through this\n"
             "daemon can be taken. Needs an admin token when the daemon has tokens.\n"
             "\n"
             "      --force         required: the holder loses its lock\n"
             "  -j, --json          JSON output (one object)\n"
             "  -h, --help          show this help\n",
    .release = 1,
    .args = 1,
};

int ctl_release(struct ctl *ctl, int argc, char **argv)
{
    struct admin_opts o;
    int rc = admin_parse(ctl, &release_cmd, argc, argv, &o);
    if (rc >= 0)
        return rc;
    const char *resource = argv[optind];
    if (!o.force) {
        ctl_err("release: only --force is supported (a lock is released by its holder; "
                "--force takes it away from the holder)");
        return EX_USAGE;
    }
    struct rlock_client *c;
    if ((rc = admin_connect(ctl, "release", &c)) != 0)
        return rc;
    struct rlock_forced f;
    enum rlock_err e = rlock_force_release(c, resource, ctl->timeout_ms, &f);
    if (e == RLOCK_OK && o.json) {
        char owner[24];
        snprintf(owner, sizeof owner, "%" PRIu64, f.owner);
        struct ctl_json j;
        ctl_json_open(&j);
        ctl_json_str(&j, "resource", resource);
        ctl_json_num(&j, "fence", f.fence);
        ctl_json_str(&j, "session_id", f.session_id);
        ctl_json_str(&j, "client_name", f.client_name);
        ctl_json_str(&j, "owner", owner);
        ctl_json_num(&j, "waiters", f.waiters);
        ctl_json_close(&j);
        putchar('\n');
    } else if (e == RLOCK_OK) {
        printf("released %s (fence %" PRIu64 ") from session %s (%s); %" PRIu32
               " waiter%s on this daemon\n",
               resource, f.fence, f.session_id, f.client_name[0] ? f.client_name : "-",
               f.waiters, f.waiters == 1 ? "" : "s");
    }
    if (e == RLOCK_ERR_NOT_HELD) {
        ctl_err("release: %s", rlock_last_error()->message);
        rc = EX_NOINPUT;
    } else {
        rc = e == RLOCK_OK ? EX_OK : admin_failed("release", e);
    }
    rlock_close(c);
    return rc;
}

/* --- kill-session --------------------------------------------------------------------- */

static const struct admin_cmd kill_cmd = {
    .name = "kill-session",
    .usage = "Usage: rlockctl [OPTIONS] kill-session [--json] SESSION\n"
             "\n"
             "End the daemon's session SESSION (an id from 'rlockctl sessions'): its client\n"
             "is told (SessionClosing), its locks are released at once and its connection\n"
             "is closed. Needs an admin token when the daemon has tokens.\n"
             "\n"
             "  -j, --json          JSON output (one object)\n"
             "  -h, --help          show this help\n",
    .args = 1,
};

int ctl_kill_session(struct ctl *ctl, int argc, char **argv)
{
    struct admin_opts o;
    int rc = admin_parse(ctl, &kill_cmd, argc, argv, &o);
    if (rc >= 0)
        return rc;
    const char *id = argv[optind];
    struct rlock_client *c;
    if ((rc = admin_connect(ctl, "kill-session", &c)) != 0)
        return rc;
    uint32_t locks = 0;
    enum rlock_err e = rlock_kill_session(c, id, ctl->timeout_ms, &locks);
    if (e == RLOCK_OK && o.json) {
        struct ctl_json j;
        ctl_json_open(&j);
        ctl_json_str(&j, "session_id", id);
        ctl_json_num(&j, "locks_released", locks);
        ctl_json_close(&j);
        putchar('\n');
    } else if (e == RLOCK_OK) {
        printf("ended session %s; %" PRIu32 " lock%s released\n", id, locks,
               locks == 1 ? "" : "s");
    }
    rc = e == RLOCK_OK ? EX_OK : admin_failed("kill-session", e);
    rlock_close(c);
    return rc;
}
