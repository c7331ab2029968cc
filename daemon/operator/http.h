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
/* Move the endpoint to listen ("" = off) after a reload; 0, or -1 when it could not move
 * (it stays where it was, or is off when even that failed: see http_listening). */
int http_reconfigure(struct server *srv, const char *listen);
/* Where the endpoint listens now (the configured text), or NULL when it is off. */
const char *http_listening(const struct server *srv);
/* Connections open to the endpoint now. */
uint32_t http_connections(const struct server *srv);

#endif
