/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * resumer.c — rlock-resumer: what a process that was stopped for longer than
 * its session timeout sees first when it resumes.
 *
 *   rlock-resumer ADDR RESOURCE
 *
 * Connects, acquires RESOURCE and prints "HELD <fence>", then stops itself
 * (raise(SIGSTOP)). The test resumes it (SIGCONT) once the daemon has ended
 * the session. The very first library call after resuming is
 * rlock_lock_state; it prints "FIRST <state>" (HELD, LOST, RELEASED). Then it
 * waits up to 5 s for on_lost and prints "ONLOST <calls> <reason>" and
 * "ALIVE <rlock_client_alive>", and exits 0. Exit 2 ("FAIL ...") when the
 * connect or acquire fails, 64 on bad arguments.
 *
 * The library's background thread would notice the stale session by itself
 * soon after resuming; the point is that the application's own first call
 * must not beat it to a stale HELD. To give that race to the application
 * thread whenever it can be won, every other thread of the process is moved
 * to SCHED_IDLE and the whole process pinned to one CPU before it stops
 * (best effort: failures are ignored).
 */
#include <dirent.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "rlock.h"

#define RESUMER_LOST_WAIT_MS 5000

static atomic_int lost_calls;
static atomic_int lost_reason;

static void on_lost(struct rlock_client *c, const char *resource, const char *token,
                    uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c, (void)resource, (void)token, (void)fence, (void)arg;
    atomic_store(&lost_reason, (int)reason);
    atomic_fetch_add(&lost_calls, 1);
}

static const char *state_name(enum rlock_lock_state st)
{
    switch (st) {
    case RLOCK_HELD:
        return "HELD";
    case RLOCK_LOST:
        return "LOST";
    case RLOCK_RELEASED:
        return "RELEASED";
    case RLOCK_UNCERTAIN:
        return "UNCERTAIN";
    }
    return "UNKNOWN";
}

/* Pin every thread to this CPU and make every other thread SCHED_IDLE. */
static void favour_this_thread(void)
{
    int cpu = sched_getcpu();
    pid_t self = gettid();
    cpu_set_t one;
    CPU_ZERO(&one);
    if (cpu >= 0)
        CPU_SET(cpu, &one);
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        pid_t tid = (pid_t)atoi(de->d_name);
        if (tid <= 0)
            continue;
        if (cpu >= 0)
            (void)sched_setaffinity(tid, sizeof one, &one);
        if (tid != self) {
            struct sched_param sp = {.sched_priority = 0};
            (void)sched_setscheduler(tid, SCHED_IDLE, &sp);
        }
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: rlock-resumer ADDR RESOURCE\n");
        return 64;
    }
    struct rlock_options o = {.client_name = "rlock-resumer", .on_lost = on_lost};
    struct rlock_client *c;
    char err[256] = "";
    enum rlock_err rc = rlock_connect(argv[1], &o, &c, err, sizeof err);
    if (rc != RLOCK_OK) {
        printf("FAIL %s: %s\n", rlock_strerror(rc), err);
        fflush(stdout);
        return 2;
    }
    struct rlock_lock *l;
    rc = rlock_acquire(c, argv[2], NULL, 0, &l);
    if (rc != RLOCK_OK) {
        rlock_errmsg(c, err, sizeof err);
        printf("FAIL %s: %s\n", rlock_strerror(rc), err);
        fflush(stdout);
        rlock_close(c);
        return 2;
    }
    printf("HELD %" PRIu64 "\n", rlock_lock_fence(l));
    fflush(stdout);

    favour_this_thread();
    raise(SIGSTOP);
    enum rlock_lock_state first = rlock_lock_state(l);

    printf("FIRST %s\n", state_name(first));
    fflush(stdout);
    struct timespec tick = {0, 10 * 1000000L};
    for (int waited = 0; atomic_load(&lost_calls) == 0 && waited < RESUMER_LOST_WAIT_MS;
         waited += 10)
        nanosleep(&tick, NULL);
    printf("ONLOST %d %s\n", atomic_load(&lost_calls),
           rlock_lost_reason_str((enum rlock_lost_reason)atomic_load(&lost_reason)));
    printf("ALIVE %d\n", rlock_client_alive(c));
    fflush(stdout);
    rlock_lock_free(l);
    rlock_close(c);
    return 0;
}
