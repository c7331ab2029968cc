/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * chaos_main.c — rlock-chaos: the driver of the chaos test, and the entry
 * point of its other parts (see chaos.h).
 *
 *   rlock-chaos [--seconds N] [--workers N] [--resources N] [--seed N] [--keep]
 *               [--daemons 1|2] [--shared PCT] [--semaphore N] [--election 0|1]
 *               [--workaround-shutdown-keys] [--workaround-redis-delayed-restart]
 *   rlock-chaos --check DIR [--verbose]
 *
 * The driver makes a temp dir (unix sockets only), starts redis-server and
 * rlockd there through the integration harness, then the fenced store and
 * the workers, and runs the nemesis until 10 s before the end (the quiet
 * tail lets every fault's leftovers expire). Then it stops the workers
 * (they release and close cleanly), stops rlockd with SIGTERM, looks for
 * lock keys left in Redis, stops the store and Redis, and runs the offline
 * check on the histories. With --daemons 2 a second rlockd shares Redis and
 * a resume key (DIR/resume.key) with the first, the workers are given both
 * addresses, and the nemesis also pauses an rlockd and stops one with SIGTERM
 * (a handover): sessions move to the other daemon and resume there. Beside
 * the --resources locks the workers use a semaphore (--semaphore N, its limit;
 * 0: none) and campaign in an election that each of them observes (--election
 * 0: none). Exit status 0 only when every rule held. The dir
 * is removed after a passing run unless --keep; a failing run keeps it as
 * evidence and prints its path.
 *
 * The --workaround-* switches sidestep known daemon bugs (README.md): one
 * waits, at most a ttl, for lock keys to go before stopping rlockd; the other
 * keeps Redis down longer than any lease when the nemesis restarts it.
 *
 * Every process is a child of this one, started with PR_SET_PDEATHSIG, and
 * is signalled by pid only; SIGINT/SIGTERM end the run early through the
 * same teardown.
 */
#include "chaos_driver.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define DRV_QUIET_TAIL_MS 10000
#define DRV_WORKER_STOP_MS 20000
#define DRV_STOP_GRACE_MS 10000
#define DRV_KEY_PREFIX "chaos:"

static struct driver *drv_signalled;

static void drv_on_signal(int sig)
{
    (void)sig;
    if (drv_signalled)
        drv_signalled->interrupted = 1;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* --- children ------------------------------------------------------------ */

struct h_env *drv_daemon(struct driver *d, int i)
{
    return i == 0 ? &d->e : &d->peer;
}

int drv_daemon_start(struct driver *d, int i)
{
    struct h_env *e = drv_daemon(d, i);
    int rc = h_rlockd_start(e);
    if (rc == 0)
        chaos_log(d->log, "RLOCKD_START %d", (int)e->rlockd_pid);
    return rc;
}

void drv_sample_rss(struct driver *d)
{
    for (int i = 0; i < d->ndaemons; i++) {
        pid_t pid = drv_daemon(d, i)->rlockd_pid;
        if (pid <= 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
        char *status = h_read_file(path);
        const char *p = status ? strstr(status, "VmRSS:") : NULL;
        if (p)
            chaos_log(d->log, "RSS %d %ld", (int)pid, strtol(p + 6, NULL, 10));
        free(status);
    }
}

void drv_clear_slot(struct driver *d, int i)
{
    uint64_t bits = chaos_occupant_bit(i, 0) | chaos_occupant_bit(i, 1);
    struct chaos_slot *s = &d->m->slots[i];
    for (int r = 0; r < d->m->nres_all; r++) {
        if (r != d->m->sem_res) {
            atomic_fetch_and(&d->m->occupants[r], ~bits);
            continue;
        }
        /* The semaphore's word also sums the permits inside: take the dead worker's
         * out with its bit. Nobody else touches its bit, and it is dead (reaped). */
        uint64_t bit = chaos_occupant_bit(i, 1);
        if (atomic_load(&d->m->occupants[r]) & bit)
            atomic_fetch_sub(&d->m->occupants[r], bit + atomic_load(&s->permits));
    }
    atomic_store(&s->pid, 0);
    atomic_store(&s->phase, CHAOS_PH_IDLE);
    atomic_store(&s->inside, -1);
    atomic_store(&s->paused_seq, 0);
    atomic_store(&s->long_hold, 0);
    atomic_store(&s->shared, 0);
    atomic_store(&s->permits, 0);
    atomic_store(&s->killed, 0);
}

int drv_spawn_worker(struct driver *d, int i)
{
    char slot[16], seed[32], out[320], name[32];
    snprintf(slot, sizeof slot, "%d", i);
    snprintf(seed, sizeof seed, "%" PRIu64, d->seed + (uint64_t)i);
    snprintf(name, sizeof name, "w%d.out", i);
    h_env_path(&d->e, name, out, sizeof out);
    char *argv[] = { d->self, "--worker", d->e.dir, slot, d->worker_addr, seed, NULL };
    pid_t pid = h_spawn_io(argv, out, out);
    if (pid < 0)
        return -1;
    atomic_store(&d->m->slots[i].pid, pid);
    return 0;
}

/* A child that ended without being asked to: logged as a crash, with its output. */
static void drv_crash(struct driver *d, const char *what, pid_t pid, const char *out)
{
    int status = 0;
    h_wait_exit(pid, 0, &status);
    char st[32];
    h_status_str(status, st, sizeof st);
    d->crashes++;
    chaos_log(d->log, "CRASH %s %d %s", what, (int)pid, st);
    fprintf(stderr, "chaos: %s (pid %d) ended by itself: %s\n", what, (int)pid, st);
    if (out)
        h_print_tail(out, 20);
}

void drv_tick(struct driver *d)
{
    char path[320], name[32];
    for (int i = 0; i < d->nworkers; i++) {
        struct chaos_slot *s = &d->m->slots[i];
        pid_t pid = atomic_load(&s->pid);
        if (pid <= 0 || atomic_load(&s->killed) || atomic_load(&d->m->stop) || h_alive(pid))
            continue;
        snprintf(name, sizeof name, "w%d.out", i);
        drv_crash(d, "worker", pid, h_env_path(&d->e, name, path, sizeof path));
        drv_clear_slot(d, i);
        drv_spawn_worker(d, i);
    }
    for (int i = 0; i < d->ndaemons; i++) {
        struct h_env *e = drv_daemon(d, i);
        if (e->rlockd_pid > 0 && !h_alive(e->rlockd_pid)) {
            drv_crash(d, "rlockd", e->rlockd_pid, h_env_path(e, "rlockd.log", path, sizeof path));
            e->rlockd_pid = 0;
            drv_daemon_start(d, i);
        }
    }
    if (d->e.redis_pid > 0 && !h_alive(d->e.redis_pid)) {
        drv_crash(d, "redis-server", d->e.redis_pid,
                  h_env_path(&d->e, "redis.log", path, sizeof path));
        d->e.redis_pid = 0;
        h_redis_start(&d->e);
    }
    if (d->store_pid > 0 && !h_alive(d->store_pid)) {
        drv_crash(d, "store", d->store_pid, h_env_path(&d->e, "store.out", path, sizeof path));
        d->store_pid = 0;
        d->interrupted = 1; /* the workers cannot write without it: end the run */
    }
    int64_t now = chaos_now_ms();
    if (now >= d->next_rss_ms) {
        drv_sample_rss(d);
        d->next_rss_ms = now + 1000;
    }
}

void drv_idle(struct driver *d, int ms)
{
    int64_t until = chaos_now_ms() + ms;
    for (;;) {
        drv_tick(d);
        int64_t left = until - chaos_now_ms();
        if (left <= 0)
            return;
        chaos_sleep_ms(left < 10 ? (int)left : 10);
    }
}

/* --- setup --------------------------------------------------------------- */

/*
 * rlockd's config for env e. Short session timeout and ttls so that faults
 * bite within seconds; command_timeout at most min_ttl/3; lock_delay asked
 * per acquire. Metrics on a unix socket in the daemon's dir (no port to
 * share or find taken). Two daemons share the resume key in the run's dir,
 * and hand their sessions over on SIGTERM, waiting for them at most a few
 * seconds.
 */
static int drv_write_conf(struct driver *d, const struct h_env *e)
{
    char resume[640] = "";
    if (d->ndaemons > 1)
        snprintf(resume, sizeof resume, "resume_key_file = %s/resume.key\n", d->e.dir);
    char conf[2048];
    snprintf(conf, sizeof conf,
             "[server]\nlisten = %s\nshutdown_timeout = 5s\n%s\n"
             "[redis]\naddress = unix:%s\nkey_prefix = %s\ncommand_timeout = %ums\n"
             "connect_timeout = 500ms\nreconnect_max = 500ms\n\n"
             "[session]\ntimeout = %ums\nmin_timeout = 1s\n%s\n"
             "[limits]\ndefault_ttl = %ums\nmin_ttl = %ums\nmax_ttl = %ums\nmax_wait = 5s\n"
             "max_lock_delay = 2s\n\n[metrics]\nlisten = unix:%s/metrics.sock\n\n"
             "[log]\nlevel = info\n",
             e->rlockd_addr, d->ndaemons > 1 ? "handover_timeout = 5s\n" : "", e->redis_sock,
             e->prefix, CHAOS_COMMAND_TIMEOUT_MS, CHAOS_SESSION_TIMEOUT_MS, resume,
             CHAOS_TTL_MIN_MS, CHAOS_TTL_MIN_MS, CHAOS_TTL_MAX_MS, e->dir);
    if (write_text(e->conf, conf) != 0) {
        fprintf(stderr, "chaos: cannot write %s\n", e->conf);
        return -1;
    }
    return 0;
}

static int drv_setup_env(struct driver *d)
{
    struct h_env *e = &d->e;
    memset(e, 0, sizeof *e);
    const char *base = getenv("TMPDIR");
    snprintf(e->dir, sizeof e->dir, "%s/rlock-chaos.XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(e->dir)) {
        fprintf(stderr, "chaos: mkdtemp %s: %s\n", e->dir, strerror(errno));
        return -1;
    }
    h_env_path(e, "redis.sock", e->redis_sock, sizeof e->redis_sock);
    h_env_path(e, "rlockd.sock", e->rlockd_sock, sizeof e->rlockd_sock);
    h_env_path(e, "rlockd.conf", e->conf, sizeof e->conf);
    snprintf(e->rlockd_addr, sizeof e->rlockd_addr, "unix:%s", e->rlockd_sock);
    snprintf(e->prefix, sizeof e->prefix, DRV_KEY_PREFIX);
    char store_sock[320];
    h_env_path(e, "store.sock", store_sock, sizeof store_sock);
    if (strlen(store_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        fprintf(stderr, "chaos: socket paths too long under %s (set TMPDIR shorter)\n", e->dir);
        return -1;
    }
    snprintf(d->worker_addr, sizeof d->worker_addr, "%s", e->rlockd_addr);
    if (drv_write_conf(d, e) != 0)
        return -1;
    if (d->ndaemons < 2)
        return 0;
    /* The second rlockd: a dir of its own (socket, config, log) on the same Redis. */
    struct h_env *b = &d->peer;
    memset(b, 0, sizeof *b);
    h_env_path(e, "b", b->dir, sizeof b->dir);
    if (mkdir(b->dir, 0700) != 0) {
        fprintf(stderr, "chaos: mkdir %s: %s\n", b->dir, strerror(errno));
        return -1;
    }
    snprintf(b->redis_sock, sizeof b->redis_sock, "%s", e->redis_sock);
    b->redis_shared = 1;
    h_env_path(b, "rlockd.sock", b->rlockd_sock, sizeof b->rlockd_sock);
    h_env_path(b, "rlockd.conf", b->conf, sizeof b->conf);
    snprintf(b->rlockd_addr, sizeof b->rlockd_addr, "unix:%s", b->rlockd_sock);
    snprintf(b->prefix, sizeof b->prefix, "%s", e->prefix);
    if (strlen(b->rlockd_sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        fprintf(stderr, "chaos: socket paths too long under %s (set TMPDIR shorter)\n", e->dir);
        return -1;
    }
    snprintf(d->worker_addr, sizeof d->worker_addr, "%s,%s", e->rlockd_addr, b->rlockd_addr);
    return drv_write_conf(d, b);
}

static int drv_start(struct driver *d)
{
    if (drv_setup_env(d) != 0)
        return -1;
    d->m = chaos_shm_map(d->e.dir, 1);
    if (!d->m)
        return -1;
    d->m->nworkers = d->nworkers;
    d->m->nres = d->nres;
    d->m->shared_pct = d->shared_pct;
    /* The semaphore and the election come after the locks: chaos/r<i> keep their options. */
    d->m->nres_all = d->nres;
    d->m->sem_limit = d->sem_limit;
    d->m->sem_res = d->sem_limit > 0 ? d->m->nres_all++ : -1;
    d->m->elect_res = d->election ? d->m->nres_all++ : -1;
    d->log = chaos_log_open(d->e.dir, "run.log");
    if (d->log < 0)
        return -1;
    chaos_log(d->log, "SEED %" PRIu64 " %d %d %d", d->seed, d->seconds, d->nworkers, d->nres);
    chaos_log(d->log, "DAEMONS %d", d->ndaemons);
    chaos_log(d->log, "SHARED %d %d", d->shared_pct, chaos_shared_pct(d->shared_pct, 1));
    chaos_log(d->log, "KINDS sem_res=%d sem_limit=%d elect_res=%d", d->m->sem_res, d->sem_limit,
              d->m->elect_res);
    chaos_log(d->log, "WORKAROUNDS shutdown_keys=%d redis_delayed_restart=%d", d->workaround_keys,
              d->workaround_redis);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* rlockd comes from the same build: its RSS then holds the sanitizer's quarantine. */
    chaos_log(d->log, "SANITIZED_BUILD 1");
#endif
    if (h_redis_start(&d->e) != 0)
        return -1;
    /* In order: the first creates the resume key the second reads. */
    for (int i = 0; i < d->ndaemons; i++)
        if (drv_daemon_start(d, i) != 0)
            return -1;

    char out[320];
    h_env_path(&d->e, "store.out", out, sizeof out);
    char *argv[] = { d->self, "--store", d->e.dir, NULL };
    d->store_pid = h_spawn_io(argv, out, out);
    if (d->store_pid < 0)
        return -1;
    char sock[320];
    h_env_path(&d->e, "store.sock", sock, sizeof sock);
    int64_t deadline = chaos_now_ms() + 5000;
    while (access(sock, F_OK) != 0) {
        if (chaos_now_ms() >= deadline || !h_alive(d->store_pid)) {
            fprintf(stderr, "chaos: the fenced store did not start\n");
            h_print_tail(out, 20);
            return -1;
        }
        chaos_sleep_ms(10);
    }
    for (int i = 0; i < d->nworkers; i++)
        if (drv_spawn_worker(d, i) != 0)
            return -1;
    return 0;
}

/* --- teardown ------------------------------------------------------------ */

/*
 * Lock keys (not fence keys) of the run in Redis, each logged when record. -1 on
 * error. A claim key (PREFIX{r}:claim: an exclusive waiter behind shared holds
 * holding off new ones) is left by a waiter that was withdrawn (cancelled, timed
 * out, its session closed): by design it lapses by itself a few seconds after
 * its last try (docs/protocol.md §6.2). It is not counted while it has an expiry;
 * *claims gets how many there were (logged CLAIMLEFT when record). Likewise an
 * election's leader record (PREFIX{e}:leader), which nobody deletes when its leader
 * goes: it expires with the leader's lock (renew.lua keeps them together) and names
 * nobody once the lock key holds another token (docs/protocol.md §6.11); one
 * without an expiry would be a leak. *leaders gets how many had one (LEADERLEFT).
 */
static int drv_count_lock_keys(struct driver *d, int record, int *claims, int *leaders)
{
    redisContext *r = h_redis(&d->e);
    if (!r)
        return -1;
    int left = 0;
    char cursor[32] = "0";
    do {
        redisReply *rep = redisCommand(r, "SCAN %s MATCH %s* COUNT 1000", cursor, d->e.prefix);
        if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
            if (rep)
                freeReplyObject(rep);
            redisFree(r);
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        redisReply *keys = rep->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            const char *k = keys->element[i]->str;
            size_t n = strlen(k);
            if (n >= 6 && strcmp(k + n - 6, ":fence") == 0)
                continue;
            if (n >= 7 && strcmp(k + n - 7, ":leader") == 0 && h_pttl(r, k) > 0) {
                if (record)
                    chaos_log(d->log, "LEADERLEFT %s pttl=%lld", k, h_pttl(r, k));
                if (leaders)
                    (*leaders)++;
                continue;
            }
            if (n >= 6 && strcmp(k + n - 6, ":claim") == 0 && h_pttl(r, k) > 0) {
                if (record) {
                    char val[128] = "";
                    h_get(r, k, val, sizeof val);
                    chaos_log(d->log, "CLAIMLEFT %s %s pttl=%lld", k, val, h_pttl(r, k));
                }
                if (claims)
                    (*claims)++;
                continue;
            }
            if (record) {
                char val[128] = "";
                h_get(r, k, val, sizeof val);
                chaos_log(d->log, "KEYLEFT %s %s pttl=%lld", k, val, h_pttl(r, k));
            }
            left++;
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    redisFree(r);
    return left;
}

/* Resume anything the nemesis may have left stopped (an interrupted pause). */
static void drv_resume_all(struct driver *d)
{
    for (int i = 0; i < d->nworkers; i++) {
        pid_t pid = atomic_load(&d->m->slots[i].pid);
        if (pid > 0)
            kill(pid, SIGCONT);
    }
    if (d->e.redis_pid > 0)
        kill(d->e.redis_pid, SIGCONT);
    for (int i = 0; i < d->ndaemons; i++)
        if (drv_daemon(d, i)->rlockd_pid > 0)
            kill(drv_daemon(d, i)->rlockd_pid, SIGCONT);
}

/* Stop everything, recording what the teardown found. 0 when it all went as it should. */
static int drv_teardown(struct driver *d, int started)
{
    int bad = 0;
    if (d->m) {
        drv_resume_all(d);
        if (started)
            drv_sample_rss(d);
        atomic_store(&d->m->stop, 1);
        int64_t deadline = chaos_now_ms() + DRV_WORKER_STOP_MS;
        int stuck = 0, failed = 0;
        for (int i = 0; i < d->nworkers; i++) {
            pid_t pid = atomic_load(&d->m->slots[i].pid);
            if (pid <= 0)
                continue;
            int64_t left = deadline - chaos_now_ms();
            int status = 0;
            if (h_wait_exit(pid, left > 0 ? (int)left : 0, &status) != 0) {
                stuck++;
                kill(pid, SIGKILL);
                h_wait_exit(pid, 5000, &status);
            } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                failed++;
            }
        }
        chaos_log(d->log, "RESULT workers_stuck %d", stuck);
        chaos_log(d->log, "RESULT workers_failed %d", failed);
        bad |= stuck || failed;
    }
    if (d->workaround_keys && d->ndaemons == 1 && d->e.rlockd_pid > 0 && d->e.redis_pid > 0) {
        /*
         * Opt-in workaround (--workaround-shutdown-keys): rlockd defers the
         * delete of a lock lost by max_hold or expiry until the validity its
         * holder was promised is over, and a SIGTERM meanwhile exits without
         * it ("unconfirmed deletes still pending; those keys expire by
         * ttl"). Waiting here, at most a ttl, lets those deletes run first.
         */
        int64_t t0 = chaos_now_ms();
        int first = drv_count_lock_keys(d, 0, NULL, NULL), n = first;
        while (n > 0 && chaos_now_ms() - t0 < (int64_t)CHAOS_TTL_MAX_MS + 1000) {
            chaos_sleep_ms(50);
            n = drv_count_lock_keys(d, 0, NULL, NULL);
        }
        chaos_log(d->log, "RESULT workaround_keys_before_stop %d waited_ms=%lld", first,
                  (long long)(chaos_now_ms() - t0));
    }
    if (d->e.rlockd_pid > 0) {
        /* The second first: the first's log and pid are the run's reference. */
        int clean = 1;
        for (int i = d->ndaemons - 1; i >= 0; i--) {
            struct h_env *e = drv_daemon(d, i);
            int status = 0;
            int in_time = e->rlockd_pid > 0 ? h_stop_pid(e->rlockd_pid, SIGTERM,
                                                         DRV_STOP_GRACE_MS, "rlockd", &status)
                                            : -1;
            e->rlockd_pid = 0;
            clean &= in_time == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        }
        chaos_log(d->log, "RESULT rlockd_clean_exit %d", clean);
        bad |= !clean;
    }
    if (d->e.redis_pid > 0 && d->log >= 0) {
        int claims = 0, leaders = 0;
        int left = drv_count_lock_keys(d, 1, &claims, &leaders);
        chaos_log(d->log, "RESULT lock_keys_left %d", left);
        chaos_log(d->log, "RESULT claim_keys_left %d", claims);
        chaos_log(d->log, "RESULT leader_records_left %d", leaders);
        bad |= left != 0;
    }
    if (d->store_pid > 0) {
        int status = 0;
        h_stop_pid(d->store_pid, SIGTERM, DRV_STOP_GRACE_MS, "store", &status);
        d->store_pid = 0;
    }
    h_stop_pid(d->e.redis_pid, SIGTERM, DRV_STOP_GRACE_MS, "redis-server", NULL);
    d->e.redis_pid = 0;
    if (d->log >= 0)
        chaos_log(d->log, "RESULT crashes %d", d->crashes);
    return bad;
}

/* --- the run ------------------------------------------------------------- */

static int drv_run(struct driver *d)
{
    d->start_ms = chaos_now_ms();
    d->end_ms = d->start_ms + (int64_t)d->seconds * 1000;
    d->last_rlockd_kill_ms = d->start_ms - 1000000;
    int64_t quiet_ms = d->end_ms - DRV_QUIET_TAIL_MS;
    int index = 0;
    printf("chaos: seed %" PRIu64 ", %d s, %d workers, %d resources, shared %d%% on r0 and "
           "%d%% elsewhere, dir %s\n", d->seed, d->seconds, d->nworkers, d->nres, d->shared_pct,
           chaos_shared_pct(d->shared_pct, 1), d->e.dir);
    if (d->m->sem_res >= 0)
        printf("chaos: semaphore chaos/sem (r%d), limit %d\n", d->m->sem_res, d->sem_limit);
    if (d->m->elect_res >= 0)
        printf("chaos: election chaos/leader (r%d), observed by every worker\n", d->m->elect_res);
    fflush(stdout);
    drv_idle(d, 3000); /* let the workers get going before the first fault */
    while (!d->interrupted && chaos_now_ms() < quiet_ms) {
        enum chaos_fault f = nemesis_pick(d, index);
        int rc = nemesis_run(d, f);
        if (rc < 0) {
            fprintf(stderr, "chaos: fault %s left the system unable to go on\n",
                    chaos_fault_names[f]);
            chaos_log(d->log, "RESULT fault_failed %s", chaos_fault_names[f]);
            return -1;
        }
        if (rc == 0)
            index++;
        int64_t pause = chaos_rng_range(&d->rng, 1500, 5000);
        int64_t left = quiet_ms - chaos_now_ms();
        drv_idle(d, (int)(pause < left ? pause : left > 0 ? left : 0));
    }
    int64_t left = d->end_ms - chaos_now_ms();
    if (!d->interrupted && left > 0)
        drv_idle(d, (int)left);
    return d->interrupted ? -1 : 0;
}

static int drv_main(int argc, char **argv)
{
    static struct driver d;
    d.seconds = 240;
    d.nworkers = 8;
    d.nres = 4;
    d.seed = (uint64_t)chaos_now_us() ^ ((uint64_t)getpid() << 40);
    d.log = -1;
    d.ndaemons = 1;
    d.shared_pct = CHAOS_SHARED_PCT;
    d.sem_limit = CHAOS_SEM_LIMIT;
    d.election = 1;
    int keep = 0;
    static const struct option opts[] = {
        { "seconds", required_argument, NULL, 's' }, { "workers", required_argument, NULL, 'w' },
        { "resources", required_argument, NULL, 'r' }, { "seed", required_argument, NULL, 'S' },
        { "keep", no_argument, NULL, 'k' }, { "daemons", required_argument, NULL, 'd' },
        { "shared", required_argument, NULL, 'H' },
        { "semaphore", required_argument, NULL, 'M' },
        { "election", required_argument, NULL, 'E' },
        { "workaround-shutdown-keys", no_argument, NULL, 'K' },
        { "workaround-redis-delayed-restart", no_argument, NULL, 'R' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "s:w:r:S:kd:", opts, NULL)) != -1) {
        switch (c) {
        case 's': d.seconds = atoi(optarg); break;
        case 'w': d.nworkers = atoi(optarg); break;
        case 'r': d.nres = atoi(optarg); break;
        case 'S': d.seed = strtoull(optarg, NULL, 10); break;
        case 'k': keep = 1; break;
        case 'd': d.ndaemons = atoi(optarg); break;
        case 'H': d.shared_pct = atoi(optarg); break;
        case 'M': d.sem_limit = atoi(optarg); break;
        case 'E': d.election = atoi(optarg); break;
        case 'K': d.workaround_keys = 1; break;
        case 'R': d.workaround_redis = 1; break;
        default:
            fprintf(stderr, "usage: rlock-chaos [--seconds N] [--workers N] [--resources N] "
                            "[--seed N] [--keep]\n                   [--daemons 1|2] [--shared PCT] "
                            "[--semaphore N] [--election 0|1]\n                   "
                            "[--workaround-shutdown-keys] [--workaround-redis-delayed-restart]\n"
                            "       rlock-chaos --check DIR [--verbose]\n");
            return 64;
        }
    }
    if (d.seconds < 30 || d.nworkers < 2 || d.nworkers > CHAOS_MAX_WORKERS || d.nres < 2 ||
        d.nres > CHAOS_MAX_RES - 2 || d.ndaemons < 1 || d.ndaemons > CHAOS_MAX_DAEMONS ||
        d.shared_pct < 0 || d.shared_pct > 100 || d.sem_limit < 0 ||
        d.sem_limit > CHAOS_SEM_LIMIT_MAX || (d.election != 0 && d.election != 1)) {
        fprintf(stderr, "rlock-chaos: --seconds >= 30, 2 <= --workers <= %d, "
                        "2 <= --resources <= %d, 1 <= --daemons <= %d, 0 <= --shared <= 100, "
                        "0 <= --semaphore <= %d, --election 0 or 1\n",
                CHAOS_MAX_WORKERS, CHAOS_MAX_RES - 2, CHAOS_MAX_DAEMONS, CHAOS_SEM_LIMIT_MAX);
        return 64;
    }
    chaos_rng_seed(&d.rng, d.seed);
    ssize_t n = readlink("/proc/self/exe", d.self, sizeof d.self - 1);
    if (n <= 0) {
        fprintf(stderr, "chaos: readlink /proc/self/exe: %s\n", strerror(errno));
        return 1;
    }
    d.self[n] = '\0';

    drv_signalled = &d;
    struct sigaction sa = { .sa_handler = drv_on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int started = drv_start(&d) == 0;
    int run_ok = started && drv_run(&d) == 0;
    int teardown_bad = drv_teardown(&d, started);
    int ok = 0;
    if (started) {
        printf("\n");
        ok = chaos_check_run(d.e.dir, 0) == 0 && run_ok && !teardown_bad;
    }
    if (ok && !keep) {
        h_rm_tree(d.e.dir);
    } else if (d.e.dir[0]) {
        printf("chaos: histories and logs kept in %s\n", d.e.dir);
    }
    printf("chaos: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--worker") == 0)
        return chaos_worker_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--store") == 0)
        return chaos_store_main(argc, argv);
    if (argc >= 3 && strcmp(argv[1], "--check") == 0)
        return chaos_check_run(argv[2], argc >= 4 && strcmp(argv[3], "--verbose") == 0) == 0 ? 0
                                                                                             : 1;
    return drv_main(argc, argv);
}
