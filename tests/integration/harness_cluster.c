/* SPDX-License-Identifier: BSD-3-Clause */
/* harness_cluster.c — see harness_cluster.h. */
#include "harness_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define H_CLUSTER_BUS_OFFSET 10000
#define H_CLUSTER_PORT_TRIES 20

/* A port p with p and p + 10000 both bindable on 127.0.0.1 now; 0 if none found. */
static int free_port_pair(void)
{
    for (int tries = 0; tries < 50; tries++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        if (s < 0)
            return 0;
        if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
            getsockname(s, (struct sockaddr *)&a, &len) != 0) {
            close(s);
            return 0;
        }
        int port = ntohs(a.sin_port);
        close(s);
        if (port + H_CLUSTER_BUS_OFFSET > 65535)
            continue;
        s = socket(AF_INET, SOCK_STREAM, 0);
        a.sin_port = htons((uint16_t)(port + H_CLUSTER_BUS_OFFSET));
        int ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0;
        if (s >= 0)
            close(s);
        if (ok)
            return port;
    }
    return 0;
}

redisContext *h_cluster_redis(const struct h_cluster *cl, int i)
{
    struct timeval tv = {2, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", cl->ports[i], tv);
    if (r == NULL || r->err) {
        if (r != NULL)
            redisFree(r);
        return NULL;
    }
    redisSetTimeout(r, (struct timeval){10, 0});
    return r;
}

/* Start node i on some free port; 0 once the server answering there is the one started. */
static int node_start(struct h_cluster *cl, int i, const char *node_timeout)
{
    char redis[] = "redis-server";
    for (int attempt = 0; attempt < H_CLUSTER_PORT_TRIES; attempt++) {
        int port = free_port_pair();
        if (port == 0)
            continue;
        char sport[16], conf[320], log[320];
        snprintf(sport, sizeof sport, "%d", port);
        snprintf(conf, sizeof conf, "nodes-%d.conf", port);
        snprintf(log, sizeof log, "%s/redis-%d.log", cl->dir, port);
        char *argv[] = {redis, "--port", sport, "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                        "--cluster-config-file", conf, "--cluster-node-timeout", (char *)node_timeout,
                        "--dir", cl->dir, "--save", "", "--appendonly", "no",
                        "--logfile", log, "--daemonize", "no", NULL};
        char path[] = "/usr/bin/redis-server";
        argv[0] = path;
        pid_t pid = h_spawn(argv, NULL);
        if (pid <= 0)
            continue;
        cl->ports[i] = port;
        /* Our server, not another program's that took the port meanwhile. */
        if (h_tcp_redis_wait(pid, port, NULL, 5000) == 0) {
            redisContext *r = h_cluster_redis(cl, i);
            redisReply *rep = r != NULL ? redisCommand(r, "CLUSTER MYID") : NULL;
            int ok = rep != NULL && rep->type == REDIS_REPLY_STRING && rep->len < sizeof cl->ids[i];
            if (ok)
                memcpy(cl->ids[i], rep->str, rep->len + 1);
            if (rep != NULL)
                freeReplyObject(rep);
            if (r != NULL)
                redisFree(r);
            if (ok) {
                cl->pids[i] = pid;
                return 0;
            }
        }
        /* Lost the port to someone else, most likely: another one. */
        h_stop_pid(pid, SIGKILL, 1000, "redis-server (cluster node)", NULL);
    }
    fprintf(stderr, "cluster node %d did not start\n", i);
    return -1;
}

/* 1 when every node answers cmd with text that passes ok. */
static int every_node(const struct h_cluster *cl, const char *cmd, int (*ok)(const char *text))
{
    for (int i = 0; i < cl->n; i++) {
        redisContext *r = h_cluster_redis(cl, i);
        if (r == NULL)
            return 0;
        redisReply *rep = redisCommand(r, cmd);
        int good = rep != NULL && rep->type == REDIS_REPLY_STRING && ok(rep->str);
        freeReplyObject(rep);
        redisFree(r);
        if (!good)
            return 0;
    }
    return 1;
}

static int state_ok(const char *info)
{
    return strstr(info, "cluster_state:ok") != NULL &&
           strstr(info, "cluster_slots_assigned:16384") != NULL;
}

/* A master, or a replica whose link to its master is up. */
static int linked(const char *info)
{
    return strstr(info, "role:master") != NULL || strstr(info, "master_link_status:up") != NULL;
}

static int cluster_ok(void *arg)
{
    return every_node(arg, "CLUSTER INFO", state_ok);
}

static int replicas_linked(void *arg)
{
    return every_node(arg, "INFO replication", linked);
}

int h_cluster_start(struct h_cluster *cl, int n)
{
    return h_cluster_start_replicas(cl, n, 0, 5000);
}

int h_cluster_node_of_port(const struct h_cluster *cl, int port)
{
    for (int k = 0; k < cl->n; k++)
        if (cl->ports[k] == port)
            return k;
    return -1;
}

int h_cluster_start_replicas(struct h_cluster *cl, int masters, int replicas,
                             int node_timeout_ms)
{
    int n = masters * (1 + replicas);
    char node_timeout[16], nreplicas[16];
    snprintf(node_timeout, sizeof node_timeout, "%d", node_timeout_ms);
    snprintf(nreplicas, sizeof nreplicas, "%d", replicas);
    memset(cl, 0, sizeof *cl);
    const char *tmp = getenv("TMPDIR");
    snprintf(cl->dir, sizeof cl->dir, "%s/rlock-cluster-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(cl->dir) == NULL || n > H_CLUSTER_MAX) {
        perror("cluster dir");
        return -1;
    }
    cl->n = n;
    char *argv[8 + H_CLUSTER_MAX];
    int argc = 0;
    char cli[] = "/usr/bin/redis-cli", opt[] = "--cluster", create[] = "create",
         replicas_opt[] = "--cluster-replicas", yes[] = "--cluster-yes";
    char addrs[H_CLUSTER_MAX][24];
    argv[argc++] = cli;
    argv[argc++] = opt;
    argv[argc++] = create;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (node_start(cl, i, node_timeout) != 0)
            goto fail;
        snprintf(addrs[i], sizeof addrs[i], "127.0.0.1:%d", cl->ports[i]);
        argv[argc++] = addrs[i];
        at += (size_t)snprintf(cl->seeds + at, sizeof cl->seeds - at, "%s%s", i ? "," : "",
                               addrs[i]);
    }
    argv[argc++] = replicas_opt;
    argv[argc++] = nreplicas;
    argv[argc++] = yes;
    argv[argc] = NULL;
    char out[320];
    snprintf(out, sizeof out, "%s/create.out", cl->dir);
    pid_t pid = h_spawn_io(argv, out, out);
    int status = 0;
    if (pid <= 0 || h_wait_exit(pid, 30000, &status) != 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "redis-cli --cluster create failed:\n");
        h_print_tail(out, 40);
        goto fail;
    }
    if (!h_wait_for(cluster_ok, cl, 30000)) {
        fprintf(stderr, "the cluster did not reach cluster_state:ok\n");
        goto fail;
    }
    if (replicas > 0 && !h_wait_for(replicas_linked, cl, 30000)) {
        fprintf(stderr, "the cluster's replicas did not link to their masters\n");
        goto fail;
    }
    return 0;
