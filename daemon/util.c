/* util.c — see util.h. */
#include "util.h"

#include <stdlib.h>
#include <time.h>
#include <uuid/uuid.h>

int64_t util_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t util_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint32_t util_hash(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

void util_uuid(char *buf)
{
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, buf);
}

struct timeval util_tv_ms(int64_t ms)
{
    struct timeval tv = {0, 0};
    if (ms > 0) {
        tv.tv_sec = (time_t)(ms / 1000);
        tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    }
    return tv;
}

uint32_t util_rand(uint32_t n)
{
    return (uint32_t)(random() % n);
}
