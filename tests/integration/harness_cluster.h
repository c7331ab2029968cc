/* SPDX-License-Identifier: BSD-3-Clause */
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
/* The same with `replicas` replicas per master (nodes 0..masters-1 start as the
 * masters) and cluster-node-timeout node_timeout_ms; also waits until every
 * replica's link to its master is up. */
int h_cluster_start_replicas(struct h_cluster *cl, int masters, int replicas,
                             int node_timeout_ms);
/* The index of the node listening on port, or -1. */
int h_cluster_node_of_port(const struct h_cluster *cl, int port);
/* Stop every node (SIGTERM, then SIGKILL) and remove the dir. */
void h_cluster_stop(struct h_cluster *cl);
/* kill -9 node i by pid and reap it. */
void h_cluster_kill(struct h_cluster *cl, int i);
/* A synchronous connection to node i (NULL on failure). */
redisContext *h_cluster_redis(const struct h_cluster *cl, int i);
/* The node (index) that owns slot, as the first node that answers sees it; -1 on error. */
int h_cluster_owner(const struct h_cluster *cl, int slot);
/* CLUSTER KEYSLOT key, asked of a running node; -1 on error. */
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
