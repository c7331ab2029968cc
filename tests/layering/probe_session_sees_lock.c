/* SPDX-License-Identifier: BSD-3-Clause */
/* Must not compile: the session layer is below the lock logic. */
#include "lock.h"
