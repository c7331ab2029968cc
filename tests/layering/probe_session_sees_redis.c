/* SPDX-License-Identifier: BSD-3-Clause */
/* Must not compile: sessions and Redis do not know each other. */
#include "pool.h"
