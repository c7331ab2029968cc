/* SPDX-License-Identifier: BSD-3-Clause */
/* hist.c — see hist.h. */
#include "hist.h"

#include <string.h>

#define SUB (1u << HIST_SUB_BITS)
#define HALF (SUB / 2)

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

static unsigned bucket_of(uint64_t v)
{
    if (v < SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= HIST_SUB_BITS */
    unsigned shift = e - HIST_SUB_BITS + 1;
    unsigned m = (unsigned)(v >> shift); /* in [HALF, SUB) */
    return SUB + (e - HIST_SUB_BITS) * HALF + (m - HALF);
}

/* The middle of bucket i. */
static uint64_t bucket_value(unsigned i)
{
    if (i < SUB)
        return i;
    unsigned e = (i - SUB) / HALF + HIST_SUB_BITS;
    unsigned m = (i - SUB) % HALF + HALF;
    unsigned shift = e - HIST_SUB_BITS + 1;
    return ((uint64_t)m << shift) + ((uint64_t)1 << shift) / 2;
}

void hist_add(struct hist *h, uint64_t v)
{
    h->bucket[bucket_of(v)]++;
    h->count++;
    h->sum += (double)v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    if (src->count == 0)
        return;
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        dst->bucket[i] += src->bucket[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
    if (h->count == 0)
        return 0;
    /* The smallest value with at least q of all values at or below it. */
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.5);
    if (rank < 1)
        rank = 1;
    if (rank > h->count)
        rank = h->count;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= rank) {
            uint64_t v = bucket_value(i);
            if (v < h->min)
                v = h->min;
            if (v > h->max)
                v = h->max;
            return v;
        }
    }
    return h->max;
}

double hist_mean(const struct hist *h)
{
    return h->count ? h->sum / (double)h->count : 0.0;
}
