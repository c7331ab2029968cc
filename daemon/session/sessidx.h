/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sessidx.h — the live sessions by serial number and by id, for the admin
 * requests: a page of the session list starts after a serial number, and
 * KillSession and the session filter of ListLocks name a session by its id.
 *
 * Serials are given in connection order and never reused, so the live
 * sessions sorted by serial are the sessions in the order they connected,
 * and the first session after any serial — live or long gone — is found by
 * binary search. A session is in the index from session_new until
 * session_close.
 */
#ifndef RLOCKD_SESSIDX_H
#define RLOCKD_SESSIDX_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct session;
struct sessidx;

/* An empty index hashing ids under key (secret, per process). NULL when out of memory. */
struct sessidx *sessidx_new(const uint8_t key[UTIL_HASH_KEY_BYTES]);
/* Free the index (not the sessions). Accepts NULL. */
void sessidx_free(struct sessidx *x);

/*
 * Give s the next serial (s->serial) and index it. Returns 0, or -1 when out
 * of memory (s then has its serial but is not listed or found).
 */
int sessidx_add(struct sessidx *x, struct session *s);
/* Take s out of the index (no-op when it is not in it). */
void sessidx_remove(struct sessidx *x, struct session *s);

/* The live session with this id, or NULL. */
struct session *sessidx_find(const struct sessidx *x, const char *id);

/*
 * Iteration in serial order: the position of the first live session with a
 * serial above after (0 = from the start); then sessidx_at gives the
 * session at a position (NULL at the end) and moves *pos past it. Positions
 * are valid until the index next changes.
 */
size_t sessidx_seek(const struct sessidx *x, uint64_t after);
struct session *sessidx_at(const struct sessidx *x, size_t *pos);

#endif
