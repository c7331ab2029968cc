/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster.c — rlockd on a Redis Cluster of three masters (real
 * redis-server processes on loopback, formed with redis-cli --cluster create).
 *
 *   many_locks   10,000 locks held with the watchdog on (ttl 2 s) by four
 *                asynchronous clients, spread over the three nodes (per-node
 *                key counts printed): none is lost over 3 ttls, and every
 *                key is still there. Renew batches that mix hash slots are
 *                refused by the cluster (CROSSSLOT): every lock would be lost
 *                within one ttl. The acquires go in batches, each of one
 *                slot (a batch across slots is refused the same way): the
 *                names lie in 40 slots, in runs of 16 of one slot.
 *   migration    the mutual-exclusion counter runs while two slots are moved
 *                to another node (SETSLOT IMPORTING / MIGRATING, MIGRATE, a
 *                pause with the slot half-moved, SETSLOT NODE everywhere):
 *                the counter's own slot, and the slot of a lock held with the
 *                watchdog on. Every worker succeeds (no failure reaches a
 *                client), no held lock is lost over 3 ttls after, the moved
 *                lock's key lives on its new node, and the redirections
 *                followed are printed from /metrics.
 *   notices      two rlockd on the cluster: a waiter on B behind a holder on
 *                A (ttl 30 s, watchdog on) is granted promptly after A's
 *                release, the notice published on the resource's node and
 *                heard on the node B subscribed to (another one).
 *   failover     three masters with a replica each (node timeout 1 s); with
 *                locks held (ttl 10 s, watchdog on) one master is killed
 *                (kill -9): acquires on its slots succeed again once the
 *                cluster promoted its replica (time printed), the held locks
 *                are renewed on the new master and none is lost, and /readyz
 *                says ready again. Locks granted on that master after its
 *                replica stopped following it (masterauth pointed at a wrong
 *                password) are lost (MISSING) within seconds of the
 *                failover: every held lock is re-verified, not left to its
 *                renewal a third of a 60 s ttl later.
 *   migrating_acquire (case "edge") an acquire of a free lock in a slot
 *                half-moved for 4 s (ASK, then TRYAGAIN past rlockd's retries)
 *                answers UNAVAILABLE or is granted, never INTERNAL.
 *   ask_extend   (case "edge") the Extend of a lock whose key was moved while
 *                its slot stays half-moved follows ASK to the importing node.
 */
#include "harness.h"
#include "harness_cluster.h"
#include "harness_move.h"

#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES 3
#define TTL_MS 2000u
#define MANY_LOCKS 10000
#define MANY_CLIENTS 4
#define MANY_INFLIGHT 256
#define HELD_LOCKS 200
#define COUNTER_PROCS 8
#define COUNTER_ROUNDS 150
#define COUNTER_DEADLINE_MS 240000
#define HALF_MOVED_MS 300

struct cl_env {
    struct h_cluster cl;
    struct h_env e;
};

static void cl_start_replicas(struct cl_env *ce, int replicas, int node_timeout_ms)
{
    memset(ce, 0, sizeof *ce);
    ck_assert_msg(h_cluster_start_replicas(&ce->cl, NODES, replicas, node_timeout_ms) == 0,
                  "could not start the cluster");
    char lines[256];
    snprintf(lines, sizeof lines, "cluster_nodes = %s\n", ce->cl.seeds);
    /* Four sessions hold MANY_LOCKS between them. */
    if (h_env_start_topology(&ce->e, lines, "[session]\nmax_locks = 10000\n") != 0) {
        h_cluster_stop(&ce->cl);
        ck_abort_msg("rlockd did not start on the cluster");
    }
}

static void cl_start(struct cl_env *ce)
{
    cl_start_replicas(ce, 0, 5000);
}

static void cl_stop(struct cl_env *ce)
{
    h_env_stop(&ce->e);
    h_cluster_stop(&ce->cl);
}

/* Lock keys of the env on each node (printed with when, unless it is NULL), and their total. */
static long long per_node_counts(struct cl_env *ce, const char *when, long long counts[NODES])
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "%s{*}", ce->e.prefix);
    long long total = 0;
    if (when != NULL)
        printf("lock keys per node %s:", when);
    for (int i = 0; i < NODES; i++) {
        counts[i] = h_cluster_count(&ce->cl, i, pattern);
        ck_assert_int_ge(counts[i], 0);
        total += counts[i];
        if (when != NULL)
            printf(" node %d (port %d) %lld;", i, ce->cl.ports[i], counts[i]);
    }
    if (when != NULL)
        printf(" total %lld\n", total);
    fflush(stdout);
    return total;
}

static void print_redirects(const struct h_env *e)
{
    printf("redirects followed: moved %.0f, ask %.0f, tryagain %.0f; slot maps read %.0f; "
           "nodes known %.0f\n",
           h_metric(e, "rlockd_redis_redirects_total{kind=\"moved\"}"),
           h_metric(e, "rlockd_redis_redirects_total{kind=\"ask\"}"),
           h_metric(e, "rlockd_redis_redirects_total{kind=\"tryagain\"}"),
           h_metric(e, "rlockd_redis_slot_maps_total"), h_metric(e, "rlockd_redis_nodes"));
    fflush(stdout);
}

/* --- many locks ------------------------------------------------------------ */

struct filler {
    struct rlock_client *c[MANY_CLIENTS];
    long next, granted, failed;
    char first_error[256];
    char names[MANY_LOCKS][24];
};

