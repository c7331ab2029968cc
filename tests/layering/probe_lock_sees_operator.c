/* Must not compile: the lock logic is below the operators' view. */
#include "metrics.h"