fail:
    h_cluster_stop(cl);
    return -1;
}

void h_cluster_stop(struct h_cluster *cl)
{
    for (int i = 0; i < cl->n; i++)
        if (cl->pids[i] > 0)
            h_stop_pid(cl->pids[i], SIGTERM, 3000, "redis-server (cluster node)", NULL);
    memset(cl->pids, 0, sizeof cl->pids);
    if (cl->dir[0] != '\0')
        h_rm_tree(cl->dir);
    cl->dir[0] = '\0';
}

/* A connection to the first node that is running and answers; NULL if none. */
static redisContext *any_node(const struct h_cluster *cl)
{
    redisContext *r = NULL;
    for (int i = 0; i < cl->n && r == NULL; i++)
        if (cl->pids[i] > 0 && h_alive(cl->pids[i]))
            r = h_cluster_redis(cl, i);
    return r;
}

void h_cluster_kill(struct h_cluster *cl, int i)
{
    h_stop_pid(cl->pids[i], SIGKILL, 3000, "redis-server (cluster node)", NULL);
    cl->pids[i] = 0;
}

static long long ask_int(const struct h_cluster *cl, const char *fmt, const char *arg)
{
    redisContext *r = any_node(cl);
    if (r == NULL)
        return -1;
    redisReply *rep = redisCommand(r, fmt, arg);
    long long v = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

int h_cluster_keyslot(const struct h_cluster *cl, const char *key)
{
    return (int)ask_int(cl, "CLUSTER KEYSLOT %s", key);
}

int h_cluster_owner(const struct h_cluster *cl, int slot)
{
    redisContext *r = any_node(cl);
    if (r == NULL)
        return -1;
    redisReply *rep = redisCommand(r, "CLUSTER SLOTS");
    int owner = -1;
    for (size_t i = 0; rep != NULL && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        if (e->elements < 3 || slot < e->element[0]->integer || slot > e->element[1]->integer)
            continue;
        owner = h_cluster_node_of_port(cl, (int)e->element[2]->element[1]->integer);
    }
    freeReplyObject(rep);
    redisFree(r);
    return owner;
}

/* Run a command on node i; 0 when it answered without an error. */
static int node_cmd(const struct h_cluster *cl, int i, int argc, const char **argv)
{
    redisContext *r = h_cluster_redis(cl, i);
    if (r == NULL)
        return -1;
    redisReply *rep = redisCommandArgv(r, argc, argv, NULL);
    int ok = rep != NULL && rep->type != REDIS_REPLY_ERROR;
    if (!ok)
        fprintf(stderr, "node %d: %s %s: %s\n", i, argv[0], argc > 1 ? argv[1] : "",
                rep != NULL && rep->type == REDIS_REPLY_ERROR ? rep->str : "no answer");
    freeReplyObject(rep);
    redisFree(r);
    return ok ? 0 : -1;
}

int h_cluster_migrate_slot(const struct h_cluster *cl, int slot, int from, int to, int hold_ms)
{
    char sslot[16], sport[16];
    snprintf(sslot, sizeof sslot, "%d", slot);
    snprintf(sport, sizeof sport, "%d", cl->ports[to]);
    const char *imp[] = {"CLUSTER", "SETSLOT", sslot, "IMPORTING", cl->ids[from]};
    const char *mig[] = {"CLUSTER", "SETSLOT", sslot, "MIGRATING", cl->ids[to]};
    if (node_cmd(cl, to, 5, imp) != 0 || node_cmd(cl, from, 5, mig) != 0)
        return -1;
    redisContext *r = h_cluster_redis(cl, from);
    if (r == NULL)
        return -1;
    int moved = 0;
    for (;;) {
        redisReply *keys = redisCommand(r, "CLUSTER GETKEYSINSLOT %d 100", slot);
        if (keys == NULL || keys->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(keys);
            redisFree(r);
            return -1;
        }
        if (keys->elements == 0) {
            freeReplyObject(keys);
            break;
        }
        const char *argv[8 + 100];
        size_t lens[8 + 100];
        int argc = 0;
        const char *head[] = {"MIGRATE", "127.0.0.1", sport, "", "0", "5000", "KEYS"};
        for (int k = 0; k < 7; k++)
            argv[argc] = head[k], lens[argc++] = strlen(head[k]);
        for (size_t k = 0; k < keys->elements; k++)
            argv[argc] = keys->element[k]->str, lens[argc++] = keys->element[k]->len;
        redisReply *rep = redisCommandArgv(r, argc, argv, lens);
        int ok = rep != NULL && rep->type != REDIS_REPLY_ERROR;
        if (!ok)
            fprintf(stderr, "MIGRATE: %s\n", rep != NULL && rep->str ? rep->str : "no answer");
        moved += (int)keys->elements;
        freeReplyObject(rep);
        freeReplyObject(keys);
        if (!ok) {
            redisFree(r);
            return -1;
        }
    }
    redisFree(r);
    h_sleep_ms(hold_ms);
    /* The new owner first, then the old one (which then redirects for good), then the rest. */
    const char *node[] = {"CLUSTER", "SETSLOT", sslot, "NODE", cl->ids[to]};
    if (node_cmd(cl, to, 5, node) != 0 || node_cmd(cl, from, 5, node) != 0)
        return -1;
    for (int i = 0; i < cl->n; i++)
        if (i != to && i != from && node_cmd(cl, i, 5, node) != 0)
            return -1;
    return moved;
}

long long h_cluster_count(const struct h_cluster *cl, int i, const char *pattern)
{
    redisContext *r = h_cluster_redis(cl, i);
    if (r == NULL)
        return -1;
    long long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *rep = redisCommand(r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
            freeReplyObject(rep);
            redisFree(r);
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        n += (long long)rep->element[1]->elements;
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    redisFree(r);
    return n;
}
