/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * resp.h — Redis replies for unit tests, built from RESP text by hiredis' own
 * reader: exactly what a connection hands the code under test.
 */
#ifndef RLOCK_UNIT_RESP_H
#define RLOCK_UNIT_RESP_H

#include <hiredis/hiredis.h>

/* The one whole reply in text (the caller frees it with freeReplyObject); fails the test else. */
redisReply *unit_resp(const char *text);

#endif
