/* SPDX-License-Identifier: BSD-3-Clause */
/* Must not compile: the lock logic is below the operators' view. */
#include "metrics.h"
