/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockd.h — the daemon as a whole (rlockd.c): build it from a config, run
 * its loop until shutdown completes, free it.
 */
#ifndef RLOCKD_RLOCKD_H
#define RLOCKD_RLOCKD_H

#include "server.h"

struct config;

/* Build the server from cfg (taking ownership) and open listeners; NULL on failure. */
struct server *rlockd_new(struct config *cfg, const char *config_path);
/* Run the loop until SIGTERM/SIGINT shutdown completes. Returns the exit status. */
int rlockd_run(struct server *srv);
void rlockd_free(struct server *srv);

#endif
