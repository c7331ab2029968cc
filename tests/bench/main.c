/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c — rlock-bench's command line: parse and check the options, raise
 * the descriptor limit, run what was asked, print the report.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "report.h"
#include "target.h"

static const char USAGE[] =
    "usage: rlock-bench [options]\n"
    "\n"
    "Acquire+release pairs against rlockd (through librlock) or against Redis directly\n"
    "with the classic commands (SET key token NX PX ttl, then EVALSHA of the\n"
    "compare-and-delete), with latency percentiles, handoff times and the CPU time of\n"
    "this process, of rlockd and of Redis per pair.\n"
    "\n"
    "What to drive:\n"
    "  --target rlockd|redis-direct   (default rlockd)\n"
    "  --mode sync|shared|async       rlockd: a blocking client per thread, one blocking\n"
    "                                 client shared by all threads, or asynchronous\n"
    "                                 clients on libevent loops (default sync)\n"
    "  --server ADDR                  rlockd (default 127.0.0.1:7483), or Redis for\n"
    "                                 redis-direct (default 127.0.0.1:6379);\n"
    "                                 HOST:PORT or unix:/path; tls://... with the CA\n"
    "                                 in $RLOCK_TLS_CA (and $RLOCK_TLS_SERVER_NAME)\n"
    "  --redis ADDR                   the Redis behind rlockd: its CPU is measured, and\n"
    "                                 --mass-release watches its keys\n"
    "  --key-prefix P                 lock keys are P{resource} (default rlock:)\n"
    "\n"
    "Pairs (the default run):\n"
    "  --threads N                    worker threads; async: event loops (default 1)\n"
    "  --conns C                      async: asynchronous clients (default 1)\n"
    "  --inflight M                   async: pairs in flight per client (default 1)\n"
    "  --resources R                  resources bench/0 .. bench/R-1, one picked at random\n"
    "                                 for each pair (default 100000; few = contention)\n"
    "  --hold US                      time inside the lock, microseconds (default 0)\n"
    "  --wait MS                      rlockd: wait up to MS in the daemon's queue;\n"
    "                                 redis-direct: keep retrying up to MS (default 0:\n"
    "                                 try, and retry a busy resource without a limit)\n"
    "  --retry-us US                  pause before retrying a busy resource (default 1000)\n"
    "  --ttl MS                       lease (default 30000)\n"
    "  --warmup S                     seconds run before measuring (default 1)\n"
    "  --duration S                   seconds measured (default 5)\n"
    "\n"
    "Other runs (rlockd only):\n"
    "  --hold-locks N --sessions S    take N locks over S sessions and keep them for\n"
    "                                 --duration: rlockd's CPU and memory per lock\n"
    "  --idle-sessions N              N sessions doing nothing but keepalives for\n"
    "                                 --duration: rlockd's CPU and memory per session\n"
    "  --mass-release N               one session takes N locks and closes: time until\n"
    "                                 Redis holds none of their keys (needs --redis and a\n"
    "                                 Redis nobody else writes to)\n"
    "  --mass-timeout S               give up watching after S seconds (default 30)\n"
    "  --session-timeout MS           asked for in Hello (default: the daemon's)\n"
    "\n"
    "Measuring:\n"
    "  --rlockd-pid PID, --redis-pid PID\n"
    "                                 whose CPU to read (default: the process listening\n"
    "                                 on --server / --redis)\n"
    "  --json                         one flat JSON object instead of text\n"
    "  --classic-sha                     load the classic compare-and-delete into the Redis at\n"
    "                                 --server, print its SHA1 and exit\n"
    "  --help\n"
    "\n"
    "Exit status: 0 when the run completed (its errors are in the report), 1 when it\n"
    "could not be set up, 2 on a usage error.\n";

enum {
    OPT_TARGET = 256, OPT_MODE, OPT_SERVER, OPT_REDIS, OPT_PREFIX, OPT_THREADS, OPT_CONNS,
    OPT_INFLIGHT, OPT_RESOURCES, OPT_HOLD, OPT_WAIT, OPT_RETRY, OPT_TTL, OPT_WARMUP,
    OPT_DURATION, OPT_HOLD_LOCKS, OPT_SESSIONS, OPT_IDLE, OPT_MASS, OPT_MASS_TIMEOUT,
    OPT_SESSION_TIMEOUT, OPT_RLOCKD_PID, OPT_REDIS_PID, OPT_JSON, OPT_CLASSIC_SHA, OPT_HELP,
};

void bench_tls(struct rlock_options *o)
{
    const char *ca = getenv("RLOCK_TLS_CA"), *name = getenv("RLOCK_TLS_SERVER_NAME");
    o->tls_ca_file = ca != NULL && ca[0] ? ca : NULL;
    o->tls_server_name = name != NULL && name[0] ? name : NULL;
}

