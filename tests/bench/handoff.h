/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * handoff.h — how long a resource stays free between two holders in this
 * process: from the moment the previous holder saw its release complete to
 * the moment the next holder saw its grant. One slot per resource, shared by
 * every worker, guarded by striped mutexes (a handful of operations per pair,
 * next to a network round trip).
 *
 * The two events are seen by different threads, and the grant may be seen
 * first (the daemon answers both at once, the releasing thread runs later):
 * such a grant is kept pending and measured when the release completion
 * arrives, as 0 (it is counted as "early"). A grant seen while the previous
 * holder had not even sent its release means two holders at once: it is
 * counted as an overlap, which a correct lock service never produces.
 */
#ifndef BENCH_HANDOFF_H
#define BENCH_HANDOFF_H

#include <stdint.h>

struct handoff;

/* A tracker for resources 0..n-1. NULL when out of memory. */
struct handoff *handoff_new(uint64_t n);
void handoff_free(struct handoff *h);

struct handoff_event {
    int64_t ns;  /* the handoff, or -1 when none is measured by this event */
    int early;   /* 1: the grant was seen before the release completion */
    int overlap; /* 1: granted while the previous holder had not sent its release */
};

/* Resource i was granted at t_grant to an acquire first tried at t_start. A handoff is
 * measured only when the resource was released after t_start (the acquirer waited for it). */
struct handoff_event handoff_granted(struct handoff *h, uint64_t i, int64_t t_start,
                                     int64_t t_grant);
/* The holder of i is about to send its release. */
void handoff_releasing(struct handoff *h, uint64_t i);
/* The holder of i saw its release complete at t_done. */
struct handoff_event handoff_released(struct handoff *h, uint64_t i, int64_t t_done);

#endif
