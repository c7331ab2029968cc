/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_tcp.c — Redis servers and sentinels on loopback TCP ports (the
 * Sentinel and Cluster tests: those speak TCP to each other).
 *
 * A port found free may be taken by someone else before the server the test
 * starts binds it: CI machines run other suites' redis-server processes at
 * the same time. So a test never trusts "something answers on my port": it
 * waits until the server answering there reports the pid it started (INFO
 * server, process_id), and starts it again on another port when its server
 * exits (address in use) or another process answers there.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int h_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

pid_t h_tcp_redis_pid(int port, const char *password)
{
    struct timeval tv = {2, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (r == NULL || r->err) {
        if (r != NULL)
            redisFree(r);
        return 0;
    }
    redisSetTimeout(r, tv);
    redisReply *rep;
    if (password != NULL && password[0] != '\0') {
        rep = redisCommand(r, "AUTH %s", password);
        if (rep != NULL)
            freeReplyObject(rep);
    }
    pid_t pid = 0;
    rep = redisCommand(r, "INFO server");
    if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
        const char *at = strstr(rep->str, "\nprocess_id:");
        if (at != NULL)
            pid = (pid_t)atol(at + strlen("\nprocess_id:"));
    }
    if (rep != NULL)
        freeReplyObject(rep);
    redisFree(r);
    return pid;
}

int h_tcp_redis_wait(pid_t pid, int port, const char *password, int timeout_ms)
{
    int64_t until = h_now_ms() + timeout_ms;
    pid_t seen = 0;
    while (h_now_ms() < until) {
        if (!h_alive(pid))
            return -1;
        seen = h_tcp_redis_pid(port, password);
        if (seen == pid)
            return 0;
        h_sleep_ms(20);
    }
    if (seen != 0)
        fprintf(stderr, "harness: pid %d answers on port %d, not our pid %d\n", (int)seen, port,
                (int)pid);
    return -1;
}
