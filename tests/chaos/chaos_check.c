/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * chaos_check.c — the offline check of a chaos run: reads the histories a
 * run left in its dir (run.log, w<N>.log, store.log), recounts everything
 * from them, checks the rules and prints the summary.
 *
 * Rules (each printed as passed or failed):
 *   faults      every fault kind happened at least once
 *   overlaps    no overlap in the referee other than with a holder the
 *               nemesis paused (or was killing) during that hold, or between
 *               two shared holders (an exclusive holder is alone: no other
 *               holder of either mode beside it)
 *   fences      per resource, in referee entry order, an exclusive entry's
 *               fence is above every earlier entry's and a shared entry's
 *               above every earlier exclusive entry's (shared holders enter
 *               in any order); no fence was granted twice
 *   stale       the store accepted no stale write (an exclusive write below
 *               the highest fence accepted, a shared write below the highest
 *               exclusive fence accepted, or an equal fence from another hold)
 *   refused     every stale write attempted (found by replaying store.log)
 *               was refused, and the store's own counters agree
 *   keys        no lock key left in Redis once the workers exited and rlockd
 *               stopped cleanly (fence keys are allowed)
 *   memory      rlockd's VmRSS grew less than 10% from warm-up (20 s after
 *               each start) to the end of that incarnation, for every
 *               incarnation measured over at least 60 s
 *   processes   no process died by itself, the workers stopped when asked,
 *               every rlockd exited 0 on SIGTERM (the teardown's, and the
 *               nemesis's handovers), no sanitizer report in any process's
 *               output (for runs of sanitizer builds)
 *   moves       with two daemons: sessions resumed on a daemon (counted in
 *               both daemons' logs), so the faults did move them
 *   liveness    locks were still granted in the fault-free tail of the run
 *   deadlocks   no acquire was refused DEADLOCK: a worker holds one lock at a
 *               time, so no wait can close a cycle and any would be false
 *   shared      when the run asked for shared holds, with at least two
 *               workers per resource: some were granted, and the referee saw
 *               live shared holders overlap (else the mix exercised nothing)
 *   limit       (with a semaphore) no semaphore entrant found more than the
 *               limit of permits inside, unless the excess was the permits of
 *               holders paused in their hold or being killed (or, with two
 *               daemons, whose places a Redis restart lost)
 *   semaphore   (with a semaphore of limit >= 2 and a worker per resource)
 *               semaphore grants, and live holders seen inside together
 *   observed    (with an election) per client, the observed terms never went
 *               down (an elected change above every term shown before, a
 *               leader-gone change at least the last); a one-shot read never
 *               named a lower term than its client had been shown; every term
 *               observed was granted to the worker its value names, or the
 *               worker its value names was in a campaign that got no grant
 *               answer (it failed, or the worker was killed in it), each such
 *               campaign explaining one term
 *   election    (with an election) leaders granted in several terms, and
 *               elected changes reported to the observers
 *
 * The election's leaders are held exclusive: "one leader at a time" is the
 * overlaps rule on its resource, "terms strictly increase" the fences rule,
 * "a deposed leader's term is refused" the stale rule; the summary counts them
 * apart.
 *
 * Informational: accepted writes whose fence a newer grant had already
 * overtaken (the newer holder had not written yet, so the store could not
 * know): split by whether the writer was paused by the nemesis in that hold.
 */
#include "chaos_driver.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK_WARMUP_MS 20000
#define CK_MEASURE_MIN_MS 60000
#define CK_GROWTH_LIMIT_PCT 10.0
#define CK_TAIL_MS 10000
#define CK_MAX_NAMES 16
#define CK_MAX_INC 256
/*
 * How long after a campaign got no grant answer (failed, or its worker was killed) an
 * observer may still see the grant the daemon made for it: the script runs at the
 * latest when Redis resumes (a pause lasts at most the max ttl + 1.5 s), and the leader
 * record of a grant nobody confirmed lives at most a ttl (nobody renews it; the daemon
 * or the session's resume releases it). 10 s bounds both, with room.
 */
#define CK_PHANTOM_MS 10000

/* A growable array of T. */
#define VEC(T)                                                                                \
    struct {                                                                                  \
        T *v;                                                                                 \
        size_t n, cap;                                                                        \
    }
#define VEC_PUSH(a, x)                                                                        \
    do {                                                                                      \
        if ((a).n == (a).cap) {                                                               \
            size_t nc_ = (a).cap ? (a).cap * 2 : 256;                                         \
            void *nv_ = realloc((a).v, nc_ * sizeof *(a).v);                                  \
            if (!nv_) {                                                                       \
                fprintf(stderr, "chaos check: out of memory\n");                              \
                exit(2);                                                                      \
            }                                                                                 \
            (a).v = nv_;                                                                      \
            (a).cap = nc_;                                                                    \
        }                                                                                     \
        (a).v[(a).n++] = (x);                                                                 \
    } while (0)

struct ck_entry { /* one referee entry, or one grant */
    int64_t t;
    uint64_t seq;
    uint64_t fence;
    int res;
    int shared;   /* shared, or a semaphore's holder: one of a group */
    int sem;      /* a semaphore's holder */
    int slot, pid; /* whose */
};

struct ck_attempt { /* one campaign in the election */
    int slot, pid;
    int64_t t;          /* its ACQ */
    int64_t t_end;      /* its ACQFAIL or GRANT; no answer: the worker's last line after the ACQ */
    int outcome;        /* 0 no answer logged (the worker was killed waiting), 1 GRANT, 2 ACQFAIL,
                           3 no answer logged though the worker went on (a broken history) */
    int rc;             /* with ACQFAIL */
    uint64_t fence;     /* with GRANT: the term */
    uint64_t explains;  /* not granted: the one observed term it was found to explain */
};

enum { CK_OBS_ANSWER, CK_OBS_CHANGE, CK_OBS_READ };

struct ck_obs { /* one thing a worker's client was told about the election */
    int slot, pid, gen; /* a client: its worker's slot and pid, its generation there */
    size_t idx;         /* order in its history file */
    int64_t t;
    int type;           /* CK_OBS_* */
    int rc;             /* answers and reads */
    int elected;
    uint64_t term;
    int vslot, vpid;    /* the value "worker-SLOT-PID"; -1: none or another */
    uint64_t before;    /* reads: the highest term the client had been shown */
};

struct ck_names { /* a small counted set of words */
    char name[CK_MAX_NAMES][32];
    uint64_t count[CK_MAX_NAMES];
    int n;
};

struct ck_inc { /* one incarnation of rlockd */
    int pid;
    int64_t start;
    int64_t base_t, last_t;
    long base_kb, last_kb, max_kb;
};

struct ck {
    const char *dir;
    int verbose;
    uint64_t seed;
    int seconds, nworkers, nres, ndaemons;
    int shared_pct, shared_pct_others; /* SHARED in run.log; 0 (absent): an older run */
    int sem_res, sem_limit, elect_res; /* KINDS in run.log; -1 (absent): none */
    int nres_all;                      /* every resource: locks, semaphore, election */
    int cur_slot;                      /* the worker history being read */
    size_t cur_idx;                    /* its line number */
    long cur_attempt;                  /* its latest campaign (attempts index), or -1 */
    int terms_unclean; /* handovers (rlockd_term) that did not end in exit 0 */
    int64_t t_first, t_last;
    /* run.log */
    int faults[CHAOS_NFAULTS];
    int pauses_in_gap, pauses_outside;
    VEC(uint64_t) paused_seqs;
    struct ck_inc inc[CK_MAX_INC];
    int ninc;
    int crashes, workers_stuck, workers_failed, rlockd_clean, keys_left, results_seen;
    int claims_left; /* claim keys (with an expiry) of withdrawn exclusive waiters: allowed */
    int leaders_left; /* leader records (with an expiry) of elections: allowed */
    char fault_failed[64];
    int workaround_keys; /* lock keys still there when the workaround began waiting; -1: off */
    int workaround_redis; /* --workaround-redis-delayed-restart was on */
    int sanitized_build;  /* ASan/TSan: memory growth is the sanitizer's, not judged */
    /* workers */
    VEC(struct ck_entry) grants;
    VEC(struct ck_entry) enters;
    uint64_t overlaps[CHAOS_OV_KINDS];
    uint64_t overlaps_mixed[CHAOS_OV_KINDS]; /* ... of which between a shared and an exclusive */
    uint64_t shared_grants, shared_enters;
    int pauses_shared; /* worker pauses that stopped a shared holder */
    int pauses_sem, pauses_leader; /* ... a semaphore's holder, a leader */
    /* the semaphore */
    uint64_t sem_grants, sem_grants_two, sem_enters, sem_enters_together;
    uint32_t sem_max_holders, sem_max_permits, sem_max_live_holders, sem_max_live_permits;
    uint64_t sem_over[CHAOS_OV_KINDS]; /* entries over the limit, by what explained it */
    uint64_t sem_reordered;            /* entries below an earlier holder's fence (allowed) */
    /* the election */
    uint64_t campaigns, leader_grants, leader_enters;
    uint64_t leader_overlaps[CHAOS_OV_KINDS];
    VEC(struct ck_attempt) attempts;
    VEC(struct ck_obs) obs;
    uint64_t order_bad_res[CHAOS_MAX_RES];
    uint64_t acq_fail[128];
    uint64_t skips, voids, notices, uncertain, drops, releases, release_fail, session_ends;
    uint64_t session_ends_protocol; /* ended over a frame one side could not take */
    uint64_t connects_failed, worker_starts, worker_writes[3];
    int64_t last_acq_t;          /* of the current history file's latest ACQ */
    uint64_t long_waits;         /* grants after a wait longer than the session timeout */
    uint64_t stale_grants;       /* grants whose validity was over when they returned */
    uint64_t stale_grants_short; /* ... of which after a wait shorter than the session timeout */
    int64_t stale_grant_min_wait_ms;
    struct ck_names lost, noticed;
    VEC(char *) violations;
    /* store.log */
    uint64_t st_accepted, st_refused, st_stale, st_bad, st_refused_believed_held;
    uint64_t st_shared, st_shared_refused, st_shared_below; /* shared writes; refused; accepted
                                                               below a shared writer's fence */
    uint64_t st_sem, st_sem_below;          /* a semaphore's writes; accepted below a newer one */
    uint64_t st_leader, st_leader_refused;  /* the election's writes (fence = term); refused */
    uint64_t st_counter_acc, st_counter_ref, st_counter_bad;
    int st_stopped;
    uint64_t late_paused, late_other;
    VEC(char *) late_lines;
};

static void names_add(struct ck_names *s, const char *name)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->name[i], name) == 0) {
            s->count[i]++;
            return;
        }
    }
    if (s->n < CK_MAX_NAMES) {
        snprintf(s->name[s->n], sizeof s->name[s->n], "%s", name);
        s->count[s->n++] = 1;
    }
}

