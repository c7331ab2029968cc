/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holder.c — rlock-holder, a lock-holding process for fault tests
 * (kill -9, SIGSTOP/SIGCONT).
 *
 *   rlock-holder ADDR RESOURCE [TTL_MS] [SESSION_TIMEOUT_MS]
 *
 * Connects, acquires RESOURCE (waiting up to 30 s, watchdog on) and prints
 * "HELD <fence> <token>". Then it watches the lock's state every 20 ms; once
 * the lock is lost it prints "LOST <reason>" and exits 3. Exit 2 ("FAIL ...")
 * when the connect or the acquire fails, 64 on bad arguments. Every line is
 * flushed at once: the tests read stdout from a file while it runs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rlock.h"

#define HOLDER_WAIT_MS 30000u
#define HOLDER_POLL_MS 20

static int parse_ms(const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    uint32_t ttl_ms = 0, session_ms = 0;
    if (argc < 3 || argc > 5 || (argc > 3 && parse_ms(argv[3], &ttl_ms) != 0) ||
        (argc > 4 && parse_ms(argv[4], &session_ms) != 0)) {
        fprintf(stderr, "usage: rlock-holder ADDR RESOURCE [TTL_MS] [SESSION_TIMEOUT_MS]\n");
        return 64;
    }

    struct rlock_options o = { .client_name = "rlock-holder", .session_timeout_ms = session_ms };
    struct rlock_client *c;
    char err[256] = "";
    enum rlock_err rc = rlock_connect(argv[1], &o, &c, err, sizeof err);
    if (rc != RLOCK_OK) {
        printf("FAIL %s: %s\n", rlock_strerror(rc), err);
        fflush(stdout);
        return 2;
    }

    struct rlock_acquire_opts ao = { .ttl_ms = ttl_ms, .wait_ms = HOLDER_WAIT_MS };
    struct rlock_lock *l;
    rc = rlock_acquire(c, argv[2], &ao, 0, &l);
    if (rc != RLOCK_OK) {
        rlock_errmsg(c, err, sizeof err);
        printf("FAIL %s: %s\n", rlock_strerror(rc), err);
        fflush(stdout);
        rlock_close(c);
        return 2;
    }
    printf("HELD %" PRIu64 " %s\n", rlock_lock_fence(l), rlock_lock_token(l));
    fflush(stdout);

    struct timespec tick = { 0, HOLDER_POLL_MS * 1000000L };
    /* UNCERTAIN (its bound ran out before news came) is not an end: the LockLost or a
     * confirmation follows. */
    while (rlock_lock_state(l) == RLOCK_HELD || rlock_lock_state(l) == RLOCK_UNCERTAIN)
        nanosleep(&tick, NULL);

    int lost = rlock_lock_state(l) == RLOCK_LOST;
    if (lost)
        printf("LOST %s\n", rlock_lost_reason_str(rlock_lock_lost_reason(l)));
    else
        printf("FAIL lock left state HELD without being lost\n");
    fflush(stdout);
    rlock_close(c);
    return lost ? 3 : 2;
}
