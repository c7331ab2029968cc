/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hist.h — a log-bucket latency histogram (the HDR idea): fixed memory,
 * bounded relative error, mergeable, so every worker keeps its own and they
 * are summed at the end without a lock on the hot path.
 *
 * Values are nanoseconds. Below 128 every value has its own bucket; above,
 * each power of two is cut into 64 buckets, so a reported value is within
 * 0.8% of the true one. Not thread-safe: one writer per histogram.
 */
#ifndef BENCH_HIST_H
#define BENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_BUCKETS ((1u << HIST_SUB_BITS) + (64u - HIST_SUB_BITS) * (1u << (HIST_SUB_BITS - 1)))

struct hist {
    uint64_t count;
    uint64_t min;
    uint64_t max;
    double sum;
    uint64_t bucket[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_add(struct hist *h, uint64_t v);
/* Add every value of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);
/* The value at quantile q (0..1): the middle of its bucket, clamped to [min, max]; 0 when empty. */
uint64_t hist_quantile(const struct hist *h, double q);
double hist_mean(const struct hist *h);

#endif