/*
 * Hash slot of a resource, computed here apart from the daemon (its key is
 * prefix{resource}: the slot is that of the resource): CRC16/XMODEM, one
 * table row per byte. many_names checks a few against CLUSTER KEYSLOT.
 */
static uint16_t res_slot(const char *s)
{
    static uint16_t table[256];
    if (table[1] == 0)
        for (unsigned v = 0; v < 256; v++) {
            uint16_t crc = (uint16_t)(v << 8);
            for (int b = 0; b < 8; b++)
                crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
            table[v] = crc;
        }
    uint16_t crc = 0;
    for (; *s != '\0'; s++)
        crc = (uint16_t)((crc << 8) ^ table[((crc >> 8) ^ (uint8_t)*s) & 0xff]);
    return crc & 16383;
}

/*
 * The names the filler takes, MANY_LOCKS of them in MANY_SLOTS hash slots
 * spread evenly over the slot space (so over the three masters), ordered in
 * runs of MANY_RUN names of one slot: the acquires one Redis connection is
 * given in a loop turn share slots, so batches form, and a batch that took a
 * call of another slot would be refused (CROSSSLOT). Random names almost
 * never put two calls of one slot side by side.
 */
#define MANY_SLOTS 40
#define MANY_RUN 16
static void many_names(struct cl_env *ce, struct filler *fl)
{
    enum { PER_SLOT = MANY_LOCKS / MANY_SLOTS };
    static short which[16384];
    static char found[MANY_SLOTS][PER_SLOT][24];
    int nfound[MANY_SLOTS] = {0}, used[MANY_SLOTS] = {0}, total = 0;
    memset(which, -1, sizeof which);
    for (int s = 0; s < MANY_SLOTS; s++)
        which[s * 16384 / MANY_SLOTS + 100] = (short)s;
    for (long n = 0; total < MANY_SLOTS * PER_SLOT; n++) {
        char name[24];
        snprintf(name, sizeof name, "many/%d", (int)(n % 1000000000));
        int s = which[res_slot(name)];
        if (s >= 0 && nfound[s] < PER_SLOT) {
            memcpy(found[s][nfound[s]++], name, sizeof name);
            total++;
        }
    }
    for (int s = 0; s < MANY_SLOTS; s++) {
        char key[sizeof ce->e.prefix + sizeof found[s][0] + 2];
        snprintf(key, sizeof key, "%s{%.23s}", ce->e.prefix, found[s][0]);
        ck_assert_int_eq(h_cluster_keyslot(&ce->cl, key), res_slot(found[s][0]));
    }
    for (int i = 0; i < MANY_LOCKS;)
        for (int s = 0; s < MANY_SLOTS; s++)
            for (int k = 0; k < MANY_RUN && used[s] < PER_SLOT; k++)
                memcpy(fl->names[i++], found[s][used[s]++], sizeof fl->names[0]);
}

static void fill_one(struct rlock_client *c, struct filler *fl);

static void filled(struct rlock_client *c, const struct rlock_result *r, void *arg)
{
    struct filler *fl = arg;
    if (r->err == RLOCK_OK)
        fl->granted++; /* the handle stays with the client until it closes */
    else if (fl->failed++ == 0)
        snprintf(fl->first_error, sizeof fl->first_error, "%s", r->error->message);
    fill_one(c, fl);
}

static void fill_one(struct rlock_client *c, struct filler *fl)
{
    if (fl->next >= MANY_LOCKS)
        return;
    struct rlock_acquire_opts o = {.ttl_ms = TTL_MS};
    if (rlock_async_acquire(c, fl->names[fl->next++], &o, filled, fl, NULL) != RLOCK_OK)
        fl->failed++;
}

/* Serve the clients' events for ms (keepalives, completions, lost notices). */
static void pump(const struct h_env *e, struct filler *fl, int ms)
{
    int64_t end = h_now_ms() + ms;
    while (h_now_ms() < end) {
        struct pollfd p[MANY_CLIENTS];
        for (int i = 0; i < MANY_CLIENTS; i++)
            p[i] = (struct pollfd){.fd = rlock_async_fd(fl->c[i]),
                                   .events = (short)rlock_async_events(fl->c[i])};
        poll(p, MANY_CLIENTS, 20);
        for (int i = 0; i < MANY_CLIENTS; i++)
            if (rlock_async_process(fl->c[i], p[i].revents) != RLOCK_OK) {
                h_env_dump_logs(e);
                ck_abort_msg("client %d's session ended", i);
            }
    }
}

