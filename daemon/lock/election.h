/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * election.h — leader elections on top of the exclusive lock
 * (docs/protocol.md §6.11).
 *
 * A campaign is an exclusive Acquire whose grant also writes the election's
 * leader record, PREFIX{name}:leader (acquire.lua): the token, the term (the
 * grant's fence) and the candidate's value, expiring with the lock (renew.lua
 * and adopt.lua keep the two together). leader.lua reads the record through
 * the lock's key, so a record whose leader lost its key is nobody's.
 *
 * Leader answers one read. Observe subscribes the session: the daemon keeps
 * one struct election per observed name, reads the leader again whenever the
 * name's channel carries a notice (a release, a campaign's grant, a
 * subscription confirmed after a reconnect) or the leader's lease may have run
 * out (a timer at its pttl: a leader whose daemon died publishes nothing), and
 * pushes LeaderChanged to each observer whose view changed — never a lower
 * term than one it was shown (reads of one name travel on one connection, in
 * order).
 */
#ifndef RLOCKD_ELECTION_H
#define RLOCKD_ELECTION_H

#include <stdint.h>

#include "rlock.pb-c.h"

struct session;
struct resource;

/*
 * Leader: read the election's leader and answer with a LeaderReply. Observe:
 * subscribe s to the election (or end that, stop set); a LeaderReply answers.
 * Each returns 1 when a request of the lock logic answers later, 0 when it
 * was answered at once (dispatch.c's op_fn).
 */
int election_leader(struct session *s, uint64_t id, const Rlock__V1__Leader *l);
int election_observe(struct session *s, uint64_t id, const Rlock__V1__Observe *o);
/* Something may have changed at res (pubsub.c): read its leader again if it is observed. */
void election_notice(struct resource *res);
/* s ends: it observes nothing any more. */
void election_session_end(struct session *s);

#endif