static int fault_index(const char *name)
{
    for (int f = 0; f < CHAOS_NFAULTS; f++)
        if (strcmp(chaos_fault_names[f], name) == 0)
            return f;
    return -1;
}

/* Read dir/name line by line; fn gets the timestamp and the rest of the line. */
static int ck_read(struct ck *k, const char *name, void (*fn)(struct ck *, int64_t, char *))
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", k->dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *rest;
        long long t = strtoll(line, &rest, 10);
        if (rest == line || *rest != ' ')
            continue;
        if (k->t_first == 0 || t < k->t_first)
            k->t_first = t;
        if (t > k->t_last)
            k->t_last = t;
        fn(k, t, rest + 1);
    }
    fclose(f);
    return 0;
}

static struct ck_inc *inc_of(struct ck *k, int pid)
{
    for (int i = k->ninc - 1; i >= 0; i--)
        if (k->inc[i].pid == pid)
            return &k->inc[i];
    return NULL;
}

static void ck_run_line(struct ck *k, int64_t t, char *s)
{
    char word[64], arg[64];
    int pid;
    long kb;
    if (sscanf(s, "SEED %" SCNu64 " %d %d %d", &k->seed, &k->seconds, &k->nworkers, &k->nres) ==
        4)
        return;
    if (sscanf(s, "WORKAROUNDS shutdown_keys=%*d redis_delayed_restart=%d", &k->workaround_redis) ==
        1)
        return;
    if (sscanf(s, "DAEMONS %d", &k->ndaemons) == 1)
        return;
    if (sscanf(s, "SHARED %d %d", &k->shared_pct, &k->shared_pct_others) == 2)
        return;
    if (sscanf(s, "KINDS sem_res=%d sem_limit=%d elect_res=%d", &k->sem_res, &k->sem_limit,
               &k->elect_res) == 3)
        return;
    if (strncmp(s, "SANITIZED_BUILD", 15) == 0) {
        k->sanitized_build = 1;
        return;
    }
    if (sscanf(s, "RLOCKD_START %d", &pid) == 1) {
        if (k->ninc < CK_MAX_INC)
            k->inc[k->ninc++] = (struct ck_inc){ .pid = pid, .start = t };
        return;
    }
    if (sscanf(s, "RSS %d %ld", &pid, &kb) == 2) {
        struct ck_inc *c = inc_of(k, pid);
        if (!c)
            return;
        if (c->base_kb == 0 && t - c->start >= (int64_t)CK_WARMUP_MS * 1000) {
            c->base_kb = kb;
            c->base_t = t;
        }
        if (c->base_kb) {
            c->last_kb = kb;
            c->last_t = t;
            if (kb > c->max_kb)
                c->max_kb = kb;
        }
        return;
    }
    if (sscanf(s, "FAULT %63s", word) == 1) {
        int f = fault_index(word);
        if (f >= 0)
            k->faults[f]++;
        if (f == CHAOS_F_worker_pause) {
            int inside = -1, phase = 0;
            uint64_t seq = 0;
            const char *p = strstr(s, "inside=");
            if (p)
                sscanf(p, "inside=%d phase=%d seq=%" SCNu64, &inside, &phase, &seq);
            if (inside >= 0)
                VEC_PUSH(k->paused_seqs, seq);
            const char *sh = strstr(s, "shared=");
            if (inside >= 0 && sh && atoi(sh + 7) == 1)
                k->pauses_shared++;
            k->pauses_sem += inside >= 0 && inside == k->sem_res;
            k->pauses_leader += inside >= 0 && inside == k->elect_res;
            if (inside >= 0 && phase == CHAOS_PH_CHECKED)
                k->pauses_in_gap++;
            else if (inside < 0)
                k->pauses_outside++;
        }
        const char *clean = f == CHAOS_F_rlockd_term ? strstr(s, "clean=") : NULL;
        if (clean && atoi(clean + 6) != 1) {
            k->terms_unclean++;
            char *line = strdup(s);
            if (line)
                VEC_PUSH(k->violations, line);
        }
        return;
    }
    if (strncmp(s, "CRASH ", 6) == 0) {
        k->crashes++;
        char *line = strdup(s);
        if (line)
            VEC_PUSH(k->violations, line);
        return;
    }
    if (strncmp(s, "KEYLEFT ", 8) == 0) {
        char *line = strdup(s);
        if (line)
            VEC_PUSH(k->violations, line);
        return;
    }
    int v;
    if (sscanf(s, "RESULT %63s %63s", word, arg) == 2) {
        k->results_seen++;
        v = atoi(arg);
        if (strcmp(word, "workers_stuck") == 0)
            k->workers_stuck = v;
        else if (strcmp(word, "workers_failed") == 0)
            k->workers_failed = v;
        else if (strcmp(word, "rlockd_clean_exit") == 0)
            k->rlockd_clean = v;
        else if (strcmp(word, "lock_keys_left") == 0)
            k->keys_left = v;
        else if (strcmp(word, "claim_keys_left") == 0)
            k->claims_left = v;
        else if (strcmp(word, "leader_records_left") == 0)
            k->leaders_left = v;
        else if (strcmp(word, "workaround_keys_before_stop") == 0)
            k->workaround_keys = v;
        else if (strcmp(word, "fault_failed") == 0)
            snprintf(k->fault_failed, sizeof k->fault_failed, "%s", arg);
    }
}

/* "worker-SLOT-PID" into *slot, *pid; -1 for anything else ("-": no value). */
static void ck_value(const char *v, int *slot, int *pid)
{
    char tail;
    if (sscanf(v, "worker-%d-%d%c", slot, pid, &tail) != 2) {
        *slot = -1;
        *pid = -1;
    }
}

