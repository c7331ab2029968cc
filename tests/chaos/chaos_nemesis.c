/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * chaos_nemesis.c — the faults of the chaos test, each aimed by pid.
 *
 * Before it pauses or kills a worker the nemesis marks it in shared memory,
 * so that the referee can tell an overlap with a paused or dying holder (the
 * fault's doing, expected) from an overlap between two live holders (a bug).
 * The mark of a pause names the hold it happened in, read after the worker
 * has stopped, so a mark can never excuse a later hold.
 */
#include "chaos_driver.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const chaos_fault_names[CHAOS_NFAULTS] = {
#define CHAOS_FAULT_NAME(name, text) #name,
    CHAOS_FAULTS(CHAOS_FAULT_NAME)
#undef CHAOS_FAULT_NAME
};

const char *const chaos_fault_texts[CHAOS_NFAULTS] = {
#define CHAOS_FAULT_TEXT(name, text) text,
    CHAOS_FAULTS(CHAOS_FAULT_TEXT)
#undef CHAOS_FAULT_TEXT
};

/* Relative frequency of each kind after the first round. */
static const int fault_weight[CHAOS_NFAULTS] = {
    [CHAOS_F_worker_kill] = 3, [CHAOS_F_worker_pause] = 4, [CHAOS_F_redis_kill] = 1,
    [CHAOS_F_redis_pause] = 1, [CHAOS_F_script_flush] = 1, [CHAOS_F_client_kill] = 2,
    [CHAOS_F_rlockd_kill] = 1, [CHAOS_F_rlockd_pause] = 1, [CHAOS_F_rlockd_term] = 1,
};

int chaos_fault_enabled(enum chaos_fault f, int ndaemons)
{
    return ndaemons > 1 || (f != CHAOS_F_rlockd_pause && f != CHAOS_F_rlockd_term);
}

/* A restart of an rlockd (kill or SIGTERM): spaced like kills (rlockd_kill_allowed). */
static int is_restart(int f)
{
    return f == CHAOS_F_rlockd_kill || f == CHAOS_F_rlockd_term;
}

/*
 * rlockd restarts are spaced so that each incarnation's memory can be
 * measured: at least 60 s apart, and at most about 8 per run (a long run gets
 * long incarnations), none in the last 100 s.
 */
#define NEMESIS_RLOCKD_GAP_MS 60000
#define NEMESIS_RLOCKD_PER_RUN 8
#define NEMESIS_RLOCKD_TAIL_MS 100000
/* An rlockd stopped by the nemesis has this long to exit (a handover waits for its
 * sessions at most handover_timeout, 5 s in the chaos config). */
#define NEMESIS_STOP_GRACE_MS 10000

static int rlockd_kill_allowed(struct driver *d)
{
    int64_t now = chaos_now_ms();
    int64_t gap = (int64_t)d->seconds * 1000 / NEMESIS_RLOCKD_PER_RUN;
    if (gap < NEMESIS_RLOCKD_GAP_MS)
        gap = NEMESIS_RLOCKD_GAP_MS;
    return now - d->last_rlockd_kill_ms >= gap && d->end_ms - now >= NEMESIS_RLOCKD_TAIL_MS;
}

enum chaos_fault nemesis_pick(struct driver *d, int index)
{
    static enum chaos_fault first_round[CHAOS_NFAULTS];
    static int nfirst;
    if (index == 0) {
        /* rlockd_kill leads; the rest of the first round in a seeded order. */
        nfirst = 0;
        first_round[nfirst++] = CHAOS_F_rlockd_kill;
        for (int f = 0; f < CHAOS_NFAULTS; f++)
            if (f != CHAOS_F_rlockd_kill && chaos_fault_enabled((enum chaos_fault)f, d->ndaemons))
                first_round[nfirst++] = (enum chaos_fault)f;
        for (int i = nfirst - 1; i > 1; i--) {
            int j = 1 + (int)chaos_rng_range(&d->rng, 0, (uint32_t)i - 1);
            enum chaos_fault t = first_round[i];
            first_round[i] = first_round[j];
            first_round[j] = t;
        }
    }
    if (index < nfirst)
        return first_round[index];
    int total = 0;
    for (int f = 0; f < CHAOS_NFAULTS; f++)
        if (chaos_fault_enabled((enum chaos_fault)f, d->ndaemons))
            total += fault_weight[f];
    for (;;) {
        int x = (int)chaos_rng_range(&d->rng, 1, (uint32_t)total);
        int f = 0;
        for (;; f++) {
            int w = chaos_fault_enabled((enum chaos_fault)f, d->ndaemons) ? fault_weight[f] : 0;
            if (x <= w)
                break;
            x -= w;
        }
        if (!is_restart(f) || rlockd_kill_allowed(d))
            return (enum chaos_fault)f;
    }
}

