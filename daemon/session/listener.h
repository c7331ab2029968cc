/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * listener.h — the sockets rlockd accepts clients on (TCP and unix).
 */
#ifndef RLOCKD_LISTENER_H
#define RLOCKD_LISTENER_H

#include <event2/listener.h>

struct server;
struct config_address;

/* Open every address of cfg->listen onto srv->listeners; 0, or -1 after logging why. */
int listener_open_all(struct server *srv);
/* Close and free every listener (unix socket files are removed). */
void listener_close_all(struct server *srv);

/* Descriptors kept free for Redis reconnects, the log and the configuration: a session
 * accepted into them is closed at once. The metrics endpoint keeps twice as many, so that
 * its peers cannot take the descriptors new sessions need. */
#define LISTENER_FD_RESERVE 32
/* 1 when fd, just accepted, leaves the last reserve descriptors of the limit untouched. */
int listener_fd_spare(evutil_socket_t fd, unsigned reserve);

/*
 * A listening socket on addr (a unix socket file left by a crashed run is
 * replaced) calling cb for each connection; NULL (errno set) on failure.
 * Shared with the HTTP endpoint.
 */
struct evconnlistener *listener_bind(struct event_base *base, const struct config_address *addr,
                                     evconnlistener_cb cb, void *arg);

#endif
