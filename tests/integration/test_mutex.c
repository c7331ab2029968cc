/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_mutex.c — mutual exclusion end to end: 16 processes each run 200
 * read-sleep-write increments of a counter file under `rlockctl run`. Any
 * overlap of two critical sections loses an increment; the final count must
 * be exactly 16 * 200, and the fences the sections saw (logged in entry
 * order) must strictly increase (h_counter_run).
 */
#include "harness.h"

#define MUTEX_PROCS 16
#define MUTEX_ROUNDS 200
#define MUTEX_DEADLINE_MS 600000

START_TEST(test_mutex_counter)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    const char *addrs[] = { e.rlockd_addr };
    h_counter_run(&e, addrs, 1, MUTEX_PROCS, MUTEX_ROUNDS, MUTEX_DEADLINE_MS);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    const TTest *tests[] = { test_mutex_counter };
    return h_run_tests("mutex", MUTEX_DEADLINE_MS / 1000 + 60, tests, H_LEN(tests));
}
