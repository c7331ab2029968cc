/* SPDX-License-Identifier: BSD-3-Clause */
/* Must not compile: Redis and sessions do not know each other. */
#include "session.h"