START_TEST(test_many_locks)
{
    struct cl_env ce;
    cl_start(&ce);
    static struct filler fl;
    struct h_lost lost = {0};
    struct rlock_options opts = {.on_lost = h_lost_cb, .on_lost_arg = &lost};
    memset(&fl, 0, sizeof fl);
    many_names(&ce, &fl);
    for (int i = 0; i < MANY_CLIENTS; i++) {
        char err[256];
        ck_assert_msg(rlock_async_connect(ce.e.rlockd_addr, &opts, NULL, NULL, &fl.c[i], err,
                                          sizeof err) == RLOCK_OK,
                      "async connect: %s", err);
        for (int k = 0; k < MANY_INFLIGHT; k++)
            fill_one(fl.c[i], &fl);
    }
    int64_t t0 = h_now_ms();
    while (fl.granted + fl.failed < MANY_LOCKS && h_now_ms() - t0 < 120000)
        pump(&ce.e, &fl, 20);
    printf("%ld locks granted in %lld ms\n", fl.granted, (long long)(h_now_ms() - t0));
    ck_assert_msg(fl.failed == 0, "%ld acquires failed; the first: %s", fl.failed,
                  fl.first_error);
    ck_assert_int_eq(fl.granted, MANY_LOCKS);

    long long counts[NODES];
    ck_assert_int_eq(per_node_counts(&ce, "after the grants", counts), MANY_LOCKS);
    for (int i = 0; i < NODES; i++)
        ck_assert_msg(counts[i] > MANY_LOCKS / 10, "node %d holds only %lld keys", i, counts[i]);

    /* Three ttls: every lease is renewed several times, or lost. */
    int64_t t1 = h_now_ms();
    pump(&ce.e, &fl, 3 * TTL_MS + 500);
    int nlost = atomic_load(&lost.count);
    printf("held for %lld ms (ttl %u ms): %d lost\n", (long long)(h_now_ms() - t1), TTL_MS, nlost);
    ck_assert_msg(nlost == 0, "%d of %d locks lost within 3 ttls", nlost, MANY_LOCKS);
    ck_assert_int_eq(per_node_counts(&ce, "after 3 ttls", counts), MANY_LOCKS);
    print_redirects(&ce.e);
    printf("renewals: %.0f, renew failures: %.0f\n", h_metric(&ce.e, "rlockd_renewals_total"),
           h_metric(&ce.e, "rlockd_renew_failures_total"));
    /* Four clients with many acquires in flight: batches formed, each of one slot. */
    double batches = h_metric(&ce.e, "rlockd_redis_batches_total");
    printf("batches: %.0f carrying %.0f acquires and releases\n", batches,
           h_metric(&ce.e, "rlockd_redis_batched_calls_total"));
    ck_assert_msg(batches > 0 && h_metric(&ce.e, "rlockd_redis_batched_calls_total") > 2 * batches,
                  "no batches formed: the case cannot see a batch across slots");

    /* The sessions end: their 10,000 locks go in release batches, one slot per call. */
    for (int i = 0; i < MANY_CLIENTS; i++)
        rlock_close(fl.c[i]);
    int64_t t2 = h_now_ms();
    long long left;
    while ((left = per_node_counts(&ce, NULL, counts)) > 0 && h_now_ms() - t2 < 20000)
        h_sleep_ms(50);
    printf("released in %lld ms: %lld keys left\n", (long long)(h_now_ms() - t2), left);
    ck_assert_msg(left == 0, "%lld keys left 20 s after their sessions ended", left);
    ck_assert_msg(h_log_count(&ce.e, "CROSSSLOT") == 0,
                  "a call mixed hash slots (CROSSSLOT in rlockd.log)");
    cl_stop(&ce);
}
END_TEST

/* --- migration under the counter ------------------------------------------- */

struct mover {
    struct cl_env *ce;
    int slots[2];
    int from[2], to[2];
    int moved[2]; /* keys moved, -1 on failure */
    int64_t done_ms; /* h_now_ms() once both moves are over */
    pthread_t t;
};

static void *mover_main(void *arg)
{
    struct mover *m = arg;
    h_sleep_ms(1500); /* the counter is under way */
    for (int i = 0; i < 2; i++) {
        m->moved[i] = h_cluster_migrate_slot(&m->ce->cl, m->slots[i], m->from[i], m->to[i],
                                             HALF_MOVED_MS);
        h_sleep_ms(500);
    }
    m->done_ms = h_now_ms();
    return NULL;
}

