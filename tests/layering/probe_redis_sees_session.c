/* Must not compile: Redis and sessions do not know each other. */
#include "session.h"