static void ck_worker_line(struct ck *k, int64_t t, char *s)
{
    int pid, res, a, b;
    uint64_t fence, seq;
    char ev[32], word[64], mode = 'x', other_mode = 'x';
    k->cur_idx++;
    if (sscanf(s, "%d %31s", &pid, ev) != 2)
        return;
    const char *p = strchr(s, ' ') + 1 + strlen(ev);
    /* A campaign's answer is the worker's next line but for its callbacks' (another
     * thread): anything else means the history lost the answer, and explains nothing. */
    if (k->cur_attempt >= 0 && k->attempts.v[k->cur_attempt].outcome == 0 &&
        k->attempts.v[k->cur_attempt].pid == pid) {
        k->attempts.v[k->cur_attempt].t_end = t;
        if (strcmp(ev, "GRANT") != 0 && strcmp(ev, "ACQFAIL") != 0 && strcmp(ev, "LEADER") != 0 &&
            strcmp(ev, "LOSTCB") != 0)
            k->attempts.v[k->cur_attempt].outcome = 3;
    }
    if (strcmp(ev, "ACQ") == 0) {
        k->last_acq_t = t;
        if (sscanf(p, "%d", &res) == 1 && res == k->elect_res) {
            k->campaigns++;
            k->cur_attempt = (long)k->attempts.n;
            VEC_PUSH(k->attempts, ((struct ck_attempt){ .slot = k->cur_slot, .pid = pid, .t = t,
                                                        .t_end = t }));
        } else {
            k->cur_attempt = -1;
        }
    } else if (strcmp(ev, "GRANT") == 0 &&
               sscanf(p, "%d %" SCNu64 " %d %d %*s %c", &res, &fence, &a, &b, &mode) >= 4) {
        unsigned permits = 0;
        k->shared_grants += mode == 's';
        if (mode == 'p' && sscanf(p, "%*d %*u %*d %*d %*s %*c %u", &permits) == 1) {
            k->sem_grants++;
            k->sem_grants_two += permits > 1;
        }
        if (res == k->elect_res) {
            k->leader_grants++;
            if (k->cur_attempt >= 0 && k->attempts.v[k->cur_attempt].pid == pid) {
                k->attempts.v[k->cur_attempt].outcome = 1;
                k->attempts.v[k->cur_attempt].fence = fence;
            }
        }
        VEC_PUSH(k->grants, ((struct ck_entry){ .t = t, .fence = fence, .res = res,
                                                .shared = mode == 's' || mode == 'p',
                                                .slot = k->cur_slot, .pid = pid }));
        int64_t wait_ms = k->last_acq_t ? (t - k->last_acq_t) / 1000 : 0;
        if (wait_ms > (int64_t)CHAOS_SESSION_TIMEOUT_MS)
            k->long_waits++;
        if (b <= 0) { /* valid_until - now at the grant, in ms */
            k->stale_grants++;
            if (wait_ms <= (int64_t)CHAOS_SESSION_TIMEOUT_MS)
                k->stale_grants_short++;
            if (k->stale_grant_min_wait_ms == 0 || wait_ms < k->stale_grant_min_wait_ms)
                k->stale_grant_min_wait_ms = wait_ms;
        }
    } else if (strcmp(ev, "ENTER") == 0 &&
               sscanf(p, "%d %" SCNu64 " %" SCNu64 " %*u %c", &res, &fence, &seq, &mode) >= 3) {
        k->shared_enters += mode == 's';
        k->leader_enters += res == k->elect_res;
        unsigned permits, holders, inside, live_holders, live_permits;
        if (mode == 'p' && sscanf(p, "%*d %*u %*u %*u %*c %u %u %u %u %u", &permits, &holders,
                                  &inside, &live_holders, &live_permits) == 5) {
            k->sem_enters++;
            k->sem_enters_together += live_holders > 1;
#define CK_MAX(x, y) ((x) = (y) > (x) ? (y) : (x))
            CK_MAX(k->sem_max_holders, holders);
            CK_MAX(k->sem_max_permits, inside);
            CK_MAX(k->sem_max_live_holders, live_holders);
            CK_MAX(k->sem_max_live_permits, live_permits);
#undef CK_MAX
        }
        VEC_PUSH(k->enters, ((struct ck_entry){ .t = t, .seq = seq, .fence = fence, .res = res,
                                                .shared = mode == 's' || mode == 'p',
                                                .sem = mode == 'p', .slot = k->cur_slot,
                                                .pid = pid }));
    } else if (strcmp(ev, "OVERLAP") == 0 &&
               sscanf(p, "%d %" SCNu64 " %" SCNu64 " %d %d %*u %d %*d %c %c", &res, &fence, &seq,
                      &a, &b, &pid, &mode, &other_mode) >= 6) {
        if (pid >= 0 && pid < CHAOS_OV_KINDS) {
            k->overlaps[pid]++;
            k->overlaps_mixed[pid] += mode != other_mode;
            if (res == k->elect_res)
                k->leader_overlaps[pid]++;
        }
        if (pid == CHAOS_OV_VIOLATION || (pid == CHAOS_OV_REDIS_LOST && k->ndaemons < 2)) {
            char *line = malloc(strlen(s) + 32);
            if (line) {
                sprintf(line, "overlap at %lld: %s", (long long)t, s);
                VEC_PUSH(k->violations, line);
            }
        }
    } else if (strcmp(ev, "SEMOVER") == 0 && sscanf(p, "%d %*u %*u %*u %*u %d", &res, &a) == 2) {
        if (a >= 0 && a < CHAOS_OV_KINDS)
            k->sem_over[a]++;
        if (a == CHAOS_OV_VIOLATION || (a == CHAOS_OV_REDIS_LOST && k->ndaemons < 2)) {
            char *line = malloc(strlen(s) + 48);
            if (line) {
                sprintf(line, "semaphore over its limit at %lld: %s", (long long)t, s);
                VEC_PUSH(k->violations, line);
            }
        }
    } else if (strcmp(ev, "OBSERVE") == 0 || strcmp(ev, "LEADER") == 0 ||
               strcmp(ev, "LEADERREAD") == 0) {
        struct ck_obs o = { .slot = k->cur_slot, .pid = pid, .idx = k->cur_idx, .t = t };
        char value[96] = "-";
        int n;
        if (ev[6] == '\0') { /* LEADER: a change */
            o.type = CK_OBS_CHANGE;
            n = sscanf(p, "%d %d %" SCNu64 " %95s", &o.gen, &o.elected, &o.term, value) == 4;
        } else if (ev[0] == 'O') {
            o.type = CK_OBS_ANSWER;
            n = sscanf(p, "%d %d %d %" SCNu64 " %95s", &o.gen, &o.rc, &o.elected, &o.term,
                       value) == 5;
        } else {
            o.type = CK_OBS_READ;
            n = sscanf(p, "%d %d %d %" SCNu64 " %95s %" SCNu64, &o.gen, &o.rc, &o.elected, &o.term,
                       value, &o.before) == 6;
        }
        if (n) {
            ck_value(value, &o.vslot, &o.vpid);
            VEC_PUSH(k->obs, o);
        }
    } else if (strcmp(ev, "ACQFAIL") == 0 && sscanf(p, "%d %d", &res, &a) == 2) {
        k->acq_fail[a >= 0 && a < 128 ? a : 127]++;
        if (res == k->elect_res && k->cur_attempt >= 0 &&
            k->attempts.v[k->cur_attempt].pid == pid) {
            k->attempts.v[k->cur_attempt].outcome = 2;
            k->attempts.v[k->cur_attempt].rc = a;
        }
    } else if (strcmp(ev, "WRITE") == 0 && sscanf(p, "%d %" SCNu64 " %d", &res, &fence, &a) == 3) {
        k->worker_writes[a == CHAOS_W_ACCEPTED ? 0 : a == CHAOS_W_REFUSED ? 1 : 2]++;
    } else if (strcmp(ev, "LOSTCB") == 0 && sscanf(p, "%*s %*u %63s", word) == 1) {
        names_add(&k->lost, word);
    } else if (strcmp(ev, "NOTICE") == 0 && sscanf(p, "%*d %*u %*d %63s", word) == 1) {
        k->notices++;
        names_add(&k->noticed, word);
    } else if (strcmp(ev, "SKIP") == 0) {
        k->skips++;
    } else if (strcmp(ev, "VOID") == 0) {
        k->voids++;
    } else if (strcmp(ev, "UNCERTAIN") == 0) {
        k->uncertain++;
    } else if (strcmp(ev, "DROP") == 0) {
        k->drops++;
    } else if (strcmp(ev, "RELEASE") == 0 && sscanf(p, "%*d %*u %d", &a) == 1) {
        k->releases++;
        if (a != 0)
            k->release_fail++;
    } else if (strcmp(ev, "SESSION_END") == 0) {
        k->session_ends++;
        /* The library's words for a frame of the daemon it could not take, and for the
         * daemon refusing one of its own: never a fault's doing, always a bug. */
        if (strstr(p, "from the daemon") != NULL || strstr(p, "the daemon reported") != NULL) {
            k->session_ends_protocol++;
            char *line = malloc(strlen(s) + 32);
            if (line) {
                sprintf(line, "session end at %lld: %s", (long long)t, s);
                VEC_PUSH(k->violations, line);
            }
        }
    } else if (strcmp(ev, "CONNECT") == 0 && sscanf(p, "%d", &a) == 1) {
        if (a != 0)
            k->connects_failed++;
    } else if (strcmp(ev, "START") == 0) {
        k->worker_starts++;
    }
}