START_TEST(test_migration)
{
    struct cl_env ce;
    cl_start(&ce);
    struct h_lost lost = {0};
    struct rlock_options opts = {.on_lost = h_lost_cb, .on_lost_arg = &lost};
    struct rlock_client *c = h_client_or_fail(&ce.e, &opts);
    static struct rlock_lock *held[HELD_LOCKS];
    for (int i = 0; i < HELD_LOCKS; i++) {
        char res[32];
        snprintf(res, sizeof res, "held/%d", i);
        struct rlock_acquire_opts o = {.ttl_ms = TTL_MS};
        h_assert_ok(c, rlock_acquire(c, res, &o, 5000, &held[i]));
    }

    /* The counter's slot, and the slot of a held lock elsewhere. */
    struct mover m = {.ce = &ce};
    char key[256];
    m.slots[0] = h_cluster_keyslot(&ce.cl, h_lock_key(&ce.e, "counter", key, sizeof key));
    int pick = -1;
    for (int i = 0; i < HELD_LOCKS && pick < 0; i++) {
        int s = h_cluster_keyslot(&ce.cl, h_lock_key(&ce.e, rlock_lock_resource(held[i]), key,
                                                     sizeof key));
        if (s != m.slots[0])
            pick = i, m.slots[1] = s;
    }
    ck_assert_int_ge(pick, 0);
    for (int i = 0; i < 2; i++) {
        m.from[i] = h_cluster_owner(&ce.cl, m.slots[i]);
        ck_assert_int_ge(m.from[i], 0);
        m.to[i] = (m.from[i] + 1) % NODES;
        printf("moving slot %d from node %d to node %d\n", m.slots[i], m.from[i], m.to[i]);
    }
    ck_assert_int_eq(pthread_create(&m.t, NULL, mover_main, &m), 0);
    const char *addrs[] = {ce.e.rlockd_addr};
    h_counter_run(&ce.e, addrs, 1, COUNTER_PROCS, COUNTER_ROUNDS, COUNTER_DEADLINE_MS);
    int64_t counter_done = h_now_ms();
    pthread_join(m.t, NULL);
    /* Otherwise the workers saw nothing of the moves. */
    ck_assert_msg(m.done_ms <= counter_done, "the counter ended %lld ms before the moves did",
                  (long long)(m.done_ms - counter_done));
    printf("keys moved: slot %d: %d, slot %d: %d\n", m.slots[0], m.moved[0], m.slots[1],
           m.moved[1]);
    ck_assert_msg(m.moved[0] >= 1 && m.moved[1] >= 1, "a migration failed or moved no key");
    ck_assert_int_eq(h_cluster_owner(&ce.cl, m.slots[1]), m.to[1]);

    /* The moved lock lives on, renewed on its new node. */
    h_sleep_ms(3 * TTL_MS + 500);
    int nlost = atomic_load(&lost.count);
    printf("held locks lost: %d\n", nlost);
    ck_assert_msg(nlost == 0, "%d of %d held locks lost", nlost, HELD_LOCKS);
    redisContext *r = h_cluster_redis(&ce.cl, m.to[1]);
    ck_assert_ptr_nonnull(r);
    char value[128];
    h_lock_key(&ce.e, rlock_lock_resource(held[pick]), key, sizeof key);
    ck_assert_int_eq(h_get(r, key, value, sizeof value), 1);
    ck_assert_str_eq(value, rlock_lock_token(held[pick]));
    long long pttl = h_pttl(r, key);
    printf("%s on node %d: pttl %lld ms\n", key, m.to[1], pttl);
    ck_assert_int_gt(pttl, 0);
    redisFree(r);
    for (int i = 0; i < HELD_LOCKS; i++)
        ck_assert_int_eq(rlock_lock_state(held[i]), RLOCK_HELD);
    print_redirects(&ce.e);
    ck_assert_msg(h_metric(&ce.e, "rlockd_redis_redirects_total{kind=\"moved\"}") +
                          h_metric(&ce.e, "rlockd_redis_redirects_total{kind=\"ask\"}") >= 1,
                  "no redirection was followed: the migrations went unseen");
    for (int i = 0; i < HELD_LOCKS; i++)
        h_assert_ok(c, rlock_release(held[i], 5000));
    rlock_close(c);
    cl_stop(&ce);
}
END_TEST

/* --- release notices across the cluster ------------------------------------ */

/* The node where rlockd e's pub/sub connection is subscribed (its daemons' channel). */
static int subscriber_node(const struct cl_env *ce, const struct h_env *e)
{
    char chan[96];
    snprintf(chan, sizeof chan, "%sdaemons", e->prefix);
    int node = -1;
    for (int i = 0; i < NODES; i++) {
        redisContext *r = h_cluster_redis(&ce->cl, i);
        ck_assert_ptr_nonnull(r);
        redisReply *rep = redisCommand(r, "PUBSUB NUMSUB %s", chan);
        if (rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
            rep->element[1]->type == REDIS_REPLY_INTEGER && rep->element[1]->integer > 0)
            node = i;
        freeReplyObject(rep);
        redisFree(r);
    }
    return node;
}

START_TEST(test_notices)
{
    struct cl_env ce;
    cl_start(&ce);
    struct h_env b;
    char lines[256];
    snprintf(lines, sizeof lines, "cluster_nodes = %s\n", ce.cl.seeds);
    ck_assert_int_eq(h_env_start_topology(&b, lines, NULL), 0);
    h_env_share_prefix(&b, &ce.e);
    h_sleep_ms(1500); /* B's pub/sub connection subscribes its daemons' channel every second */
    int sub = subscriber_node(&ce, &b);
    ck_assert_int_ge(sub, 0);

    /* A resource whose node is not the one B listens on. */
    char res[32], key[256];
    int owner = -1;
    for (int i = 0; owner < 0 || owner == sub; i++) {
        snprintf(res, sizeof res, "wake/%d", i);
        owner = h_cluster_owner(&ce.cl, h_cluster_keyslot(&ce.cl, h_lock_key(&ce.e, res, key,
                                                                             sizeof key)));
        ck_assert_int_ge(owner, 0);
    }
    printf("%s lives on node %d; B listens on node %d\n", res, owner, sub);

    struct rlock_client *ca = h_client_or_fail(&ce.e, NULL);
    struct rlock_lock *l = NULL;
    struct rlock_acquire_opts o = {.ttl_ms = 30000};
    h_assert_ok(ca, rlock_acquire(ca, res, &o, 5000, &l));
    struct h_waiter w;
    h_waiter_start(&w, &b, res, 30000, 10000);
    h_sleep_ms(500); /* B's waiter sleeps, subscribed */
    int64_t released = h_now_ms();
    h_assert_ok(ca, rlock_release(l, 5000));
    ck_assert_int_eq(h_waiter_join(&w), RLOCK_OK);
    int64_t delay = w.granted_ms - released;
    printf("waiter on B granted %lld ms after the release on A\n", (long long)delay);
    ck_assert_msg(delay < 2000, "granted %lld ms after the release: the notice was missed",
                  (long long)delay);
    h_waiter_close(&w);
    rlock_close(ca);
    h_env_stop(&b);
    cl_stop(&ce);
}
END_TEST

/* --- failover inside the cluster -------------------------------------------- */

#define FAILOVER_TTL_MS 10000u
#define FAILOVER_LOCKS 100
#define FAILOVER_DEADLINE_MS 30000
#define DOOMED 6               /* granted on the master after its replica stopped following */
#define DOOMED_TTL_MS 60000u   /* renewals due at 20 s: a loss within seconds is the re-verify */
#define VERIFY_MS 10000

