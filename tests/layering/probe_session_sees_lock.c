/* Must not compile: the session layer is below the lock logic. */
#include "lock.h"
