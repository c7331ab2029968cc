/* Must not compile: sessions and Redis do not know each other. */
#include "pool.h"
