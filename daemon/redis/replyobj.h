/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replyobj.h — hiredis reply objects from a free list.
 *
 * hiredis builds every reply with one calloc per object: a renew batch of 64
 * locks answers an array of 64 integers, 65 allocations freed right after
 * its callback. Holding a million locks (100,000 renewals a second), glibc's
 * allocator under the reader was 12% of rlockd's samples (perf, P4). The
 * objects here come from a bounded free list instead; the strings and the
 * arrays' element vectors are still malloc'd, as hiredis does.
 *
 * The list is the process's (rlockd's loop is one thread): what is freed on
 * one connection is reused on any. It keeps at most REPLYOBJ_CACHE_MAX free
 * objects (192 KiB); beyond that they are given back to malloc.
 */
#ifndef RLOCKD_REPLYOBJ_H
#define RLOCKD_REPLYOBJ_H

#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/read.h>

#define REPLYOBJ_CACHE_MAX 4096

/* Build ac's replies with the free list (before its first command). */
void replyobj_use(redisAsyncContext *ac);
/* The reader functions replyobj_use installs (for a reader of one's own). */
redisReplyObjectFunctions *replyobj_functions(void);
/* Objects kept on the free list now. */
uint32_t replyobj_cached(void);
/* Give the free list's objects back to malloc (at exit: nothing keeps them). */
void replyobj_drain(void);

#endif
