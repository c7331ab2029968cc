/*
 * dispatch.h — decode one request frame and hand it to its operation.
 */
#ifndef RLOCKD_DISPATCH_H
#define RLOCKD_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

struct session;

/* Handle one frame body of len bytes (already bounded by max_frame_bytes). */
void dispatch_frame(struct session *s, const uint8_t *data, size_t len);
/* The name of an operation (a Request oneof case), or NULL when there is none. */
const char *dispatch_op_name(int op);

#endif
