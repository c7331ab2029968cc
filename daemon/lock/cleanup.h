/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cleanup.h — compare-and-delete calls that must not be forgotten.
 *
 * A key may hold a token nobody will release: a release Redis did not
 * confirm, an acquire whose outcome is unknown, a lease lost (EXPIRED,
 * MAX_HOLD) whose key may still exist. Deleting it by token is always safe,
 * so such (key, token) pairs wait here and are deleted as soon as allowed
 * (not before not_before), retried with backoff while Redis does not answer.
 *
 * A command whose answer never came may still run later: it sits in the
 * socket buffer of a connection we dropped, and a stalled Redis runs it when
 * it resumes. Redis processes that buffer within moments of answering
 * anything again, so an entry ends only with an answer that came at least
 * CLEANUP_SETTLE_MS after Redis first answered it: by then no late command
 * can set the key again. An entry whose Redis never answers is dropped at
 * give_up (past the key's longest possible life).
 */
#ifndef RLOCKD_CLEANUP_H
#define RLOCKD_CLEANUP_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct resource;
struct cleanup_list;

/* After Redis first answers an entry, how long until the answer that ends it. */
#define CLEANUP_SETTLE_MS 2000

struct cleanup_list *cleanup_new(struct server *srv);
/* Free every entry (calls in flight keep theirs until they complete). Accepts NULL. */
void cleanup_free(struct cleanup_list *cl);
uint32_t cleanup_count(const struct cleanup_list *cl);

/*
 * Delete res's key if it holds token (shared: give up token's place among
 * res's shared holders, group_release.lua), from not_before_ms on (util_now_ms()
 * clock), until Redis confirms after the settle time or give_up_ms passes;
 * a delete that took the key wakes res's local waiters. The entry keeps a
 * reference to res. Entries past a fixed bound are dropped with a warning:
 * their keys expire by their ttl.
 */
void cleanup_add(struct server *srv, struct resource *res, const char *token, int shared,
                 int64_t not_before_ms, int64_t give_up_ms);
/*
 * The daemon is shutting down and exits by deadline_ms: entries due by then
 * get one attempt each (no settle time, no retry), later ones are dropped
 * with a warning, and new ones are not taken (what fails while stopping has
 * had its attempt). Their keys expire by their ttl.
 */
void cleanup_stop(struct cleanup_list *cl, int64_t deadline_ms);

#endif