static const struct option LONGOPTS[] = {
    {"target", required_argument, NULL, OPT_TARGET},
    {"mode", required_argument, NULL, OPT_MODE},
    {"server", required_argument, NULL, OPT_SERVER},
    {"redis", required_argument, NULL, OPT_REDIS},
    {"key-prefix", required_argument, NULL, OPT_PREFIX},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"conns", required_argument, NULL, OPT_CONNS},
    {"inflight", required_argument, NULL, OPT_INFLIGHT},
    {"resources", required_argument, NULL, OPT_RESOURCES},
    {"hold", required_argument, NULL, OPT_HOLD},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"retry-us", required_argument, NULL, OPT_RETRY},
    {"ttl", required_argument, NULL, OPT_TTL},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"hold-locks", required_argument, NULL, OPT_HOLD_LOCKS},
    {"sessions", required_argument, NULL, OPT_SESSIONS},
    {"idle-sessions", required_argument, NULL, OPT_IDLE},
    {"mass-release", required_argument, NULL, OPT_MASS},
    {"mass-timeout", required_argument, NULL, OPT_MASS_TIMEOUT},
    {"session-timeout", required_argument, NULL, OPT_SESSION_TIMEOUT},
    {"rlockd-pid", required_argument, NULL, OPT_RLOCKD_PID},
    {"redis-pid", required_argument, NULL, OPT_REDIS_PID},
    {"json", no_argument, NULL, OPT_JSON},
    {"classic-sha", no_argument, NULL, OPT_CLASSIC_SHA},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int usage_error(const char *fmt, const char *arg)
{
    fputs("rlock-bench: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(see rlock-bench --help)\n", stderr);
    return 2;
}

/* A whole decimal number in [min, max]; 0 or -1. */
static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    uint64_t v;
    if (parse_u64(s, min, max, &v) != 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_seconds(const char *s, double min, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= min) || v > 86400.0)
        return -1;
    *out = v;
    return 0;
}

/* Apply one option; 0, or 2 after a message. */
static int apply(struct bench_opts *o, int opt, const char *arg, int *classic_sha)
{
    uint64_t u;
    int bad = 0;
    switch (opt) {
    case OPT_TARGET:
        if (strcmp(arg, "rlockd") == 0)
            o->target = BENCH_RLOCKD;
        else if (strcmp(arg, "redis-direct") == 0)
            o->target = BENCH_DIRECT;
        else
            bad = 1;
        break;
    case OPT_MODE:
        if (strcmp(arg, "sync") == 0)
            o->mode = BENCH_SYNC;
        else if (strcmp(arg, "shared") == 0)
            o->mode = BENCH_SHARED;
        else if (strcmp(arg, "async") == 0)
            o->mode = BENCH_ASYNC;
        else
            bad = 1;
        break;
    case OPT_SERVER: o->server = arg; break;
    case OPT_REDIS: o->redis = arg; break;
    case OPT_PREFIX: o->key_prefix = arg; break;
    case OPT_THREADS: bad = parse_u32(arg, 1, 4096, &o->threads); break;
    case OPT_CONNS: bad = parse_u32(arg, 1, 100000, &o->conns); break;
    case OPT_INFLIGHT: bad = parse_u32(arg, 1, 100000, &o->inflight); break;
    case OPT_RESOURCES: bad = parse_u64(arg, 1, 100000000, &o->resources); break;
    case OPT_HOLD: bad = parse_u32(arg, 0, 600000000, &o->hold_us); break;
    case OPT_WAIT: bad = parse_u32(arg, 0, 86400000, &o->wait_ms); break;
    case OPT_RETRY: bad = parse_u32(arg, 1, 60000000, &o->retry_us); break;
    case OPT_TTL: bad = parse_u32(arg, 1, 86400000, &o->ttl_ms); break;
    case OPT_WARMUP: bad = parse_seconds(arg, 0.0, &o->warmup_s); break;
    case OPT_DURATION: bad = parse_seconds(arg, 0.1, &o->duration_s); break;
    case OPT_HOLD_LOCKS:
        bad = parse_u64(arg, 1, 100000000, &o->hold_locks);
        o->kind = BENCH_HOLD;
        break;
    case OPT_SESSIONS: bad = parse_u64(arg, 1, 1000000, &o->sessions); break;
    case OPT_IDLE:
        bad = parse_u64(arg, 1, 1000000, &o->idle_sessions);
        o->kind = BENCH_IDLE;
        break;
    case OPT_MASS:
        bad = parse_u64(arg, 1, 100000000, &o->mass_locks);
        o->kind = BENCH_MASS;
        break;
    case OPT_MASS_TIMEOUT: bad = parse_seconds(arg, 0.1, &o->mass_timeout_s); break;
    case OPT_SESSION_TIMEOUT: bad = parse_u32(arg, 1, 86400000, &o->session_timeout_ms); break;
    case OPT_RLOCKD_PID:
        bad = parse_u64(arg, 1, 1u << 30, &u);
        o->rlockd_pid = (pid_t)u;
        break;
    case OPT_REDIS_PID:
        bad = parse_u64(arg, 1, 1u << 30, &u);
        o->redis_pid = (pid_t)u;
        break;
    case OPT_JSON: o->json = 1; break;
    case OPT_CLASSIC_SHA: *classic_sha = 1; break;
    default: return 2;
    }
    return bad ? usage_error("bad value: %s", arg) : 0;
}

