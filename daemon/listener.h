/*
 * listener.h — the sockets rlockd accepts clients on (TCP and unix).
 */
#ifndef RLOCKD_LISTENER_H
#define RLOCKD_LISTENER_H

struct server;

/* Open every address of cfg->listen onto srv->listeners; 0, or -1 after logging why. */
int listener_open_all(struct server *srv);
/* Close and free every listener (unix socket files are removed). */
void listener_close_all(struct server *srv);

#endif