/* The replica (node index) of master `master`: its INFO names the master's port; -1 if none. */
static int replica_of(const struct cl_env *ce, int master)
{
    char want[32];
    snprintf(want, sizeof want, "master_port:%d\r", ce->cl.ports[master]);
    for (int i = 0; i < ce->cl.n; i++) {
        redisContext *r = h_cluster_redis(&ce->cl, i);
        if (r == NULL)
            continue;
        redisReply *rep = redisCommand(r, "INFO replication");
        int hit = rep != NULL && rep->type == REDIS_REPLY_STRING && strstr(rep->str, want);
        if (rep != NULL)
            freeReplyObject(rep);
        redisFree(r);
        if (hit)
            return i;
    }
    return -1;
}

/* 1 when node i (a replica: READONLY lets it answer) has key. */
static int replica_has(const struct cl_env *ce, int i, const char *key)
{
    redisContext *r = h_cluster_redis(&ce->cl, i);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(h_redis_ok(r, "READONLY"), 0);
    long long n = h_redis_int(r, "EXISTS %s", key);
    redisFree(r);
    ck_assert_int_ge(n, 0);
    return n > 0;
}

START_TEST(test_failover)
{
    struct cl_env ce;
    cl_start_replicas(&ce, 1, 1000);
    struct h_lost lost = {0};
    struct rlock_options opts = {.on_lost = h_lost_cb, .on_lost_arg = &lost};
    struct rlock_client *c = h_client_or_fail(&ce.e, &opts);
    static struct rlock_lock *held[FAILOVER_LOCKS];
    char res[32], key[256];
    for (int i = 0; i < FAILOVER_LOCKS; i++) {
        snprintf(res, sizeof res, "fo/%d", i);
        struct rlock_acquire_opts o = {.ttl_ms = FAILOVER_TTL_MS};
        h_assert_ok(c, rlock_acquire(c, res, &o, 5000, &held[i]));
    }
    /* The master of fo/0, and a free resource of the same master to probe with. */
    int victim = h_cluster_owner(&ce.cl, h_cluster_keyslot(&ce.cl, h_lock_key(&ce.e, "fo/0", key,
                                                                            sizeof key)));
    ck_assert_int_ge(victim, 0);
    int on_victim = 0;
    for (int i = 0; i < FAILOVER_LOCKS; i++)
        on_victim += h_cluster_owner(&ce.cl, h_cluster_keyslot(&ce.cl, h_lock_key(
                         &ce.e, rlock_lock_resource(held[i]), key, sizeof key))) == victim;
    for (int i = 0;; i++) {
        snprintf(res, sizeof res, "probe/%d", i);
        if (h_cluster_owner(&ce.cl, h_cluster_keyslot(&ce.cl, h_lock_key(&ce.e, res, key,
                                                                         sizeof key))) == victim)
            break;
    }
    h_sleep_ms(1000); /* the last renewals reach the replica */

    /* The victim's replica stops following it (its AUTH fails at every reconnect); locks
     * granted on the victim from now on are lost with it. */
    int rep_node = replica_of(&ce, victim);
    ck_assert_int_ge(rep_node, 0);
    redisContext *rr = h_cluster_redis(&ce.cl, rep_node);
    ck_assert_ptr_nonnull(rr);
    ck_assert_int_eq(h_redis_ok(rr, "CONFIG SET masterauth wrong-password"), 0);
    ck_assert_int_eq(h_redis_ok(rr, "CLIENT KILL TYPE master"), 0);
    redisFree(rr);
    h_sleep_ms(200);
    static struct rlock_lock *doomed[DOOMED];
    char dres[32];
    for (int i = 0, n = 0; n < DOOMED; i++) {
        snprintf(dres, sizeof dres, "doomed/%d", i);
        if (h_cluster_owner(&ce.cl, h_cluster_keyslot(&ce.cl, h_lock_key(&ce.e, dres, key,
                                                                         sizeof key))) != victim)
            continue;
        struct rlock_acquire_opts o = {.ttl_ms = DOOMED_TTL_MS, .watchdog_off = n % 2};
        h_assert_ok(c, rlock_acquire(c, dres, &o, 5000, &doomed[n]));
        n++;
    }
    h_sleep_ms(300);
    for (int i = 0; i < DOOMED; i++) {
        h_lock_key(&ce.e, rlock_lock_resource(doomed[i]), key, sizeof key);
        ck_assert_msg(!replica_has(&ce, rep_node, key), "%s reached the replica", key);
    }

    printf("killing master %d (port %d), which holds %d of the %d locks and %d more its "
           "replica (node %d) never got\n", victim, ce.cl.ports[victim], on_victim,
           FAILOVER_LOCKS, DOOMED, rep_node);
    fflush(stdout);
    int64_t killed = h_now_ms();
    h_cluster_kill(&ce.cl, victim);

    /* Acquires on its slots fail until a replica is promoted, then succeed. */
    int unavailable = 0;
    struct rlock_lock *probe = NULL;
    int64_t promoted_seen = 0;
    for (;;) {
        struct rlock_acquire_opts o = {.ttl_ms = FAILOVER_TTL_MS};
        enum rlock_err rc = rlock_acquire(c, res, &o, 5000, &probe);
        if (rc == RLOCK_OK)
            break;
        if (promoted_seen == 0) {
            redisContext *rr2 = h_cluster_redis(&ce.cl, rep_node);
            redisReply *ri = rr2 != NULL ? redisCommand(rr2, "INFO replication") : NULL;
            if (ri != NULL && ri->type == REDIS_REPLY_STRING && strstr(ri->str, "role:master"))
                promoted_seen = h_now_ms();
            if (ri != NULL)
                freeReplyObject(ri);
            if (rr2 != NULL)
                redisFree(rr2);
        }
        unavailable++;
        ck_assert_msg(h_now_ms() - killed < FAILOVER_DEADLINE_MS,
                      "no acquire on the failed master's slots succeeded within %d ms",
                      FAILOVER_DEADLINE_MS);
        h_sleep_ms(100);
    }
    int64_t granted = h_now_ms();
    int owner;
    /* The node asked (the first alive) may not have heard of the promotion yet that
     * the node rlockd asked already has: its view converges by gossip. */
    while ((owner = h_cluster_owner(&ce.cl, h_cluster_keyslot(&ce.cl, h_lock_key(
                                                   &ce.e, res, key, sizeof key)))) == victim &&
           h_now_ms() - granted < 5000)
        h_sleep_ms(50);
    printf("acquire on the failed master's slot succeeded %lld ms after the kill (%d tries "
           "refused before), on node %d (port %d)\n",
           (long long)(granted - killed), unavailable, owner,
           owner >= 0 ? ce.cl.ports[owner] : 0);
    ck_assert_int_ne(owner, victim);
    /*
     * While a master that owns slots is unreachable, rlockd reads the slot map every
     * second (docs/scaling.md): served again within a read or two of the promotion. 3 s
     * is that with room for a loaded machine.
     */
    if (promoted_seen != 0) {
        printf("acquire succeeded %lld ms after the replica was seen promoted\n",
               (long long)(granted - promoted_seen));
        ck_assert_msg(granted - promoted_seen < 3000,
                      "the failed slots were served %lld ms after their replica was promoted",
                      (long long)(granted - promoted_seen));
    }
    h_assert_ok(c, rlock_release(probe, 5000));
    int64_t promoted = h_now_ms();

    /* The locks the promoted replica never had are lost at once, not at their renewal. */
    for (;;) {
        int n = 0;
        for (int i = 0; i < DOOMED; i++)
            n += rlock_lock_state(doomed[i]) == RLOCK_LOST;
        if (n == DOOMED)
            break;
        ck_assert_msg(h_now_ms() - promoted < VERIFY_MS,
                      "%d of %d locks the new master never had are still held %d ms after the "
                      "failover (no re-verify?)",
                      DOOMED - n, DOOMED, VERIFY_MS);
        h_sleep_ms(20);
    }
    printf("the %d locks the replica never had were lost %lld ms after the first acquire "
           "there\n", DOOMED, (long long)(h_now_ms() - promoted));
    for (int i = 0; i < DOOMED; i++) {
        ck_assert_int_eq(rlock_lock_lost_reason(doomed[i]), RLOCK_LOST_MISSING);
        rlock_lock_free(doomed[i]);
    }
    struct rlock_server_info info;
    h_assert_ok(c, rlock_server_info(c, 5000, &info));
    ck_assert_uint_ge(info.redis_failovers, 1);

    /* Held locks go on being renewed on the promoted replica. */
    h_sleep_ms(FAILOVER_TTL_MS + 1000);
    int nlost = atomic_load(&lost.count) - DOOMED;
    printf("held locks lost: %d of %d\n", nlost, FAILOVER_LOCKS);
    ck_assert_msg(nlost == 0, "%d held locks lost over the failover", nlost);
    struct h_http_reply r;
    ck_assert_msg(h_http_get(ce.e.metrics_sock, "/readyz", 5000, &r) == 0, "%s", r.error);
    printf("readyz: %d %s", r.status, r.body);
    ck_assert_int_eq(r.status, 200);
    h_http_free(&r);
    print_redirects(&ce.e);
    for (int i = 0; i < FAILOVER_LOCKS; i++)
        h_assert_ok(c, rlock_release(held[i], 5000));
    rlock_close(c);
    cl_stop(&ce);
}
END_TEST


