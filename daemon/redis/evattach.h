/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * evattach.h — hiredis's async context on a libevent loop, with persistent events.
 */
#ifndef RLOCKD_EVATTACH_H
#define RLOCKD_EVATTACH_H

#include <event2/event.h>
#include <hiredis/async.h>

/*
 * Attach AC to BASE (instead of hiredis's adapters/libevent.h). That adapter's
 * read event is not persistent: libevent drops it when it fires and hiredis adds
 * it back after each read, so every reply cost an epoll_ctl (one syscall of the
 * seven the daemon spent per request). Here the read event stays armed until
 * hiredis asks for it to be removed, and adding or removing what is already so
 * is a no-op. Returns 0, or -1 (out of memory, or AC already attached).
 */
int evattach(redisAsyncContext *ac, struct event_base *base);

#endif