static void raise_nofile(void)
{
    /* Thousands of sessions need thousands of descriptors: take what the hard limit allows. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static const char *mode_name(const struct bench_opts *o)
{
    static const char *const kinds[] = {"pairs", "hold", "idle", "mass"};
    static const char *const modes[] = {"sync", "shared", "async"};
    if (o->kind != BENCH_PAIRS)
        return kinds[o->kind];
    return o->target == BENCH_DIRECT ? "direct" : modes[o->mode];
}

static void report_params(const struct bench_opts *o, struct report *r)
{
    report_str(r, "target", o->target == BENCH_DIRECT ? "redis-direct" : "rlockd");
    report_str(r, "mode", mode_name(o));
    report_str(r, "server", o->server);
    if (o->kind == BENCH_PAIRS) {
        report_u64(r, "threads", o->threads);
        report_u64(r, "conns", o->mode == BENCH_ASYNC ? o->conns : 0);
        report_u64(r, "inflight", o->mode == BENCH_ASYNC ? o->inflight : 0);
        report_u64(r, "resources", o->resources);
        report_u64(r, "hold_us", o->hold_us);
        report_u64(r, "wait_ms", o->wait_ms);
        report_u64(r, "retry_us", o->retry_us);
        report_real(r, "warmup_s", o->warmup_s, 3);
    }
    report_u64(r, "ttl_ms", o->ttl_ms);
    report_real(r, "duration_s", o->duration_s, 3);
    if (o->kind == BENCH_HOLD)
        report_u64(r, "sessions", o->sessions);
}

/* Cross-option checks; 0 or 2 after a message. */
static int check(struct bench_opts *o)
{
    if (o->target == BENCH_DIRECT && o->kind != BENCH_PAIRS)
        return usage_error("%s", "--hold-locks, --idle-sessions and --mass-release need "
                                 "--target rlockd");
    if (o->target == BENCH_DIRECT && o->mode != BENCH_SYNC)
        return usage_error("%s", "--mode is for --target rlockd (redis-direct is one "
                                 "connection per thread)");
    if (o->kind == BENCH_HOLD && o->sessions > o->hold_locks)
        return usage_error("%s", "--sessions must not exceed --hold-locks");
    if (o->server == NULL)
        o->server = o->target == BENCH_DIRECT ? "127.0.0.1:6379" : "127.0.0.1:7483";
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_opts o = {
        .target = BENCH_RLOCKD, .mode = BENCH_SYNC, .kind = BENCH_PAIRS,
        .key_prefix = "rlock:", .threads = 1, .conns = 1, .inflight = 1,
        .resources = 100000, .retry_us = 1000, .ttl_ms = 30000, .warmup_s = 1.0,
        .duration_s = 5.0, .sessions = 1, .mass_timeout_s = 30.0,
    };
    int classic_sha = 0, opt;
    while ((opt = getopt_long(argc, argv, "", LONGOPTS, NULL)) != -1) {
        if (opt == OPT_HELP) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (opt == '?' || apply(&o, opt, optarg, &classic_sha) != 0)
            return 2;
    }
    if (optind < argc)
        return usage_error("unexpected argument %s", argv[optind]);
    if (classic_sha) {
        char sha[41], err[256];
        if (target_direct_load_script(o.server ? o.server : "127.0.0.1:6379", sha, err,
                                      sizeof err) != 0) {
            fprintf(stderr, "rlock-bench: %s\n", err);
            return 1;
        }
        puts(sha);
        return 0;
    }
    if (check(&o) != 0)
        return 2;
    raise_nofile();

    struct report *r = calloc(1, sizeof *r);
    if (r == NULL)
        return 1;
    report_params(&o, r);
    int rc;
    switch (o.kind) {
    case BENCH_HOLD: rc = hold_run(&o, r); break;
    case BENCH_IDLE: rc = idle_run(&o, r); break;
    case BENCH_MASS: rc = mass_run(&o, r); break;
    default:
        rc = o.target == BENCH_RLOCKD && o.mode == BENCH_ASYNC ? async_pairs_run(&o, r)
                                                                : pairs_run_threads(&o, r);
    }
    if (rc == 0)
        report_print(r, stdout, o.json);
    free(r);
    return rc == 0 ? 0 : 1;
}