struct ask_move {
    struct cl_env *ce;
    int slot, from, to, rc;
};

static void *ask_move_run(void *arg)
{
    struct ask_move *m = arg;
    m->rc = h_cluster_migrate_slot(&m->ce->cl, m->slot, m->from, m->to, 4000);
    return NULL;
}

/* A resource (written into res) whose key lives on node. */
static void resource_on(struct cl_env *ce, int node, const char *stem, char *res, size_t len)
{
    char key[256];
    for (int i = 0;; i++) {
        snprintf(res, len, "%s/%d", stem, i);
        if (h_cluster_owner(&ce->cl, h_cluster_keyslot(&ce->cl, h_lock_key(&ce->e, res, key,
                                                                           sizeof key))) == node)
            return;
    }
}

/*
 * A free lock in a slot that stays half-moved longer than rlockd's TRYAGAIN
 * retries (50 x 20 ms): the old owner answers ASK (it has neither key), the
 * importing node TRYAGAIN (a multi-key script whose keys it lacks) until the
 * slot settles. The client may be told to retry (UNAVAILABLE), or be
 * granted; never INTERNAL "redis refused the acquire script (does the
 * lock's key or its fence key hold another type?)", which is not so.
 */
START_TEST(test_migrating_acquire)
{
    struct cl_env ce;
    cl_start(&ce);
    struct rlock_client *c = h_client_or_fail(&ce.e, NULL);
    int from = 0, to = 1;
    char res[32], key[256];
    resource_on(&ce, from, "moving", res, sizeof res);
    struct ask_move m = {.ce = &ce, .from = from, .to = to, .rc = -1};
    m.slot = h_cluster_keyslot(&ce.cl, h_lock_key(&ce.e, res, key, sizeof key));
    struct h_thread th;
    h_thread_start(&th, ask_move_run, &m);
    h_sleep_ms(1000); /* the slot is half-moved for 4 s */
    struct rlock_lock *l = NULL;
    enum rlock_err rc = rlock_acquire(c, res, NULL, 5000, &l);
    char msg[320];
    printf("migrating_acquire: acquire in a half-moved slot answered %s\n",
           h_rlock_err(c, rc, msg, sizeof msg));
    ck_assert_msg(rc == RLOCK_OK || rc == RLOCK_ERR_UNAVAILABLE,
                  "an acquire in a migrating slot answered %s", msg);
    h_thread_join(&th, h_now_ms() + 30000, "the migration did not end");
    ck_assert_int_eq(m.rc, 0);
    if (l != NULL)
        rlock_lock_free(l);
    rlock_close(c);
    cl_stop(&ce);
}
END_TEST

