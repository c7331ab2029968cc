/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * duration.h — parse human durations ("250ms", "10s", "5m", "1h", "1.5s").
 * Shared by the daemon's config and the CLI's options.
 */
#ifndef RLOCK_DURATION_H
#define RLOCK_DURATION_H

#include <stdint.h>

/*
 * Parse s into milliseconds. Units: ms, s, m, h; a bare number means
 * bare_unit_ms milliseconds per unit (1000 for seconds, 1 for milliseconds).
 * Returns 0 and stores the value, or -1 (not a duration, negative, or larger
 * than UINT32_MAX ms) leaving *out untouched.
 */
int duration_parse_ms(const char *s, uint32_t bare_unit_ms, uint64_t *out);

#endif
