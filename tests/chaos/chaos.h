/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * chaos.h — the chaos test of rlockd and librlock (rlock-chaos): what its
 * processes share.
 *
 * One executable plays four parts, chosen by its first argument:
 *
 *   rlock-chaos [options]           the driver: starts redis-server, rlockd,
 *                                   the fenced store and the workers, runs the
 *                                   nemesis, then the offline check
 *   rlock-chaos --worker ...        one worker (exec'd by the driver)
 *   rlock-chaos --store ...         the fenced store (exec'd by the driver)
 *   rlock-chaos --check DIR         the offline check alone, on a kept run
 *
 * Workers and the store are exec'd, not merely forked: the driver uses
 * librlock (to see that rlockd serves), and a fork of a process running the
 * library's threads is no place to open new clients.
 *
 * They share one file, DIR/chaos.shm, mapped MAP_SHARED: the referee (who is
 * inside which resource's critical section), the nemesis's marks (who was
 * paused during which hold, who is being killed) and live counters. Every
 * field two processes touch is atomic. Everything else goes through history
 * files, one line per event, written with write(2) on O_APPEND so that a
 * kill -9 loses nothing that was logged; the offline check (chaos_check.c)
 * reads them back. See README.md beside this file for the design.
 */
#ifndef RLOCK_CHAOS_H
#define RLOCK_CHAOS_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CHAOS_MAX_WORKERS 32
#define CHAOS_MAX_RES 16
#define CHAOS_SHM_MAGIC 0x43484153u /* "CHAS" */

/*
 * Timing of the whole run. The session timeout and the ttls are short so that
 * every fault bites within seconds; command_timeout stays below min_ttl/3 as
 * the daemon's configuration requires.
 */
#define CHAOS_SESSION_TIMEOUT_MS 1500u
#define CHAOS_TTL_MIN_MS 1500u
#define CHAOS_TTL_MAX_MS 3000u
#define CHAOS_COMMAND_TIMEOUT_MS 300u
/* The lock_delay asked for on odd-numbered resources (see the worker). */
#define CHAOS_LOCK_DELAY_MS 1000u
/* max_hold asked for on the last resource, which is sometimes held longer. */
#define CHAOS_MAX_HOLD_MS 1000u

/*
 * How much validity a worker wants left before it acts on a lock: enough for
 * the gap before a write, the write itself and a slice of work, with room
 * for the scheduling of a loaded two-core machine.
 */
#define CHAOS_VALID_MARGIN_MS 250

/* Phases of a worker, in its shared slot (what the nemesis aims at). */
enum chaos_phase {
    CHAOS_PH_IDLE = 0,    /* not holding anything (connecting, acquiring, released) */
    CHAOS_PH_INSIDE = 1,  /* inside the referee: holding, working */
    CHAOS_PH_CHECKED = 2, /* inside, state checked, the write not yet sent: the gap a
                             paused writer turns into a stale write */
};

/*
 * Classes of an overlap seen by the referee, as the entrant judged the occupant.
 * The first four are overlaps that involve an exclusive holder (the entrant, the
 * occupant or both); the last two are two shared holders at once, which is what
 * shared mode is for: counted, to show the mix exercised it, never a violation.
 */
enum chaos_overlap {
    CHAOS_OV_PAUSED = 0,    /* the occupant was paused by the nemesis during this hold */
    CHAOS_OV_KILLED = 1,    /* the occupant was being killed by the nemesis (it is dead) */
    CHAOS_OV_VIOLATION = 2, /* neither: two live holders at once */
    CHAOS_OV_REDIS_LOST = 3, /* two live holders, the occupant's key lost with a Redis restart
                                during its hold: a violation too, told apart for its cause */
    CHAOS_OV_SHARED = 4,    /* both shared, the occupant neither paused nor killed: allowed */
    CHAOS_OV_SHARED_FAULTED = 5, /* both shared, the occupant paused or being killed */
};
/*
 * A semaphore's entrant that finds more than the limit of permits inside (with its
 * own) is classed with the first four, by what explains the excess: PAUSED when the
 * permits of occupants paused in their hold do, KILLED when those and the killed
 * ones' do, REDIS_LOST when those and the ones whose places a Redis restart lost
 * do, else VIOLATION (README.md "Semaphores").
 */
#define CHAOS_OV_KINDS 6

/*
 * The referee's occupant word of a resource: bit i while worker slot i is
 * inside holding it exclusive, bit CHAOS_SHARED_SHIFT + i while it is inside
 * holding it shared. One word, so that one atomic_fetch_or tells an entrant
 * exactly who was inside, and in which mode.
 */
#define CHAOS_SHARED_SHIFT 32
static inline uint64_t chaos_occupant_bit(int slot, int shared)
{
    return UINT64_C(1) << (slot + (shared ? CHAOS_SHARED_SHIFT : 0));
}

/*
 * The semaphore resource (--semaphore N, README.md "Semaphores"): its occupant
 * word holds, besides who is inside (the shared bits: every holder of a
 * semaphore is one of a group), the permits they hold in its low 32 bits. An
 * entrant adds its bit plus its permits in one atomic_fetch_add (its bit is
 * never set already: a slot holds one lock at a time), so the word before it
 * says exactly who was inside and how many permits they held. No holder of
 * the semaphore's name is ever exclusive (a lock acquire there is WRONG_KIND),
 * so the low bits are free.
 */
#define CHAOS_SEM_LIMIT 3      /* --semaphore default: the semaphore's limit */
#define CHAOS_SEM_LIMIT_MAX 64
#define CHAOS_SEM_TWO_PCT 25   /* per cent of semaphore acquires that take 2 permits */
static inline uint64_t chaos_sem_word(int slot, uint32_t permits)
{
    return chaos_occupant_bit(slot, 1) + permits;
}
#define CHAOS_SEM_PERMITS(word) ((uint32_t)((word) & 0xffffffffu))

/* Per cent of acquires that ask for a shared hold on resource 0, which is
 * read-mostly (--shared; the other resources get a third of it). */
#define CHAOS_SHARED_PCT 70
static inline int chaos_shared_pct(int pct, int res)
{
    return res == 0 ? pct : pct / 3;
}

/* One worker's shared slot. pid 0: the slot is empty (between incarnations). */
struct chaos_slot {
    _Atomic int pid;
    _Atomic int phase;           /* enum chaos_phase */
    _Atomic int inside;          /* the resource it is inside, or -1 */
    _Atomic uint64_t hold_seq;   /* the referee's sequence number of its current hold */
    _Atomic uint64_t fence;      /* of its current hold */
    _Atomic uint64_t paused_seq; /* the hold during which the nemesis paused it (0: none) */
    _Atomic int killed;          /* set by the nemesis before SIGKILL, cleared at respawn */
    _Atomic int64_t valid_until_ms; /* the validity its latest check relied on */
    _Atomic int long_hold;       /* its current hold is a long one (what server faults aim at) */
    _Atomic int shared;          /* its current hold is a shared one */
    _Atomic uint64_t enter_epoch; /* redis_epoch when it entered its current hold */
    _Atomic uint32_t permits;    /* its current hold's permits (a semaphore's; 0 otherwise) */
};

struct chaos_shm {
    uint32_t magic;
    int nworkers;
    int nres;
    _Atomic int stop;              /* workers finish their hold and exit */
    _Atomic uint64_t seq;          /* referee sequence: one number per entry, all resources */
    _Atomic uint64_t redis_epoch;  /* bumped when the nemesis restarts Redis (keys lost) */
    int shared_pct;                /* per cent of acquires asked shared on resource 0 (the others
                                      get a third of it); 0: every acquire exclusive */
    /* The resources: nres locks (chaos/r<i>, exclusive and shared), then the semaphore
     * (chaos/sem, index sem_res, when sem_limit > 0) and the election (chaos/leader,
     * index elect_res); -1: not in this run. nres_all counts them all. */
    int nres_all;
    int sem_res;
    int sem_limit;
    int elect_res;
    _Atomic uint64_t occupants[CHAOS_MAX_RES]; /* chaos_occupant_bit(i, shared): slot i inside */
    struct chaos_slot slots[CHAOS_MAX_WORKERS];
    /* Live counters (the offline check recounts from the histories). */
    _Atomic uint64_t grants;
    _Atomic uint64_t shared_grants;
    _Atomic uint64_t sem_grants;
    _Atomic uint64_t leader_grants;
    _Atomic uint64_t leader_events; /* on_leader callbacks of every worker */
    _Atomic uint64_t overlaps[CHAOS_OV_KINDS]; /* by enum chaos_overlap */
    _Atomic uint64_t writes_accepted;
    _Atomic uint64_t writes_refused; /* stale writes the store refused */
    _Atomic uint64_t writes_bad;     /* accepted though stale, or a fence reused: must stay 0 */
};

/* Map DIR/chaos.shm (create = 1: create and size it). NULL after printing why. */
struct chaos_shm *chaos_shm_map(const char *dir, int create);

/* Microseconds on CLOCK_MONOTONIC: one clock for every process of the run. */
int64_t chaos_now_us(void);
static inline int64_t chaos_now_ms(void)
{
    return chaos_now_us() / 1000;
}
void chaos_sleep_ms(int ms);

/* A small xorshift generator; each process seeds its own. */
struct chaos_rng {
    uint64_t s;
};
void chaos_rng_seed(struct chaos_rng *r, uint64_t seed);
uint64_t chaos_rng_next(struct chaos_rng *r);
/* Uniform in [lo, hi]. */
uint32_t chaos_rng_range(struct chaos_rng *r, uint32_t lo, uint32_t hi);

/*
 * A history file: open DIR/name for appending (O_APPEND, no buffering) and
 * write one line per call, "<us> <text>\n", in one write(2) so that lines of
 * several threads or processes never interleave.
 */
int chaos_log_open(const char *dir, const char *name);
void chaos_log(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void chaos_vlog(int fd, const char *fmt, va_list ap);

/* The resource name of index i ("chaos/r<i>", "chaos/sem", "chaos/leader"), into buf. */
const char *chaos_res_name(const struct chaos_shm *m, int i, char *buf, size_t len);

/* --- the fenced store's wire format (SOCK_SEQPACKET on DIR/store.sock) --- */

struct chaos_write {
    uint32_t slot;
    int32_t pid;
    uint32_t res;
    int32_t believed;  /* enum rlock_lock_state the writer saw at its last check */
    uint64_t fence;
    uint64_t hold_seq; /* identifies the hold: two holds never share a fence */
    int32_t shared;    /* the writer holds the lock shared, or a semaphore's permits */
    uint32_t permits;  /* a semaphore holder's permits; 0: a lock's write */
};

/*
 * The store's rule (chaos_store.c, README.md "The fenced store"): an exclusive
 * write (a leader's too: its fence is its term) is stale below the highest fence
 * accepted from any write; a shared write is stale below the highest fence
 * accepted from an exclusive write. Shared writes among themselves may come in
 * any order, and so may a semaphore's holders' writes, judged as shared ones
 * (README.md "Semaphores").
 */
enum chaos_verdict {
    CHAOS_W_ACCEPTED = 1, /* fence not below what the writer's mode is judged against */
    CHAOS_W_REFUSED = 2,  /* below it: a stale write, refused */
};

struct chaos_reply {
    int32_t verdict;      /* enum chaos_verdict */
    uint32_t pad;
    uint64_t highest;     /* the store's highest fence for the resource after this write */
};

/* --- the parts --------------------------------------------------------------- */

int chaos_worker_main(int argc, char **argv);
int chaos_store_main(int argc, char **argv);
/* Check the histories in dir; print the report to stdout. 0 when every rule held. */
int chaos_check_run(const char *dir, int verbose);

#endif
