/* SPDX-License-Identifier: BSD-3-Clause */
/* resp.c — see resp.h. */
#include "resp.h"

#include <string.h>

#include <check.h>

redisReply *unit_resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    ck_assert_ptr_nonnull(rd);
    ck_assert_int_eq(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    void *reply = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_msg(reply != NULL, "no whole reply in %s", text);
    redisReaderFree(rd);
    return reply;
}