/* The store's decisions, replayed in its own order. */
struct ck_store_state {
    uint64_t highest[CHAOS_MAX_RES];      /* of every accepted write */
    uint64_t hold[CHAOS_MAX_RES];
    uint64_t highest_excl[CHAOS_MAX_RES]; /* of the accepted exclusive writes */
    uint64_t hold_excl[CHAOS_MAX_RES];
    uint64_t granted[CHAOS_MAX_RES]; /* highest fence granted before the write in hand */
    uint64_t granted_excl[CHAOS_MAX_RES]; /* ... of an exclusive grant */
    size_t next_grant;               /* grants are sorted by time; store.log is in time order */
};
static struct ck_store_state ck_store;

static int paused_hold(const struct ck *k, uint64_t seq)
{
    for (size_t i = 0; i < k->paused_seqs.n; i++)
        if (k->paused_seqs.v[i] == seq)
            return 1;
    return 0;
}

static void ck_store_line(struct ck *k, int64_t t, char *s)
{
    unsigned res;
    uint64_t fence, seq, highest;
    int verdict, believed, slot, pid;
    unsigned long long acc, ref, bad;
    if (sscanf(s, "STOP accepted=%llu refused=%llu bad=%llu", &acc, &ref, &bad) == 3) {
        k->st_counter_acc = acc;
        k->st_counter_ref = ref;
        k->st_counter_bad = bad;
        k->st_stopped = 1;
        return;
    }
    char mode = 'x';
    if (sscanf(s, "STORE %u %" SCNu64 " %d %d %d %d %" SCNu64 " %" SCNu64 " %c", &res, &fence,
               &verdict, &believed, &slot, &pid, &seq, &highest, &mode) < 8 ||
        res >= CHAOS_MAX_RES)
        return;
    /* The rule, replayed apart from the store: an exclusive write is stale below every
     * accepted fence, a shared one below the accepted exclusive fences. */
    int shared = mode == 's' || mode == 'p'; /* a semaphore's holders write as readers do */
    k->st_sem += mode == 'p';
    k->st_leader += (int)res == k->elect_res;
    uint64_t *hi = &ck_store.highest[res], *hx = &ck_store.highest_excl[res];
    uint64_t bound = shared ? *hx : *hi;
    int stale = fence < bound || (fence == *hi && seq != ck_store.hold[res] && *hi != 0) ||
                (fence == *hx && seq != ck_store.hold_excl[res] && *hx != 0);
    if (stale)
        k->st_stale++;
    k->st_shared += mode == 's';
    if (verdict == CHAOS_W_REFUSED) {
        k->st_refused++;
        k->st_shared_refused += mode == 's';
        k->st_leader_refused += (int)res == k->elect_res;
        if (believed == 0) /* RLOCK_HELD */
            k->st_refused_believed_held++;
    } else {
        k->st_accepted++;
        if (stale) {
            k->st_bad++;
            char *line = malloc(strlen(s) + 48);
            if (line) {
                sprintf(line, "stale write accepted at %lld: %s", (long long)t, s);
                VEC_PUSH(k->violations, line);
            }
        }
        if (fence < *hi) { /* shared, below a newer shared writer (or semaphore's): allowed */
            if (mode == 'p')
                k->st_sem_below++;
            else
                k->st_shared_below++;
        }
        if (fence >= *hi) {
            *hi = fence;
            ck_store.hold[res] = seq;
        }
        if (!shared) {
            *hx = fence;
            ck_store.hold_excl[res] = seq;
        }
        /* Informational: a newer grant existed already (the store could not know); for a
         * shared write, a newer exclusive grant (newer readers overtake no reader). */
        while (ck_store.next_grant < k->grants.n && k->grants.v[ck_store.next_grant].t < t) {
            const struct ck_entry *g = &k->grants.v[ck_store.next_grant++];
            if (g->res < 0 || g->res >= CHAOS_MAX_RES)
                continue;
            if (g->fence > ck_store.granted[g->res])
                ck_store.granted[g->res] = g->fence;
            if (!g->shared && g->fence > ck_store.granted_excl[g->res])
                ck_store.granted_excl[g->res] = g->fence;
        }
        uint64_t newest = shared ? ck_store.granted_excl[res] : ck_store.granted[res];
        if (newest > fence) {
            if (paused_hold(k, seq)) {
                k->late_paused++;
            } else {
                k->late_other++;
                char *line = malloc(strlen(s) + 96);
                if (line) {
                    sprintf(line, "at %lld (newer fence %" PRIu64 " granted): %s", (long long)t,
                            newest, s);
                    VEC_PUSH(k->late_lines, line);
                }
            }
        }
    }
}

