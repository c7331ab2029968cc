/* SPDX-License-Identifier: BSD-3-Clause */
/* redis_conn.c — see redis_conn.h. */
#include "redis_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONNECT_TIMEOUT_S 10

redisContext *bench_redis_connect(const char *address, char *err, size_t errlen)
{
    struct timeval tv = {CONNECT_TIMEOUT_S, 0};
    redisContext *rc;
    if (strncmp(address, "unix:", 5) == 0) {
        rc = redisConnectUnixWithTimeout(address + 5, tv);
    } else {
        char host[256];
        const char *colon = strrchr(address, ':');
        size_t n = colon ? (size_t)(colon - address) : 0;
        if (colon == NULL || n == 0 || n >= sizeof host) {
            snprintf(err, errlen, "bad Redis address %s", address);
            return NULL;
        }
        /* "[::1]:6379": hiredis wants the bare IPv6 address. */
        if (address[0] == '[' && address[n - 1] == ']') {
            memcpy(host, address + 1, n - 2);
            host[n - 2] = '\0';
        } else {
            memcpy(host, address, n);
            host[n] = '\0';
        }
        rc = redisConnectWithTimeout(host, atoi(colon + 1), tv);
    }
    if (rc == NULL || rc->err) {
        snprintf(err, errlen, "connect to Redis at %s: %s", address,
                 rc ? rc->errstr : "out of memory");
        redisFree(rc);
        return NULL;
    }
    return rc;
}

long long bench_redis_dbsize(redisContext *rc)
{
    redisReply *r = redisCommand(rc, "DBSIZE");
    long long n = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}