/*
 * A held lock whose key was moved while its slot stays half-moved: the old
 * owner answers ASK, and rlockd follows it to the importing node (with ASKING),
 * where its Extend runs: OK, and the key there has the new lease.
 */
START_TEST(test_ask_extend)
{
    struct cl_env ce;
    cl_start(&ce);
    struct rlock_client *c = h_client_or_fail(&ce.e, NULL);
    int from = 0, to = 1;
    char res[32], key[256];
    resource_on(&ce, from, "asked", res, sizeof res);
    struct rlock_acquire_opts o = {.ttl_ms = 20000, .watchdog_off = 1};
    struct rlock_lock *l = NULL;
    h_assert_ok(c, rlock_acquire(c, res, &o, 5000, &l));
    struct ask_move m = {.ce = &ce, .from = from, .to = to, .rc = -1};
    m.slot = h_cluster_keyslot(&ce.cl, h_lock_key(&ce.e, res, key, sizeof key));
    struct h_thread th;
    h_thread_start(&th, ask_move_run, &m);
    /* Its keys are on the importing node once the old owner no longer has them. */
    redisContext *fr = h_cluster_redis(&ce.cl, from);
    ck_assert_ptr_nonnull(fr);
    int64_t until = h_now_ms() + 3000;
    for (;;) {
        redisReply *rep = redisCommand(fr, "CLUSTER COUNTKEYSINSLOT %d", m.slot);
        int gone = rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer == 0;
        if (rep != NULL)
            freeReplyObject(rep);
        if (gone)
            break;
        ck_assert_msg(h_now_ms() < until, "the slot's keys did not move");
        h_sleep_ms(20);
    }
    redisFree(fr);
    h_assert_ok(c, rlock_extend(l, 40000, 5000));
    redisContext *tr = h_cluster_redis(&ce.cl, to);
    ck_assert_ptr_nonnull(tr);
    ck_assert_int_eq(h_redis_ok(tr, "ASKING"), 0); /* the slot is not its own yet */
    long long pttl = h_pttl(tr, key);
    redisFree(tr);
    printf("ask_extend: extended on the importing node: pttl %lld ms\n", pttl);
    ck_assert_msg(pttl > 30000, "the Extend did not reach the key on the importing node (pttl %lld)",
                  pttl);
    ck_assert_msg(h_metric(&ce.e, "rlockd_redis_redirects_total{kind=\"ask\"}") >= 1,
                  "no ASK was followed");
    h_thread_join(&th, h_now_ms() + 30000, "the migration did not end");
    ck_assert_int_ge(m.rc, 1);
    h_assert_ok(c, rlock_release(l, 5000));
    rlock_lock_free(l);
    rlock_close(c);
    cl_stop(&ce);
}
END_TEST

/* --- sessions that move between daemons on the cluster --------------------------- */

/* Asks each key's node whether it exists, pipelined per node (h_keys_count_fn). */
struct cl_counter {
    struct cl_env *ce;
    redisContext *r[NODES];
    int *node;    /* of each key, found at the first count */
    long long per_node[NODES];
};

static long long cluster_count(void *ctx, const char *const *keys, int n)
{
    struct cl_counter *cc = ctx;
    if (cc->node == NULL) {
        cc->node = calloc((size_t)n, sizeof *cc->node);
        ck_assert_ptr_nonnull(cc->node);
        for (int k = 0; k < n; k++) {
            cc->node[k] = h_cluster_owner(&cc->ce->cl, h_cluster_keyslot(&cc->ce->cl, keys[k]));
            ck_assert_int_ge(cc->node[k], 0);
            cc->per_node[cc->node[k]]++;
        }
        for (int i = 0; i < NODES; i++)
            cc->r[i] = h_cluster_redis(&cc->ce->cl, i);
    }
    for (int k = 0; k < n; k++)
        ck_assert_int_eq(redisAppendCommand(cc->r[cc->node[k]], "EXISTS %s", keys[k]), REDIS_OK);
    long long have = 0;
    for (int k = 0; k < n; k++) {
        redisReply *rep = NULL;
        ck_assert_int_eq(redisGetReply(cc->r[cc->node[k]], (void **)&rep), REDIS_OK);
        ck_assert_int_eq(rep->type, REDIS_REPLY_INTEGER);
        have += rep->integer;
        freeReplyObject(rep);
    }
    return have;
}

