/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c — the stop gate: once shutdown has begun, the loop ends when
 * nothing is left to wait for (rlockd.c starts and stops the daemon).
 */
#include "server.h"

#include <event2/event.h>

#include "log.h"
#include "util.h"

#define SERVER_FLUSH_MS 100 /* let final replies drain once the releases are done */

static void server_finish(struct server *srv)
{
    struct timeval tv = util_tv_ms(SERVER_FLUSH_MS);
    event_base_loopexit(srv->base, &tv);
}

void server_check_stopped(struct server *srv)
{
    if (!srv->stopping || srv->finishing || srv->background > 0 || srv->ncleanups > 0 ||
        !TAILQ_EMPTY(&srv->ending))
        return;
    srv->finishing = 1;
    log_info("all locks released");
    server_finish(srv);
}

void server_background_done(struct server *srv)
{
    srv->background--;
    server_check_stopped(srv);
}