/* A slot whose phase is at least min_phase (CHAOS_PH_INSIDE / _CHECKED), or -1. */
static int find_slot(struct driver *d, int min_phase)
{
    int start = (int)chaos_rng_range(&d->rng, 0, (uint32_t)d->nworkers - 1);
    for (int k = 0; k < d->nworkers; k++) {
        int i = (start + k) % d->nworkers;
        struct chaos_slot *s = &d->m->slots[i];
        if (atomic_load(&s->pid) > 0 && !atomic_load(&s->killed) &&
            atomic_load(&s->phase) >= min_phase)
            return i;
    }
    return -1;
}

/* 1 once /proc says pid is stopped ('T'), within timeout_ms. */
static int wait_stopped(pid_t pid, int timeout_ms)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int64_t deadline = chaos_now_ms() + timeout_ms;
    do {
        char *stat = h_read_file(path);
        const char *p = stat ? strrchr(stat, ')') : NULL;
        int stopped = p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
        free(stat);
        if (stopped)
            return 1;
        chaos_sleep_ms(1);
    } while (chaos_now_ms() < deadline);
    return 0;
}

/*
 * Faults of Redis and rlockd bite hardest while a lock depends on renewals:
 * wait (up to 3 s, watching the children) for a worker inside a long hold.
 */
static void aim_at_long_hold(struct driver *d)
{
    int64_t deadline = chaos_now_ms() + 3000;
    while (chaos_now_ms() < deadline) {
        for (int i = 0; i < d->nworkers; i++)
            if (atomic_load(&d->m->slots[i].long_hold) &&
                atomic_load(&d->m->slots[i].phase) >= CHAOS_PH_INSIDE)
                return;
        drv_idle(d, 5);
    }
}

static int fault_worker_kill(struct driver *d)
{
    /* Half the time a holder, so that kills land inside critical sections too. */
    int i = chaos_rng_range(&d->rng, 0, 1) ? find_slot(d, CHAOS_PH_INSIDE) : -1;
    if (i < 0)
        i = find_slot(d, CHAOS_PH_IDLE);
    if (i < 0)
        return 1;
    struct chaos_slot *s = &d->m->slots[i];
    pid_t pid = atomic_load(&s->pid);
    int inside = atomic_load(&s->inside);
    atomic_store(&s->killed, 1);
    kill(pid, SIGKILL);
    int status = 0;
    if (h_wait_exit(pid, 5000, &status) != 0)
        fprintf(stderr, "chaos: worker %d (pid %d) survived SIGKILL for 5 s\n", i, (int)pid);
    drv_clear_slot(d, i);
    chaos_log(d->log, "FAULT worker_kill slot=%d pid=%d inside=%d", i, (int)pid, inside);
    return drv_spawn_worker(d, i);
}

