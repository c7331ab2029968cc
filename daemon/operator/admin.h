/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * admin.h — the operator's requests: listings of sessions and locks, forced
 * release, ending a session, and the server's description.
 *
 * Each handler answers exactly once, at once (no Redis round trip is
 * awaited). Who may send them is decided before (dispatch.c, auth.h).
 * Listings come in pages (admin_list.c): every reply is bounded in entries,
 * bytes and work, so that neither a million locks nor a slow reader makes one
 * giant frame or stalls the loop. docs/protocol.md §9 is the contract.
 */
#ifndef RLOCKD_ADMIN_H
#define RLOCKD_ADMIN_H

#include <stdint.h>

#include "rlock.pb-c.h"

struct server;
struct session;
struct admin_ranked;

/* Entries per page when the request says 0, and the most a request may ask for. */
#define ADMIN_LIMIT_DEFAULT 100
#define ADMIN_LIMIT_MAX 1000
/* Most bytes of entries in one reply; lower when [server] max_output_bytes is small. */
#define ADMIN_PAGE_BYTES (256 * 1024)
/* Most hash buckets one ListLocks request visits, whatever its filters match. */
#define ADMIN_SCAN_BUCKETS 8192
/* Most queued requests one ListSessions request counts (for `waiting`). */
#define ADMIN_SCAN_REQUESTS 65536

void admin_list_sessions(struct session *s, uint64_t id, const Rlock__V1__ListSessions *q);
void admin_list_locks(struct session *s, uint64_t id, const Rlock__V1__ListLocks *q);
void admin_force_release(struct session *s, uint64_t id, const Rlock__V1__ForceRelease *q);
void admin_kill_session(struct session *s, uint64_t id, const Rlock__V1__KillSession *q);
void admin_server_info(struct session *s, uint64_t id, const Rlock__V1__ServerInfo *q);
/* The most contended resources (admin_top.c, contention.h). */
void admin_top_resources(struct session *s, uint64_t id, const Rlock__V1__TopResources *q);

/* A TopResourcesReply built for the TopResources request and the status page. */
struct admin_top {
    Rlock__V1__TopResourcesReply reply; /* points into the rest */
    struct admin_ranked *all;
    Rlock__V1__ResourceStats *stats, **ptrs;
    Rlock__V1__Holder *holders;
};
/* The first limit resources in order, their entries at most budget bytes (the first always
 * there); 0, or -1 when out of memory (t then holds nothing). Free with admin_top_free. */
int admin_top_build(struct server *srv, Rlock__V1__TopOrder order, uint32_t limit, size_t budget,
                    struct admin_top *t);
void admin_top_free(struct admin_top *t);
/* Stats (any role): the counts and every metric's samples, beside ServerInfo's view. */
void admin_stats(struct session *s, uint64_t id);

/* The byte bound of one reply's entries for s's server (see ADMIN_PAGE_BYTES). */
uint32_t admin_page_bytes(const struct session *s);
/* A request's limit made effective: 0 -> the default, capped at the maximum. */
uint32_t admin_limit(uint32_t asked);

#endif
