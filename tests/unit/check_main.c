/* SPDX-License-Identifier: BSD-3-Clause */
/* check_main.c — see check_main.h. */
#include "check_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int unit_run(const char *name, const struct unit_test *table, size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = NULL;
    for (size_t i = 0; i < n; i++) {
        if (tc == NULL || strcmp(table[i].tcase, table[i - 1].tcase) != 0) {
            tc = tcase_create(table[i].tcase);
            /* Check's default is 4 s a test: the table test takes 2 s alone, more on a
             * loaded machine. ctest's own timeout still bounds the program. */
            tcase_set_timeout(tc, 120);
            suite_add_tcase(s, tc);
        }
        if (table[i].loops > 0)
            tcase_add_loop_test(tc, table[i].test, 0, table[i].loops);
        else
            tcase_add_test(tc, table[i].test);
    }
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int run = srunner_ntests_run(sr);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (run == 0) {
        fprintf(stderr, "%s: no tests ran (check CK_RUN_SUITE / CK_RUN_CASE)\n", name);
        return EXIT_FAILURE;
    }
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
