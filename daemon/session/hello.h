/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hello.h — how a connection becomes a session: Hello opens a new one,
 * Resume carries on one opened before, on this daemon or on another sharing
 * its resume key (seal.h). Either is the first request of a connection; a
 * refused one closes it.
 */
#ifndef RLOCKD_HELLO_H
#define RLOCKD_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include "rlock.pb-c.h"

struct session;

/* Longest client_name. */
#define HELLO_NAME_MAX 128

/*
 * The fields Hello and Resume share: protocol version, client name (length,
 * UTF-8, no control characters). NULL when acceptable; else the message of
 * the INVALID answer (static, or written to buf of len bytes) with
 * *close_reason, the reason logged as the session is closed.
 */
const char *hello_check(uint32_t protocol_version, const char *client_name, char *buf, size_t len,
                        const char **close_reason);

/* Hello: check, authenticate, activate and answer (HelloReply with the session's secret). */
void hello_open(struct session *s, uint64_t id, const Rlock__V1__Hello *h);

/*
 * Resume: the same checks and authentication, then proof of the session
 * (its secret). The connection takes the session's id; a connection of the
 * same session still open here is closed as moved (its locks are left to the
 * Adopts that follow). Answered with a HelloReply, resumed set.
 */
void hello_resume(struct session *s, uint64_t id, const Rlock__V1__Resume *r);

/*
 * After a reload swapped srv->cfg (its tokens: before is the old table): a session whose
 * token is gone is ended, one whose token's role changed takes the new role, and with
 * authentication off every session is open. When authentication was just turned on,
 * sessions opened without a token are ended at once unless grace_running (the caller ends
 * them later with hello_auth_grace_end, auth.tokenless_grace).
 */
struct server;
struct auth_tokens;
void hello_auth_reloaded(struct server *srv, const struct auth_tokens *before, int grace_running);
/* End the sessions opened without a token, if authentication is (still) on. */
void hello_auth_grace_end(struct server *srv);

#endif
