/*
 * harness_cluster.h — a Redis Cluster of real redis-server processes on
 * loopback TCP, for the tests of rlockd's cluster routing.
 *
 * Each node listens on 127.0.0.1 at a port found free by binding (its
 * cluster bus port, +10000, must be free too); a node that does not come up
 * is retried on other ports. The cluster is formed with
 * `redis-cli --cluster create` (masters only). Processes are killed by pid.
 */
#ifndef RLOCK_ITEST_HARNESS_CLUSTER_H
#define RLOCK_ITEST_HARNESS_CLUSTER_H

#include <stddef.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#define H_CLUSTER_MAX 6

struct h_cluster {
    char dir[256]; /* private temp dir: nodes' logs and nodes-*.conf */
    int n;
    int ports[H_CLUSTER_MAX];
    pid_t pids[H_CLUSTER_MAX];
    char ids[H_CLUSTER_MAX][48]; /* CLUSTER MYID */
    char seeds[H_CLUSTER_MAX * 24]; /* "127.0.0.1:P1,127.0.0.1:P2,..." */
};

/* Start n masters, form the cluster and wait (deadline 30 s) until every node
 * says cluster_state:ok. 0, or -1 after printing why (what started is stopped). */
int h_cluster_start(struct h_cluster *cl, int n);
/* Stop every node (SIGTERM, then SIGKILL) and remove the dir. */
void h_cluster_stop(struct h_cluster *cl);
/* A synchronous connection to node i (NULL on failure). */
redisContext *h_cluster_redis(const struct h_cluster *cl, int i);
/* The node (index) that owns slot, as node 0 sees it; -1 on error. */
int h_cluster_owner(const struct h_cluster *cl, int slot);
/* CLUSTER KEYSLOT key, asked of node 0; -1 on error. */
int h_cluster_keyslot(const struct h_cluster *cl, const char *key);
/*
 * Move slot from node `from` to node `to` as an operator does: SETSLOT
 * IMPORTING on to and MIGRATING on from, MIGRATE of its keys in batches,
 * hold_ms with the slot half-moved (requests meanwhile get ASK), then
 * SETSLOT NODE on every node. Returns the number of keys moved, or -1 after
 * printing why.
 */
int h_cluster_migrate_slot(const struct h_cluster *cl, int slot, int from, int to, int hold_ms);
/* Keys matching pattern on node i (SCAN); -1 on error. */
long long h_cluster_count(const struct h_cluster *cl, int i, const char *pattern);

#endif
