/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * status.h — the status page's data: what the daemon serves, its Redis, and
 * the most contended resources with their holders, as one JSON document
 * (GET /status.json on the metrics endpoint; docs/operations.md, "The status
 * page"). The page itself (www/status.*) is static and draws this document.
 */
#ifndef RLOCKD_STATUS_H
#define RLOCKD_STATUS_H

#include <stddef.h>

#include <event2/buffer.h>

struct server;

/* Resources the document lists (by wait), at most. */
#define STATUS_TOP 10

/* Append the document to out; 0, or -1 when out of memory (out then holds part of it). */
int status_render(struct server *srv, struct evbuffer *out);

/* Where rlockd's Redis is, for people: "unix:/run/redis.sock", "sentinel master
 * 10.0.0.5:6379", "sentinel: no master named yet", "cluster, 6 nodes known". */
void status_redis_where(const struct server *srv, char *buf, size_t len);

#endif
