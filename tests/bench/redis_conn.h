/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redis_conn.h — a synchronous hiredis connection from an address in the
 * project's notation ("HOST:PORT", "[v6]:PORT" or "unix:/path"), and the
 * few one-line commands the runs need.
 */
#ifndef BENCH_REDIS_CONN_H
#define BENCH_REDIS_CONN_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/* NULL with a message in err when the connect fails (10 s limit). */
redisContext *bench_redis_connect(const char *address, char *err, size_t errlen);
/* DBSIZE; -1 on error. */
long long bench_redis_dbsize(redisContext *rc);

#endif
