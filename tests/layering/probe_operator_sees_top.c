/* Must not compile: the top (the op table) is above the operators' view. */
#include "dispatch.h"
