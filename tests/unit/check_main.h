/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_main.h — build a Check suite from a table and turn its outcome into
 * an exit code.
 *
 * Check 0.15 exits 0 when nothing ran (a misspelled suite or test case name
 * in CK_RUN_SUITE / CK_RUN_CASE), so zero tests run counts as a failure here.
 */
#ifndef RLOCK_UNIT_CHECK_MAIN_H
#define RLOCK_UNIT_CHECK_MAIN_H

#include <stddef.h>

#include <check.h>

/* One row of a test program's table. */
struct unit_test {
    const char *tcase;  /* test case; consecutive rows with one name share it */
    const TTest *test;  /* the name given to START_TEST */
    int loops;          /* 0: run once; n > 0: run with _i = 0 .. n-1 */
};

/* Number of elements of an array, as an int for Check's loop bounds. */
#define UNIT_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/*
 * Run the n tests of table as suite name, with the environment's CK_*
 * settings. Returns EXIT_SUCCESS only when at least one test ran and none
 * failed.
 */
int unit_run(const char *name, const struct unit_test *table, size_t n);

#endif
