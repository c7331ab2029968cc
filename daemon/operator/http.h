/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * http.h — the metrics and health endpoint ([metrics] listen): /metrics,
 * /healthz, /readyz. See http.c.
 */
#ifndef RLOCKD_HTTP_H
#define RLOCKD_HTTP_H

#include <stdint.h>

struct server;

/* Open the endpoint of srv->cfg (nothing when [metrics] listen is empty); 0 or -1. */
int http_start(struct server *srv);
void http_stop(struct server *srv);
/* Move the endpoint to listen ("" = off) after a reload; 0, or -1 (then it is off). */
int http_reconfigure(struct server *srv, const char *listen);
/* Connections open to the endpoint now. */
uint32_t http_connections(const struct server *srv);

#endif