static int fault_worker_pause(struct driver *d)
{
    /* Aim at the gap between a worker's last check and its write: resumed, it
     * writes with a fence that a newer holder has overtaken meanwhile. */
    int i = -1;
    int64_t deadline = chaos_now_ms() + 3000;
    while (i < 0 && chaos_now_ms() < deadline) {
        i = find_slot(d, CHAOS_PH_CHECKED);
        if (i < 0)
            chaos_sleep_ms(1);
    }
    if (i < 0)
        i = find_slot(d, CHAOS_PH_INSIDE);
    if (i < 0)
        return 1;
    struct chaos_slot *s = &d->m->slots[i];
    pid_t pid = atomic_load(&s->pid);
    kill(pid, SIGSTOP);
    if (!wait_stopped(pid, 1000))
        fprintf(stderr, "chaos: worker %d (pid %d) not seen stopped within 1 s\n", i, (int)pid);
    /* Stopped: its slot no longer changes, so this names the hold it is in. */
    int inside = atomic_load(&s->inside);
    int phase = atomic_load(&s->phase);
    int shared = atomic_load(&s->shared);
    uint64_t seq = atomic_load(&s->hold_seq);
    if (inside >= 0)
        atomic_store(&s->paused_seq, seq);
    int ms = (int)(CHAOS_SESSION_TIMEOUT_MS + chaos_rng_range(&d->rng, 200, 2000));
    drv_idle(d, ms);
    kill(pid, SIGCONT);
    chaos_log(d->log, "FAULT worker_pause slot=%d pid=%d inside=%d phase=%d seq=%llu ms=%d "
              "shared=%d", i, (int)pid, inside, phase, (unsigned long long)seq, ms,
              inside >= 0 && shared);
    return 0;
}

static int fault_redis_kill(struct driver *d)
{
    pid_t old = d->e.redis_pid;
    h_redis_kill(&d->e);
    atomic_fetch_add(&d->m->redis_epoch, 1);
    /*
     * --workaround-redis-delayed-restart keeps Redis down longer than any
     * lease, as Redis without persistence needs: every lease has then run
     * out (and been declared lost) before the keys vanish, since rlockd
     * itself re-grants a lock whose key went missing while its holder's
     * validity still runs (README.md, known daemon bugs).
     */
    int down = d->workaround_redis ? (int)chaos_rng_range(&d->rng, CHAOS_TTL_MAX_MS + 500,
                                                          CHAOS_TTL_MAX_MS + 1300)
                                   : (int)chaos_rng_range(&d->rng, 0, 800);
    drv_idle(d, down);
    int rc = h_redis_start(&d->e);
    chaos_log(d->log, "FAULT redis_kill pid=%d down_ms=%d new_pid=%d rc=%d", (int)old, down,
              (int)d->e.redis_pid, rc);
    return rc;
}

static int fault_redis_pause(struct driver *d)
{
    pid_t pid = d->e.redis_pid;
    int ms = (int)(CHAOS_TTL_MAX_MS + chaos_rng_range(&d->rng, 200, 1500));
    kill(pid, SIGSTOP);
    drv_idle(d, ms);
    kill(pid, SIGCONT);
    chaos_log(d->log, "FAULT redis_pause pid=%d ms=%d", (int)pid, ms);
    return 0;
}

/* One command on a fresh connection; the reply as text in buf. 0 or -1. */
static int redis_command(struct driver *d, const char *cmd, char *buf, size_t len)
{
    redisContext *r = h_redis(&d->e);
    if (!r) {
        snprintf(buf, len, "no connection");
        return -1;
    }
    redisReply *rep = redisCommand(r, cmd);
    int rc = 0;
    if (!rep) {
        snprintf(buf, len, "%s", r->errstr);
        rc = -1;
    } else if (rep->type == REDIS_REPLY_INTEGER) {
        snprintf(buf, len, "%lld", rep->integer);
    } else if (rep->type == REDIS_REPLY_STATUS || rep->type == REDIS_REPLY_ERROR) {
        snprintf(buf, len, "%s", rep->str);
        rc = rep->type == REDIS_REPLY_ERROR ? -1 : 0;
    } else {
        snprintf(buf, len, "reply type %d", rep->type);
    }
    if (rep)
        freeReplyObject(rep);
    redisFree(r);
    return rc;
}

static int fault_script_flush(struct driver *d)
{
    char out[128];
    int rc = redis_command(d, "SCRIPT FLUSH", out, sizeof out);
    chaos_log(d->log, "FAULT script_flush reply=%s", out);
    return rc;
}

static int fault_client_kill(struct driver *d)
{
    char out[128];
    int rc = redis_command(d, "CLIENT KILL TYPE normal", out, sizeof out);
    chaos_log(d->log, "FAULT client_kill killed=%s", out);
    return rc;
}

