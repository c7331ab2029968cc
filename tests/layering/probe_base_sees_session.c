/* SPDX-License-Identifier: BSD-3-Clause */
/* Must not compile: base is the lowest layer. */
#include "session.h"
