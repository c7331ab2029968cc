/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report.h — the results of one run as an ordered list of named values,
 * printed either as aligned text for people or as one flat JSON object for
 * scripts (every value a number or a string, no nesting), so that
 * `jq .pairs_per_s` is all a script needs.
 */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stdint.h>
#include <stdio.h>

#define REPORT_MAX 160

struct report_item {
    char key[48];
    int kind;      /* 0 unsigned, 1 real, 2 string */
    int decimals;  /* for reals */
    uint64_t u;
    double d;
    char s[128];
};

struct report {
    int n;
    struct report_item item[REPORT_MAX];
};

void report_u64(struct report *r, const char *key, uint64_t v);
void report_real(struct report *r, const char *key, double v, int decimals);
void report_str(struct report *r, const char *key, const char *v);
/* key made from a prefix and a name ("errors_" "timeout"). */
void report_u64_2(struct report *r, const char *prefix, const char *name, uint64_t v);
void report_print(const struct report *r, FILE *out, int json);

#endif
