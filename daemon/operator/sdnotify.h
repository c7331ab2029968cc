/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sdnotify.h — the systemd notify protocol (Type=notify), written by hand.
 * See sdnotify.c for what is sent when.
 */
#ifndef RLOCKD_SDNOTIFY_H
#define RLOCKD_SDNOTIFY_H

struct server;

/* Start (after the listeners are open) when NOTIFY_SOCKET is set; 0, or -1. */
int sdnotify_start(struct server *srv);
void sdnotify_stop(struct server *srv);
/* RELOADING=1 with MONOTONIC_USEC; then READY=1 when the reload is over. */
void sdnotify_reloading(struct server *srv);
void sdnotify_reloaded(struct server *srv);
/* STOPPING=1. */
void sdnotify_stopping(struct server *srv);

#endif
