/* Must not compile: a program using librlock sees its public headers only. */
#include "rlock_internal.h"
