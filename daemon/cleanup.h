/*
 * cleanup.h — compare-and-delete calls that must not be forgotten.
 *
 * When a release could not be confirmed (Redis unreachable, or a command
 * timed out), or an acquire's outcome is unknown, the key may hold a token
 * nobody will ever release. Deleting it by token is always safe, so such
 * (key, token) pairs wait here and are retried with backoff while their
 * lease could still exist in Redis. An acquire stuck in a dead connection's
 * socket buffer may even execute after the first retry, hence the retries
 * until the lease's end rather than until the first "not there".
 */
#ifndef RLOCKD_CLEANUP_H
#define RLOCKD_CLEANUP_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct cleanup_list;

struct cleanup_list *cleanup_new(void);
/* Free every entry (calls in flight keep theirs until they complete). Accepts NULL. */
void cleanup_free(struct cleanup_list *cl);
uint32_t cleanup_count(const struct cleanup_list *cl);

/*
 * Remember to delete key if it holds token, until until_ms (CLOCK_MONOTONIC).
 * Entries past a fixed bound are dropped with a warning: their keys expire
 * by their ttl.
 */
void cleanup_add(struct server *srv, const char *key, size_t key_len, uint32_t route,
                 const char *token, int64_t until_ms);

/* Send the retries that are due; called from the watchdog tick. */
void cleanup_tick(struct server *srv);

#endif