static int cmp_entry_t(const void *a, const void *b)
{
    const struct ck_entry *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_entry_seq(const void *a, const void *b)
{
    const struct ck_entry *x = a, *y = b;
    if (x->res != y->res)
        return x->res - y->res;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_entry_fence(const void *a, const void *b)
{
    const struct ck_entry *x = a, *y = b;
    if (x->res != y->res)
        return x->res - y->res;
    return x->fence < y->fence ? -1 : x->fence > y->fence;
}

/*
 * Fences out of order in entry order, plus fences granted twice. Per resource,
 * in entry order: an exclusive entry's fence is above every earlier entry's
 * (its grant came after each of them was granted, or the two overlapped); a
 * shared entry's is above every earlier exclusive entry's. Shared entries among
 * themselves may come in any order (granted together, entered as scheduled):
 * *shared_reordered counts those, without judging.
 */
static uint64_t ck_fences(struct ck *k, uint64_t *dups, uint64_t *shared_reordered)
{
    uint64_t bad = 0;
    qsort(k->enters.v, k->enters.n, sizeof *k->enters.v, cmp_entry_seq);
    const struct ck_entry *top = NULL, *top_excl = NULL; /* of the resource so far */
    *shared_reordered = 0;
    for (size_t i = 0; i < k->enters.n; i++) {
        const struct ck_entry *b = &k->enters.v[i];
        if (i > 0 && k->enters.v[i - 1].res != b->res)
            top = top_excl = NULL;
        const struct ck_entry *a = b->shared ? top_excl : top;
        if (a && b->fence <= a->fence) {
            bad++;
            if (b->res >= 0 && b->res < CHAOS_MAX_RES)
                k->order_bad_res[b->res]++;
            char *line = malloc(200);
            if (line) {
                snprintf(line, 200, "fence order: resource %d entry %" PRIu64 " (%s) fence %"
                         PRIu64 " after entry %" PRIu64 " (%s) fence %" PRIu64, b->res, b->seq,
                         b->shared ? "shared" : "exclusive", b->fence, a->seq,
                         a->shared ? "shared" : "exclusive", a->fence);
                VEC_PUSH(k->violations, line);
            }
        } else if (b->shared && top && b->fence <= top->fence) {
            if (b->sem)
                k->sem_reordered++;
            else
                (*shared_reordered)++;
        }
        if (!top || b->fence > top->fence)
            top = b;
        if (!b->shared && (!top_excl || b->fence > top_excl->fence))
            top_excl = b;
    }
    struct ck_entry *g = malloc((k->grants.n + 1) * sizeof *g);
    if (!g)
        return bad;
    memcpy(g, k->grants.v, k->grants.n * sizeof *g);
    qsort(g, k->grants.n, sizeof *g, cmp_entry_fence);
    *dups = 0;
    for (size_t i = 1; i < k->grants.n; i++)
        if (g[i].res == g[i - 1].res && g[i].fence == g[i - 1].fence)
            (*dups)++;
    free(g);
    return bad;
}

/* What the offline check found about the election (ck_elections). */
struct ck_elect {
    uint64_t clients, answers, changes, changes_elected, changes_gone, gone_unshown;
    uint64_t reads, reads_elected;
    uint64_t order_bad, read_bad, value_bad, unexplained;
    uint64_t terms_seen, terms_granted, terms_excused; /* distinct terms observed (elected) */
    uint64_t excused_rc[129];                          /* by the campaign's rc; 128: no answer */
    int leaders;                                       /* distinct worker slots granted a term */
};

static int cmp_obs_stream(const void *a, const void *b)
{
    const struct ck_obs *x = a, *y = b;
    if (x->slot != y->slot)
        return x->slot - y->slot;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->gen != y->gen)
        return x->gen - y->gen;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_obs_t(const void *a, const void *b)
{
    const struct ck_obs *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void ck_violation(struct ck *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ck_violation(struct ck *k, const char *fmt, ...)
{
    char text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    char *line = strdup(text);
    if (line)
        VEC_PUSH(k->violations, line);
}

/* The election's grant of term, or NULL (k->grants sorted by fence: by cmp_entry_fence). */
static const struct ck_entry *ck_leader_grant(const struct ck *k, const struct ck_entry *g,
                                              size_t n, uint64_t term)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g[mid].fence < term)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && g[lo].fence == term && g[lo].res == k->elect_res ? &g[lo] : NULL;
}

/*
 * A term observed that no worker logged a grant of: the campaign that explains it is
 * one of the worker its value names (any worker when the change carries no value: a
 * leader-gone change), made before it was observed, that got no grant answer — it
 * failed (its answer lost with a session, a timeout at the wait's edge, a cancel at the
 * stop: the daemon granted, the candidate never learned) or the worker was killed in it,
 * and that ended at most CK_PHANTOM_MS before the observation.
 * One such campaign explains one term: the one that explains this term already, else
 * the latest one not yet used. NULL: nothing explains it.
 */
static struct ck_attempt *ck_explain(struct ck *k, const struct ck_obs *o, int any_worker)
{
    struct ck_attempt *best = NULL;
    for (size_t i = 0; i < k->attempts.n; i++) {
        struct ck_attempt *a = &k->attempts.v[i];
        if (a->outcome == 1 || a->outcome == 3 || a->t > o->t ||
            o->t > a->t_end + (int64_t)CK_PHANTOM_MS * 1000)
            continue;
        if (!any_worker && (a->slot != o->vslot || a->pid != o->vpid))
            continue;
        if (a->explains == o->term)
            return a;
        if (a->explains == 0 && (!best || a->t > best->t))
            best = a;
    }
    if (best)
        best->explains = o->term;
    return best;
}

static void ck_elections(struct ck *k, struct ck_elect *e)
{
    memset(e, 0, sizeof *e);
    if (k->elect_res < 0)
        return;
    /* The election's grants by term. */
    size_t ng = 0;
    struct ck_entry *g = malloc((k->grants.n + 1) * sizeof *g);
    if (!g)
        return;
    int leader_slot[CHAOS_MAX_WORKERS] = { 0 };
    for (size_t i = 0; i < k->grants.n; i++) {
        if (k->grants.v[i].res != k->elect_res)
            continue;
        g[ng++] = k->grants.v[i];
        if (k->grants.v[i].slot >= 0 && k->grants.v[i].slot < CHAOS_MAX_WORKERS)
            leader_slot[k->grants.v[i].slot] = 1;
    }
    for (int i = 0; i < CHAOS_MAX_WORKERS; i++)
        e->leaders += leader_slot[i];
    qsort(g, ng, sizeof *g, cmp_entry_fence);

    /* Each client's stream: its Observe answer, then its changes in the order reported. */
    qsort(k->obs.v, k->obs.n, sizeof *k->obs.v, cmp_obs_stream);
    for (size_t i = 0; i < k->obs.n;) {
        size_t j = i;
        while (j < k->obs.n && k->obs.v[j].slot == k->obs.v[i].slot &&
               k->obs.v[j].pid == k->obs.v[i].pid && k->obs.v[j].gen == k->obs.v[i].gen)
            j++;
        /*
         * The answer comes first in the client, whatever the history's order: a change
         * is reported only once the answer is in (before that the election is not
         * observed), though its callback may be logged before the caller logs the answer.
         */
        uint64_t last = 0;
        int last_elected = 0, have_answer = 0;
        for (size_t x = i; x < j; x++) {
            const struct ck_obs *o = &k->obs.v[x];
            if (o->type == CK_OBS_ANSWER && o->rc == 0 && !have_answer) {
                have_answer = 1;
                last = o->elected ? o->term : 0;
                last_elected = o->elected;
                e->answers++;
            }
        }
        e->clients += have_answer;
        for (size_t x = i; x < j; x++) {
            const struct ck_obs *o = &k->obs.v[x];
            if (o->type == CK_OBS_READ) {
                e->reads += o->rc == 0;
                if (o->rc == 0 && o->elected) {
                    e->reads_elected++;
                    if (o->term < o->before) {
                        e->read_bad++;
                        ck_violation(k, "leader read at %lld by w%d (pid %d) client %d: term %"
                                     PRIu64 " after term %" PRIu64 " was shown", (long long)o->t,
                                     o->slot, o->pid, o->gen, o->term, o->before);
                    }
                }
                continue;
            }
            if (o->type != CK_OBS_CHANGE)
                continue;
            e->changes++;
            int bad;
            if (o->elected) {
                e->changes_elected++;
                bad = o->term <= last;
            } else {
                e->changes_gone++;
                bad = o->term < last;
                /* The leader that left was never shown elected here (it came and went
                 * between two looks of the daemon): allowed, counted. */
                e->gone_unshown += o->term > last || (o->term == last && !last_elected);
            }
            if (bad) {
                e->order_bad++;
                ck_violation(k, "observed at %lld by w%d (pid %d) client %d: %s term %" PRIu64
                             " after term %" PRIu64 " (%s)", (long long)o->t, o->slot, o->pid,
                             o->gen,
                             o->elected ? "elected" : "gone", o->term, last,
                             last_elected ? "elected" : "gone");
            }
            if (o->term > last)
                last = o->term;
            last_elected = o->elected;
        }
        i = j;
    }

    /* Every term observed: granted to the worker its value names, or explained. Elected
     * observations first (they name their candidate), earliest first. */
    qsort(k->obs.v, k->obs.n, sizeof *k->obs.v, cmp_obs_t);
    size_t nterms = 0;
    uint64_t *terms = malloc((k->obs.n + 1) * sizeof *terms);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < k->obs.n; i++) {
            const struct ck_obs *o = &k->obs.v[i];
            if (o->rc != 0 || o->term == 0 || (pass == 0) != (o->elected != 0))
                continue;
            if (o->elected && terms)
                terms[nterms++] = o->term;
            const struct ck_entry *gr = ck_leader_grant(k, g, ng, o->term);
            if (gr) {
                if (o->elected && (gr->slot != o->vslot || gr->pid != o->vpid)) {
                    e->value_bad++;
                    ck_violation(k, "observed at %lld by w%d: term %" PRIu64 " led by worker-%d-%d,"
                                 " granted to worker-%d-%d", (long long)o->t, o->slot, o->term,
                                 o->vslot, o->vpid, gr->slot, gr->pid);
                }
                continue;
            }
            struct ck_attempt *a = ck_explain(k, o, !o->elected);
            if (!a) {
                e->unexplained++;
                ck_violation(k, "observed at %lld by w%d: %s term %" PRIu64 " (value worker-%d-%d)"
                             " that no worker was granted, and no campaign without an answer "
                             "explains", (long long)o->t, o->slot,
                             o->elected ? "elected" : "gone", o->term, o->vslot, o->vpid);
            }
        }
    }
    if (terms) {
        qsort(terms, nterms, sizeof *terms, cmp_u64);
        for (size_t i = 0; i < nterms; i++) {
            if (i > 0 && terms[i] == terms[i - 1])
                continue;
            e->terms_seen++;
            if (ck_leader_grant(k, g, ng, terms[i]))
                e->terms_granted++;
        }
    }
    for (size_t i = 0; i < k->attempts.n; i++) {
        const struct ck_attempt *a = &k->attempts.v[i];
        if (a->explains == 0)
            continue;
        e->terms_excused++;
        e->excused_rc[a->outcome == 0 ? 128 : a->rc >= 0 && a->rc < 128 ? a->rc : 127]++;
    }
    free(terms);
    free(g);
}

