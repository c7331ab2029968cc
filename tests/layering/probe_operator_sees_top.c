/* SPDX-License-Identifier: BSD-3-Clause */
/* Must not compile: the top (the op table) is above the operators' view. */
#include "dispatch.h"
