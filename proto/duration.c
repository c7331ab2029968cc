/* SPDX-License-Identifier: BSD-3-Clause */
/* duration.c — see duration.h. */
#include "duration.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int duration_parse_ms(const char *s, uint32_t bare_unit_ms, uint64_t *out)
{
    if (s == NULL)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    /* Plain decimal only: digits with an optional fraction (no sign, hex or exponent). */
    const char *end = s;
    while (isdigit((unsigned char)*end))
        end++;
    if (*end == '.') {
        end++;
        while (isdigit((unsigned char)*end))
            end++;
    }
    if (end == s || (end - s == 1 && *s == '.'))
        return -1;
    char num[64];
    if ((size_t)(end - s) >= sizeof num)
        return -1;
    memcpy(num, s, (size_t)(end - s));
    num[end - s] = '\0';
    double v = strtod(num, NULL);
    while (isspace((unsigned char)*end))
        end++;
    double unit;
    size_t n = strlen(end);
    while (n > 0 && isspace((unsigned char)end[n - 1]))
        n--;
    if (n == 0)
        unit = bare_unit_ms;
    else if (n == 2 && strncmp(end, "ms", 2) == 0)
        unit = 1;
    else if (n == 1 && end[0] == 's')
        unit = 1000;
    else if (n == 1 && end[0] == 'm')
        unit = 60000;
    else if (n == 1 && end[0] == 'h')
        unit = 3600000;
    else
        return -1;
    double ms = v * unit;
    if (ms > 4294967295.0)
        return -1;
    *out = (uint64_t)(ms + 0.5);
    return 0;
}
