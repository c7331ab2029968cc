/* SPDX-License-Identifier: BSD-3-Clause */
/* Must compile: the lock logic sees itself, sessions, Redis and base. */
#include "lock.h"
#include "pool.h"
#include "server.h"
#include "session.h"

int probe_lock_sees_below(void);
int probe_lock_sees_below(void)
{
    return (int)sizeof(struct server);
}