/*
 * Stop rlockd number i with sig (SIGKILL: a crash; SIGTERM: a handover to
 * the other daemon, or with one daemon a release of every lock) and start it
 * again after 0-1 s.
 */
static int rlockd_restart(struct driver *d, int i, int sig, const char *kind)
{
    struct h_env *e = drv_daemon(d, i);
    pid_t old = e->rlockd_pid;
    drv_sample_rss(d);
    int64_t t0 = chaos_now_ms();
    int status = 0;
    int in_time = h_stop_pid(old, sig, NEMESIS_STOP_GRACE_MS, "rlockd", &status) == 0;
    e->rlockd_pid = 0;
    int64_t stop_ms = chaos_now_ms() - t0;
    /* On SIGTERM an rlockd exits 0 (a handover or a release, then the exit). */
    int clean = sig != SIGTERM || (in_time && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    d->last_rlockd_kill_ms = chaos_now_ms();
    int down = (int)chaos_rng_range(&d->rng, 0, 1000);
    drv_idle(d, down);
    int rc = drv_daemon_start(d, i);
    chaos_log(d->log, "FAULT %s daemon=%d pid=%d stop_ms=%lld clean=%d down_ms=%d new_pid=%d "
              "rc=%d", kind, i, (int)old, (long long)stop_ms, clean, down, (int)e->rlockd_pid,
              rc);
    return rc;
}

static int pick_daemon(struct driver *d)
{
    return (int)chaos_rng_range(&d->rng, 0, (uint32_t)d->ndaemons - 1);
}

static int fault_rlockd_kill(struct driver *d)
{
    return rlockd_restart(d, pick_daemon(d), SIGKILL, "rlockd_kill");
}

/* A handover: the daemon must exit 0 on SIGTERM, within the harness's deadline. */
static int fault_rlockd_term(struct driver *d)
{
    return rlockd_restart(d, pick_daemon(d), SIGTERM, "rlockd_term");
}

/*
 * A daemon that stops answering (SIGSTOP) for longer than the session
 * timeout: its clients give it up and resume on the other. Woken, it acts on
 * what it believed: renews, session timeouts and releases by tokens that the
 * other daemon has replaced meanwhile.
 */
static int fault_rlockd_pause(struct driver *d)
{
    int i = pick_daemon(d);
    pid_t pid = drv_daemon(d, i)->rlockd_pid;
    int ms = (int)(CHAOS_SESSION_TIMEOUT_MS + chaos_rng_range(&d->rng, 200, 2000));
    kill(pid, SIGSTOP);
    drv_idle(d, ms);
    kill(pid, SIGCONT);
    chaos_log(d->log, "FAULT rlockd_pause daemon=%d pid=%d ms=%d", i, (int)pid, ms);
    return 0;
}

int nemesis_run(struct driver *d, enum chaos_fault f)
{
    int rc = -1;
    if (f == CHAOS_F_redis_kill || f == CHAOS_F_redis_pause || f == CHAOS_F_client_kill ||
        f == CHAOS_F_rlockd_kill || f == CHAOS_F_rlockd_pause || f == CHAOS_F_rlockd_term)
        aim_at_long_hold(d);
    switch (f) {
    case CHAOS_F_worker_kill: rc = fault_worker_kill(d); break;
    case CHAOS_F_worker_pause: rc = fault_worker_pause(d); break;
    case CHAOS_F_redis_kill: rc = fault_redis_kill(d); break;
    case CHAOS_F_redis_pause: rc = fault_redis_pause(d); break;
    case CHAOS_F_script_flush: rc = fault_script_flush(d); break;
    case CHAOS_F_client_kill: rc = fault_client_kill(d); break;
    case CHAOS_F_rlockd_kill: rc = fault_rlockd_kill(d); break;
    case CHAOS_F_rlockd_pause: rc = fault_rlockd_pause(d); break;
    case CHAOS_F_rlockd_term: rc = fault_rlockd_term(d); break;
    case CHAOS_NFAULTS: break;
    }
    if (rc == 0)
        d->faults[f]++;
    return rc;
}