/*
 * Sanitizer reports in the processes' output (a run of an ASan or TSan build):
 * the number of files with one; the first report's line is printed.
 */
static int ck_sanitizer_reports(const struct ck *k)
{
    static const char *const markers[] = { "Sanitizer", "runtime error:" };
    int found = 0;
    for (int i = -3; i < CHAOS_MAX_WORKERS; i++) {
        char path[512];
        if (i == -3)
            snprintf(path, sizeof path, "%s/b/rlockd.log", k->dir); /* --daemons 2 */
        else if (i == -2)
            snprintf(path, sizeof path, "%s/rlockd.log", k->dir);
        else if (i == -1)
            snprintf(path, sizeof path, "%s/store.out", k->dir);
        else
            snprintf(path, sizeof path, "%s/w%d.out", k->dir, i);
        char *text = h_read_file(path);
        const char *hit = NULL;
        for (size_t m = 0; text && m < sizeof markers / sizeof markers[0] && !hit; m++)
            hit = strstr(text, markers[m]);
        if (hit) {
            while (hit > text && hit[-1] != '\n')
                hit--;
            printf("  sanitizer report in %s: %.*s\n", path, (int)strcspn(hit, "\n"), hit);
            found++;
        }
        free(text);
    }
    return found;
}

static int rule(int *passed, int *failed, int ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int rule(int *passed, int *failed, int ok, const char *name, const char *fmt, ...)
{
    char text[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    printf("  %-5s %-10s %s\n", ok ? "ok" : "FAIL", name, text);
    if (ok)
        (*passed)++;
    else
        (*failed)++;
    return ok;
}

/* Lines of dir/rel (a daemon's log, all its incarnations) holding needle; 0 if none. */
static uint64_t ck_count_lines(const struct ck *k, const char *rel, const char *needle)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", k->dir, rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    uint64_t n = 0;
    char line[2048];
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

int chaos_check_run(const char *dir, int verbose)
{
    static struct ck k;
    memset(&k, 0, sizeof k);
    memset(&ck_store, 0, sizeof ck_store);
    k.dir = dir;
    k.verbose = verbose;
    k.rlockd_clean = -1;
    k.keys_left = -1;
    k.workaround_keys = -1;
    k.ndaemons = 1;
    k.sem_res = k.elect_res = -1;
    if (ck_read(&k, "run.log", ck_run_line) != 0) {
        fprintf(stderr, "chaos check: no run.log in %s\n", dir);
        return -1;
    }
    int64_t run_first = k.t_first;
    k.nres_all = k.nres + (k.sem_res >= 0) + (k.elect_res >= 0);
    for (int i = 0; i < CHAOS_MAX_WORKERS; i++) {
        char name[32];
        snprintf(name, sizeof name, "w%d.log", i);
        k.last_acq_t = 0;
        k.cur_slot = i;
        k.cur_idx = 0;
        k.cur_attempt = -1;
        ck_read(&k, name, ck_worker_line);
    }
    /* The store replay looks up grants by time. */
    qsort(k.grants.v, k.grants.n, sizeof *k.grants.v, cmp_entry_t);
    ck_read(&k, "store.log", ck_store_line);
    uint64_t dups = 0, shared_reordered = 0;
    uint64_t order_bad = ck_fences(&k, &dups, &shared_reordered);
    struct ck_elect el;
    ck_elections(&k, &el);
    /* The nemesis stops CK_TAIL_MS before the end: grants there show the system recovered. */
    int64_t tail_start = run_first + ((int64_t)k.seconds * 1000 - CK_TAIL_MS) * 1000;
    uint64_t tail_grants = 0;
    for (size_t i = 0; i < k.grants.n; i++)
        if (k.grants.v[i].t >= tail_start)
            tail_grants++;

    printf("chaos summary: seed %" PRIu64 ", %d s, %d workers, %d resources, %d rlockd (%.0f s "
           "measured)\n", k.seed, k.seconds, k.nworkers, k.nres, k.ndaemons,
           (double)(k.t_last - run_first) / 1e6);
    if (k.workaround_redis)
        printf("  WORKAROUND on: Redis kept down longer than any lease when restarted\n");
    printf("  faults:\n");
    int all_faults = 1, nfaults = 0;
    for (int f = 0; f < CHAOS_NFAULTS; f++) {
        if (!chaos_fault_enabled((enum chaos_fault)f, k.ndaemons))
            continue;
        printf("    %-13s %5d   %s\n", chaos_fault_names[f], k.faults[f], chaos_fault_texts[f]);
        all_faults &= k.faults[f] > 0;
        nfaults += k.faults[f];
    }
    printf("    (worker pauses: %d in the check-to-write gap, %d found no holder)\n",
           k.pauses_in_gap, k.pauses_outside);
    printf("  locks:\n");
    printf("    grants %zu, referee entries %zu, void entries %" PRIu64 ", skipped grants %" PRIu64
           "\n", k.grants.n, k.enters.n, k.voids, k.skips);
    printf("    shared: %" PRIu64 " grants, %" PRIu64 " referee entries (asked for %d%% of acquires "
           "on r0, %d%% elsewhere); worker pauses inside a shared hold %d\n", k.shared_grants,
           k.shared_enters, k.shared_pct, k.shared_pct_others, k.pauses_shared);
    printf("    grants after waiting longer than the session timeout %" PRIu64
           "; grants already past their validity when returned %" PRIu64 " (shortest wait %lld ms,"
           " %" PRIu64 " after shorter waits)\n", k.long_waits, k.stale_grants,
           (long long)k.stale_grant_min_wait_ms, k.stale_grants_short);
    printf("    releases %" PRIu64 " (%" PRIu64 " failed), dropped as lost %" PRIu64
           ", uncertain waits %" PRIu64 "\n", k.releases, k.release_fail, k.drops, k.uncertain);
    printf("    sessions ended %" PRIu64 ", failed connects %" PRIu64 ", worker starts %" PRIu64
           "\n", k.session_ends, k.connects_failed, k.worker_starts);
    /* rlockd logs "session ID (PEER, NAME): resumed, timeout ..." for each resume. */
    uint64_t resumes = ck_count_lines(&k, "rlockd.log", "): resumed, timeout") +
                       ck_count_lines(&k, "b/rlockd.log", "): resumed, timeout");
    uint64_t handed = ck_count_lines(&k, "rlockd.log", "handover done") +
                      ck_count_lines(&k, "b/rlockd.log", "handover done");
    if (k.ndaemons > 1)
        printf("    sessions resumed on a daemon %" PRIu64 ", handovers completed %" PRIu64
               ", unclean exits on SIGTERM %d\n", resumes, handed, k.terms_unclean);
    printf("    acquire failures:");
    int any = 0;
    for (int i = 0; i < 128; i++) {
        if (k.acq_fail[i]) {
            printf(" %s %" PRIu64 ";", rlock_strerror((enum rlock_err)i), k.acq_fail[i]);
            any = 1;
        }
    }
    printf("%s\n", any ? "" : " none");
    printf("    losses (on_lost) by reason:");
    for (int i = 0; i < k.lost.n; i++)
        printf(" %s %" PRIu64 ";", k.lost.name[i], k.lost.count[i]);
    printf("%s\n", k.lost.n ? "" : " none");
    printf("    holds a worker stopped acting on, by what it saw:");
    for (int i = 0; i < k.noticed.n; i++)
        printf(" %s %" PRIu64 ";", k.noticed.name[i], k.noticed.count[i]);
    printf("%s\n", k.noticed.n ? "" : " none");
    printf("  referee: overlaps with a paused holder %" PRIu64 ", with a killed holder %" PRIu64
           ", between live holders %" PRIu64 " (of which %" PRIu64 " after Redis lost the "
           "earlier holder's key)\n", k.overlaps[CHAOS_OV_PAUSED], k.overlaps[CHAOS_OV_KILLED],
           k.overlaps[CHAOS_OV_VIOLATION] + k.overlaps[CHAOS_OV_REDIS_LOST],
           k.overlaps[CHAOS_OV_REDIS_LOST]);
    printf("    of these, between a shared and an exclusive holder: paused %" PRIu64 ", killed %"
           PRIu64 ", live %" PRIu64 "\n", k.overlaps_mixed[CHAOS_OV_PAUSED],
           k.overlaps_mixed[CHAOS_OV_KILLED],
           k.overlaps_mixed[CHAOS_OV_VIOLATION] + k.overlaps_mixed[CHAOS_OV_REDIS_LOST]);
    printf("    between shared holders (allowed): %" PRIu64 " live, %" PRIu64 " with a paused or "
           "killed one; shared entries below an earlier shared fence (allowed) %" PRIu64 "\n",
           k.overlaps[CHAOS_OV_SHARED], k.overlaps[CHAOS_OV_SHARED_FAULTED], shared_reordered);
    printf("  fenced store: writes %" PRIu64 ", accepted %" PRIu64 ", stale attempted %" PRIu64
           ", stale refused %" PRIu64 " (%" PRIu64 " by writers that believed they held the "
           "lock), stale accepted %" PRIu64 "\n", k.st_accepted + k.st_refused, k.st_accepted,
           k.st_stale, k.st_refused, k.st_refused_believed_held, k.st_bad);
    printf("    accepted although a newer fence was already granted (the newer holder had not "
           "written yet): %" PRIu64 " by paused writers, %" PRIu64 " by others\n",
           k.late_paused, k.late_other);
    printf("    shared writes %" PRIu64 " (%" PRIu64 " refused as below an exclusive write; %"
           PRIu64 " accepted below a newer shared writer's fence, as readers may)\n",
           k.st_shared, k.st_shared_refused, k.st_shared_below);
    if (k.sem_res >= 0) {
        printf("  semaphore chaos/sem (r%d, limit %d):\n", k.sem_res, k.sem_limit);
        printf("    grants %" PRIu64 " (%" PRIu64 " of 2 permits), referee entries %" PRIu64
               " (%" PRIu64 " with another live holder inside, %" PRIu64 " below an earlier "
               "holder's fence: allowed); worker pauses inside a semaphore hold %d\n",
               k.sem_grants, k.sem_grants_two, k.sem_enters, k.sem_enters_together,
               k.sem_reordered, k.pauses_sem);
        printf("    inside at once, live: up to %u holders, %u permits (with paused or killed "
               "ones: %u holders, %u permits)\n", k.sem_max_live_holders, k.sem_max_live_permits,
               k.sem_max_holders, k.sem_max_permits);
        printf("    entries over the limit: %" PRIu64 " explained by paused holders, %" PRIu64
               " by killed ones, %" PRIu64 " by places Redis lost, %" PRIu64 " unexplained\n",
               k.sem_over[CHAOS_OV_PAUSED], k.sem_over[CHAOS_OV_KILLED],
               k.sem_over[CHAOS_OV_REDIS_LOST], k.sem_over[CHAOS_OV_VIOLATION]);
        printf("    fenced store: %" PRIu64 " writes, judged as readers' (%" PRIu64 " accepted "
               "below a newer holder's fence)\n", k.st_sem, k.st_sem_below);
    }
    if (k.elect_res >= 0) {
        printf("  election chaos/leader (r%d):\n", k.elect_res);
        printf("    campaigns %" PRIu64 ", terms granted %" PRIu64 " (to %d workers), referee "
               "entries %" PRIu64 "; worker pauses inside a leader's hold %d\n", k.campaigns,
               k.leader_grants, el.leaders, k.leader_enters, k.pauses_leader);
        printf("    two leaders inside: %" PRIu64 " with a paused one, %" PRIu64 " killed, %"
               PRIu64 " live (%" PRIu64 " after Redis lost the key); terms out of entry order %"
               PRIu64 "\n", k.leader_overlaps[CHAOS_OV_PAUSED], k.leader_overlaps[CHAOS_OV_KILLED],
               k.leader_overlaps[CHAOS_OV_VIOLATION] + k.leader_overlaps[CHAOS_OV_REDIS_LOST],
               k.leader_overlaps[CHAOS_OV_REDIS_LOST], k.order_bad_res[k.elect_res]);
        printf("    fenced store: %" PRIu64 " writes with the term, %" PRIu64 " refused (a lower "
               "term than one already written)\n", k.st_leader, k.st_leader_refused);
        printf("    observers: %" PRIu64 " clients, %" PRIu64 " changes (%" PRIu64 " elected, %"
               PRIu64 " gone, %" PRIu64 " of them a leader never shown elected), %" PRIu64
               " one-shot reads (%" PRIu64 " with a leader)\n", el.clients, el.changes,
               el.changes_elected, el.changes_gone, el.gone_unshown, el.reads, el.reads_elected);
        printf("    terms observed elected %" PRIu64 ", %" PRIu64 " granted to the worker "
               "named; campaigns without a grant answer explaining a term observed %" PRIu64,
               el.terms_seen, el.terms_granted, el.terms_excused);
        const char *sep = " (";
        for (int i = 0; i < 129; i++) {
            if (!el.excused_rc[i])
                continue;
            printf("%s%s %" PRIu64, sep, i == 128 ? "killed waiting" :
                   rlock_strerror((enum rlock_err)i), el.excused_rc[i]);
            sep = "; ";
        }
        printf("%s\n", sep[0] == ';' ? ")" : "");
    }
    printf("  rlockd memory (VmRSS, from %d s after each start):\n", CK_WARMUP_MS / 1000);
    int mem_ok = 1, measured = 0;
    for (int i = 0; i < k.ninc; i++) {
        struct ck_inc *c = &k.inc[i];
        if (!c->base_kb) {
            printf("    pid %-8d too short to measure\n", c->pid);
            continue;
        }
        double span = (double)(c->last_t - c->base_t) / 1e6;
        double growth = 100.0 * (double)(c->last_kb - c->base_kb) / (double)c->base_kb;
        int judged = span * 1000 >= CK_MEASURE_MIN_MS;
        printf("    pid %-8d %ld kB -> %ld kB (max %ld kB) over %.0f s: %+.1f%%%s\n", c->pid,
               c->base_kb, c->last_kb, c->max_kb, span, growth, judged ? "" : " (not judged)");
        if (judged) {
            measured++;
            mem_ok &= growth < CK_GROWTH_LIMIT_PCT;
        }
    }
    if (k.seconds >= 120 && !measured)
        mem_ok = 0;
    if (k.sanitized_build) {
        printf("    (a sanitizer build: its quarantine keeps freed memory, growth not judged)\n");
        mem_ok = 1;
    }

    printf("  rules:\n");
    int passed = 0, failed = 0;
    rule(&passed, &failed, all_faults, "faults", "every kind at least once (%d faults)", nfaults);
    /*
     * Redis restarted empty under a holder: its own daemon keeps the lock from
     * its other clients (a tombstone), but another daemon sharing that Redis
     * cannot know the key was held, and grants it (docs/safety.md: only fences
     * protect against Redis losing data; the stale rule checks they did).
     */
    int redis_lost_expected = k.ndaemons > 1;
    uint64_t live = k.overlaps[CHAOS_OV_VIOLATION] +
                    (redis_lost_expected ? 0 : k.overlaps[CHAOS_OV_REDIS_LOST]);
    if (redis_lost_expected)
        rule(&passed, &failed, live == 0, "overlaps",
             "%" PRIu64 " between live holders (%" PRIu64 " paused, %" PRIu64 " killed, %" PRIu64
             " after Redis lost the holder's key: expected with two daemons)",
             live, k.overlaps[CHAOS_OV_PAUSED], k.overlaps[CHAOS_OV_KILLED],
             k.overlaps[CHAOS_OV_REDIS_LOST]);
    else
        rule(&passed, &failed, live == 0, "overlaps",
             "%" PRIu64 " between live holders (%" PRIu64 " paused, %" PRIu64 " killed: expected)",
             live, k.overlaps[CHAOS_OV_PAUSED], k.overlaps[CHAOS_OV_KILLED]);
    rule(&passed, &failed, order_bad == 0 && dups == 0, "fences",
         "%" PRIu64 " out of order in entry order, %" PRIu64 " granted twice", order_bad, dups);
    rule(&passed, &failed, k.st_bad == 0 && k.st_counter_bad == 0, "stale",
         "%" PRIu64 " stale writes accepted", k.st_bad);
    rule(&passed, &failed,
         k.st_stopped && k.st_stale == k.st_refused && k.st_counter_ref == k.st_refused &&
             k.st_counter_acc == k.st_accepted,
         "refused", "%" PRIu64 " stale attempted, %" PRIu64 " refused, store counted %" PRIu64,
         k.st_stale, k.st_refused, k.st_counter_ref);
    if (k.workaround_keys >= 0)
        rule(&passed, &failed, k.keys_left == 0, "keys",
             "%d lock keys left in Redis (WORKAROUND on: %d were still there when the workers "
             "had exited; waited for them before stopping rlockd)", k.keys_left,
             k.workaround_keys);
    else
        rule(&passed, &failed, k.keys_left == 0, "keys",
             "%d lock keys left in Redis (and %d claims of withdrawn exclusive waiters, %d "
             "leader records, expiring: allowed)", k.keys_left, k.claims_left, k.leaders_left);
    rule(&passed, &failed, mem_ok, "memory", "%d incarnations judged, growth < %.0f%% each",
         measured, CK_GROWTH_LIMIT_PCT);
    int sanitized = ck_sanitizer_reports(&k);
    rule(&passed, &failed,
         k.crashes == 0 && k.workers_stuck == 0 && k.workers_failed == 0 && k.rlockd_clean == 1 &&
             k.terms_unclean == 0 && !k.fault_failed[0] && sanitized == 0,
         "processes",
         "%d crashes, %d workers stuck, %d failed, rlockd clean exit %s, %d sanitizer reports%s%s",
         k.crashes, k.workers_stuck, k.workers_failed, k.rlockd_clean == 1 ? "yes" : "no",
         sanitized, k.fault_failed[0] ? ", fault failed: " : "", k.fault_failed);
    rule(&passed, &failed, tail_grants > 0, "liveness", "%" PRIu64 " grants in the quiet tail",
         tail_grants);
    /* A worker holds one lock at a time and waits for one: no wait of this run can close a
     * cycle, so any DEADLOCK answer would be a false alarm. */
    rule(&passed, &failed, k.acq_fail[RLOCK_ERR_DEADLOCK] == 0, "deadlocks",
         "%" PRIu64 " acquires refused DEADLOCK (a worker holds one lock at a time: none is real)",
         k.acq_fail[RLOCK_ERR_DEADLOCK]);
    /* Two shared holders at once is all that tells shared mode from exclusive: a run that
     * asked for shared holds and never saw two together exercised nothing. */
    /* Judged with at least two workers per resource (8 on 4 by default): then overlaps come
     * by the dozen a minute; fewer workers may leave shared holders alone by chance. */
    int shared_judged = k.nworkers >= 2 * k.nres;
    if (k.shared_pct > 0)
        rule(&passed, &failed,
             !shared_judged || (k.shared_grants > 0 && k.overlaps[CHAOS_OV_SHARED] > 0), "shared",
             "%" PRIu64 " shared grants, %" PRIu64 " overlaps between live shared holders%s",
             k.shared_grants, k.overlaps[CHAOS_OV_SHARED],
             shared_judged ? "" : " (not judged: fewer than two workers per resource)");
    else
        rule(&passed, &failed, 1, "shared", "not asked for (--shared 0): %" PRIu64 " grants",
             k.shared_grants);
    if (k.sem_res >= 0) {
        /* As for overlaps: places Redis lost under their holders excuse an excess only
         * with two daemons (one daemon keeps them as tombstones). */
        uint64_t over = k.sem_over[CHAOS_OV_VIOLATION] +
                        (redis_lost_expected ? 0 : k.sem_over[CHAOS_OV_REDIS_LOST]);
        rule(&passed, &failed, over == 0, "limit",
             "%" PRIu64 " semaphore entries over its limit of %d between live holders (%" PRIu64
             " explained by paused holders, %" PRIu64 " by killed ones, %" PRIu64 " by places "
             "Redis lost%s)", over, k.sem_limit, k.sem_over[CHAOS_OV_PAUSED],
             k.sem_over[CHAOS_OV_KILLED], k.sem_over[CHAOS_OV_REDIS_LOST],
             redis_lost_expected ? ": expected with two daemons" : "");
        /* Holders inside together is what tells a semaphore from a lock. Judged with a
         * limit of 2 or more and at least as many workers as resources (8 on 6 by default):
         * then it comes by the dozen a minute. */
        int sem_judged = k.sem_limit >= 2 && k.nworkers >= k.nres_all;
        rule(&passed, &failed,
             !sem_judged || (k.sem_grants > 0 && k.sem_max_live_holders > 1), "semaphore",
             "%" PRIu64 " grants, up to %u live holders and %u permits inside at once%s",
             k.sem_grants, k.sem_max_live_holders, k.sem_max_live_permits,
             sem_judged ? "" : " (not judged: limit 1, or fewer workers than resources)");
    } else {
        rule(&passed, &failed, 1, "semaphore", "not in this run (--semaphore 0)");
    }
    if (k.elect_res >= 0) {
        rule(&passed, &failed,
             el.order_bad == 0 && el.read_bad == 0 && el.value_bad == 0 && el.unexplained == 0,
             "observed",
             "%" PRIu64 " terms out of order, %" PRIu64 " reads below a term shown, %" PRIu64
             " values of another worker, %" PRIu64 " terms nobody was granted (%" PRIu64
             " changes, %" PRIu64 " reads)", el.order_bad, el.read_bad, el.value_bad,
             el.unexplained, el.changes, el.reads);
        rule(&passed, &failed, k.leader_grants >= 2 && el.changes_elected >= 2, "election",
             "%" PRIu64 " terms granted to %d workers, %" PRIu64 " elected changes observed",
             k.leader_grants, el.leaders, el.changes_elected);
    } else {
        rule(&passed, &failed, 1, "election", "not in this run (--election 0)");
    }
    if (k.ndaemons > 1)
        rule(&passed, &failed, resumes > 0, "moves", "%" PRIu64 " sessions resumed", resumes);
    rule(&passed, &failed, k.session_ends_protocol == 0, "protocol",
         "%" PRIu64 " sessions ended over a frame one side could not take",
         k.session_ends_protocol);

    if (k.violations.n) {
        printf("  violations (first 20 of %zu):\n", k.violations.n);
        for (size_t i = 0; i < k.violations.n && i < 20; i++)
            printf("    %s\n", k.violations.v[i]);
    }
    if (k.late_lines.n && (verbose || k.late_lines.n <= 5)) {
        printf("  accepted after a newer grant, writer not paused:\n");
        for (size_t i = 0; i < k.late_lines.n && (verbose || i < 5); i++)
            printf("    %s\n", k.late_lines.v[i]);
    }
    printf("chaos: %d passed, %d failed\n", passed, failed);
    for (size_t i = 0; i < k.violations.n; i++)
        free(k.violations.v[i]);
    for (size_t i = 0; i < k.late_lines.n; i++)
        free(k.late_lines.v[i]);
    free(k.violations.v);
    free(k.late_lines.v);
    free(k.grants.v);
    free(k.enters.v);
    free(k.paused_seqs.v);
    free(k.attempts.v);
    free(k.obs.v);
    return failed == 0 ? 0 : 1;
}
