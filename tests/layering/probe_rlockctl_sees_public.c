/* SPDX-License-Identifier: BSD-3-Clause */
/* Must compile: a program using librlock sees rlock.h. */
#include "rlock.h"

int probe_rlockctl_sees_public(void);
int probe_rlockctl_sees_public(void)
{
    return RLOCK_OK;
}
