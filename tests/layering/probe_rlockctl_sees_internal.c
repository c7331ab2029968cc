/* SPDX-License-Identifier: BSD-3-Clause */
/* Must not compile: a program using librlock sees its public headers only. */
#include "rlock_internal.h"