/*
 * The resume check on a 3-master cluster: clients on A with locks on every
 * master, A killed, every session resumes on B with every lock.
 */
START_TEST(test_move_kill9)
{
    struct h_keydir k;
    h_keydir_make(&k, NULL);
    struct cl_env ce;
    memset(&ce, 0, sizeof ce);
    ck_assert_msg(h_cluster_start(&ce.cl, NODES) == 0, "could not start the cluster");
    char lines[256];
    snprintf(lines, sizeof lines, "cluster_nodes = %s\n", ce.cl.seeds);
    ck_assert_int_eq(h_env_start_topology(&ce.e, lines, k.ini), 0);
    struct h_env b;
    ck_assert_int_eq(h_env_start_topology(&b, lines, k.ini), 0);
    h_env_share_prefix(&b, &ce.e);
    struct cl_counter cc = {.ce = &ce};
    h_move_check(&ce.e, &b, SIGKILL, 10, 30, cluster_count, &cc);
    printf("move: the locks were spread as %lld / %lld / %lld over the masters\n",
           cc.per_node[0], cc.per_node[1], cc.per_node[2]);
    for (int i = 0; i < NODES; i++) {
        ck_assert_int_gt(cc.per_node[i], 0);
        redisFree(cc.r[i]);
    }
    free(cc.node);
    h_env_stop(&b);
    cl_stop(&ce);
    h_keydir_remove(&k);
}
END_TEST

/*
 * rlock_acquire_all with one resource on each master: 3 clients on their own threads take
 * the three in rotated orders, 40 times each, with a wait. None fails (no deadlock across
 * masters), each round's counter is incremented by one holder of all three at a time.
 */
struct spread {
    struct cl_env *ce;
    const char *names[NODES];
    int index;
    int *counter; /* read-sleep-write, shared by the takers, guarded by the three locks */
    atomic_int *inside;
    atomic_int *bad;
    enum rlock_err rc;
    struct h_thread t;
};

static void *spread_run(void *arg)
{
    struct spread *sp = arg;
    struct rlock_client *c = h_client(&sp->ce->e, NULL);
    if (c == NULL) {
        sp->rc = RLOCK_ERR_CONNECT;
        return NULL;
    }
    int *counter = sp->counter;
    for (int i = 0; i < 40 && sp->rc == RLOCK_OK; i++) {
        const char *names[NODES];
        for (int k = 0; k < NODES; k++)
            names[k] = sp->names[(k + sp->index + i) % NODES];
        struct rlock_lock *out[NODES];
        struct rlock_acquire_opts o = {.wait_ms = 30000};
        sp->rc = rlock_acquire_all(c, names, NODES, &o, 5000, out);
        if (sp->rc != RLOCK_OK)
            break;
        if (atomic_fetch_add(sp->inside, 1) != 0)
            atomic_fetch_add(sp->bad, 1);
        int v = *counter;
        h_sleep_ms(1);
        *counter = v + 1;
        atomic_fetch_sub(sp->inside, 1);
        for (int k = 0; k < NODES; k++) {
            if (rlock_release(out[k], 5000) != RLOCK_OK)
                sp->rc = RLOCK_ERR_INTERNAL;
            rlock_lock_free(out[k]);
        }
    }
    rlock_close(c);
    return NULL;
}

START_TEST(test_acquire_all_masters)
{
    struct cl_env ce;
    cl_start(&ce);
    char res[NODES][32];
    for (int n = 0; n < NODES; n++)
        resource_on(&ce, n, "spread", res[n], sizeof res[n]);
    atomic_int inside = 0, bad = 0;
    int counter = 0;
    struct spread sp[NODES];
    for (int i = 0; i < NODES; i++) {
        sp[i] = (struct spread){.ce = &ce, .index = i, .counter = &counter, .inside = &inside,
                                .bad = &bad};
        for (int n = 0; n < NODES; n++)
            sp[i].names[n] = res[n];
    }
    for (int i = 0; i < NODES; i++)
        h_thread_start(&sp[i].t, spread_run, &sp[i]);
    for (int i = 0; i < NODES; i++)
        h_thread_join(&sp[i].t, h_now_ms() + 240000, "a taker did not finish");
    for (int i = 0; i < NODES; i++)
        ck_assert_msg(sp[i].rc == RLOCK_OK, "taker %d: %d", i, (int)sp[i].rc);
    ck_assert_int_eq(atomic_load(&bad), 0);
    ck_assert_int_eq(counter, NODES * 40);
    printf("acquire_all over %d masters: %d sets taken, none inside twice\n", NODES, counter);
    cl_stop(&ce);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("cluster");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_many_locks);
    tcase_add_test(tc, test_migration);
    tcase_add_test(tc, test_notices);
    tcase_add_test(tc, test_failover);
    suite_add_tcase(s, tc);
    TCase *mv = tcase_create("move");
    tcase_set_timeout(mv, 300);
    tcase_add_test(mv, test_move_kill9);
    suite_add_tcase(s, mv);
    TCase *lk = tcase_create("edge");
    tcase_set_timeout(lk, 120);
    tcase_add_test(lk, test_migrating_acquire);
    tcase_add_test(lk, test_ask_extend);
    tcase_add_test(lk, test_acquire_all_masters);
    suite_add_tcase(s, lk);
    return h_run_suite(s);
}
