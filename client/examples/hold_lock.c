/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hold_lock.c — a small librlock example: connect, acquire a lock (waiting
 * for it if asked), print its token and fence, hold it for a while, release.
 *
 *     rlock-example --server 127.0.0.1:7483 --wait 10 --hold 5 orders/42
 *
 * While it holds the lock, the library's I/O thread keeps the session
 * alive; if the lock is lost, the callback reports it and the program stops
 * holding at once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getopt_long, nanosleep */
#endif
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlock.h"

static void usage(FILE *f)
{
    fprintf(f, "Usage: rlock-example [OPTIONS] RESOURCE\n"
               "\n"
               "Acquire RESOURCE from rlockd, print its token and fence, hold it, release it.\n"
               "\n"
               "  -s, --server ADDR   HOST:PORT or unix:/path (default $RLOCK_SERVER, else %s)\n"
               "  -w, --wait SECS     wait up to SECS for the lock (default 0: try once)\n"
               "  -l, --ttl SECS      lease (default: the daemon's)\n"
               "  -H, --hold SECS     how long to hold it (default 5)\n"
               "  -h, --help          show this help\n",
               RLOCK_DEFAULT_ADDRESS);
}

/* Called on the library's thread: just say so; main() checks the handle's state. */
static void on_lost(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c, (void)token, (void)arg;
    fprintf(stderr, "lock %s (fence %" PRIu64 ") lost: %s\n", resource, fence,
            rlock_lost_reason_str(reason));
}

static int seconds(const char *s, uint32_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || v < 0 || v > 4294967.0) {
        fprintf(stderr, "rlock-example: '%s' is not a number of seconds\n", s);
        return -1;
    }
    *out = (uint32_t)(v * 1000.0);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"server", required_argument, NULL, 's'}, {"wait", required_argument, NULL, 'w'},
        {"ttl", required_argument, NULL, 'l'},    {"hold", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *server = getenv("RLOCK_SERVER");
    if (server == NULL || server[0] == '\0')
        server = RLOCK_DEFAULT_ADDRESS;
    struct rlock_acquire_opts ao = {0};
    uint32_t hold_ms = 5000;
    int ch;
    while ((ch = getopt_long(argc, argv, "s:w:l:H:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            server = optarg;
            break;
        case 'w':
            if (seconds(optarg, &ao.wait_ms) < 0)
                return 64;
            break;
        case 'l':
            if (seconds(optarg, &ao.ttl_ms) < 0)
                return 64;
            break;
        case 'H':
            if (seconds(optarg, &hold_ms) < 0)
                return 64;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 64;
        }
    }
    if (optind + 1 != argc) {
        usage(stderr);
        return 64;
    }
    const char *resource = argv[optind];

    char err[256];
    struct rlock_client *c;
    struct rlock_options opts = {.client_name = "rlock-example", .on_lost = on_lost};
    if (rlock_connect(server, &opts, &c, err, sizeof err) != RLOCK_OK) {
        fprintf(stderr, "rlock-example: %s\n", err);
        return 69;
    }
    printf("session %s (timeout %u ms)\n", rlock_session_id(c), rlock_session_timeout_ms(c));

    struct rlock_lock *l;
    enum rlock_err e = rlock_acquire(c, resource, &ao, 0, &l);
    if (e != RLOCK_OK) {
        rlock_errmsg(c, err, sizeof err);
        fprintf(stderr, "rlock-example: acquire %s: %s (%s)\n", resource, rlock_strerror(e), err);
        rlock_close(c);
        return e == RLOCK_ERR_NOT_ACQUIRED || e == RLOCK_ERR_TIMEOUT ? 75 : 69;
    }
    printf("acquired %s: token %s fence %" PRIu64 " ttl %u ms\n", resource, rlock_lock_token(l),
           rlock_lock_fence(l), rlock_lock_ttl_ms(l));
    fflush(stdout);

    /* Hold it, checking every 100 ms that it is still ours. */
    for (uint32_t waited = 0; waited < hold_ms && rlock_lock_state(l) == RLOCK_HELD;
         waited += 100) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }

    int rc = 0;
    if (rlock_lock_state(l) != RLOCK_HELD) {
        fprintf(stderr, "rlock-example: lost the lock (%s)\n",
                rlock_lost_reason_str(rlock_lock_lost_reason(l)));
        rc = 79;
    } else if ((e = rlock_release(l, 0)) != RLOCK_OK) {
        rlock_errmsg(c, err, sizeof err);
        fprintf(stderr, "rlock-example: release: %s\n", err);
        rc = 70;
    } else {
        printf("released %s\n", resource);
    }
    rlock_lock_free(l);
    rlock_close(c);
    return rc;
}
