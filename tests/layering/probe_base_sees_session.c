/* Must not compile: base is the lowest layer. */
#include "session.h"
