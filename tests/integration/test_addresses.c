/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_addresses.c — a client given several daemons (rlock_connect's address
 * list, rlockctl --server and $RLOCK_SERVER), against real rlockd processes:
 *  - a list whose other entries are dead (a unix path nobody listens on, a
 *    closed TCP port) still connects, every time, whichever entry is tried
 *    first;
 *  - clients spread over the daemons of a list (a random first entry);
 *  - a malformed entry anywhere in the list is an argument error, and a list
 *    of dead daemons says how many it tried.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define CONNECTS 40

/* The pid of the daemon c is connected to (ServerInfo: no auth, every session may ask). */
static uint32_t daemon_pid(struct rlock_client *c)
{
    struct rlock_server_info info;
    h_assert_ok(c, rlock_server_info(c, 5000, &info));
    return info.pid;
}

START_TEST(test_dead_entries)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    char list[1024];
    int port = h_free_port(); /* nobody listens there */
    snprintf(list, sizeof list, "unix:%s/nobody.sock, 127.0.0.1:%d,%s", e.dir, port,
             e.rlockd_addr);
    for (int i = 0; i < 10; i++) {
        struct rlock_client *c = NULL;
        char err[256] = "";
        enum rlock_err rc = rlock_connect(list, NULL, &c, err, sizeof err);
        ck_assert_msg(rc == RLOCK_OK, "connect %d to \"%s\": %s", i, list, err);
        ck_assert_uint_eq(daemon_pid(c), (uint32_t)e.rlockd_pid);
        rlock_close(c);
    }
    /* Only dead ones: the error says so. */
    snprintf(list, sizeof list, "unix:%s/nobody.sock,127.0.0.1:%d", e.dir, port);
    struct rlock_client *c = NULL;
    char err[256] = "";
    ck_assert_int_eq(rlock_connect(list, NULL, &c, err, sizeof err), RLOCK_ERR_CONNECT);
    ck_assert_msg(strstr(err, "none of the 2 addresses") != NULL, "%s", err);
    /* A malformed entry anywhere: an argument error, whatever the others. */
    const char *bad[] = {"%s,127.0.0.1", "%s,,unix:/x", "%s,127.0.0.1:0", "%s,unix:", "%s,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(list, sizeof list, bad[i], e.rlockd_addr);
        ck_assert_msg(rlock_connect(list, NULL, &c, err, sizeof err) == RLOCK_ERR_ARG,
                      "\"%s\" was not refused as malformed (%s)", list, err);
    }
    h_env_stop(&e);
}
END_TEST

START_TEST(test_spread)
{
    struct h_env a, b;
    h_env_start_or_fail(&a, NULL);
    ck_assert_int_eq(h_env_start_peer(&b, &a, NULL), 0);
    char list[1024];
    snprintf(list, sizeof list, "%s,%s", a.rlockd_addr, b.rlockd_addr);
    int on_a = 0, on_b = 0;
    for (int i = 0; i < CONNECTS; i++) {
        struct rlock_client *c = NULL;
        char err[256] = "";
        ck_assert_int_eq(rlock_connect(list, NULL, &c, err, sizeof err), RLOCK_OK);
        uint32_t pid = daemon_pid(c);
        on_a += pid == (uint32_t)a.rlockd_pid;
        on_b += pid == (uint32_t)b.rlockd_pid;
        rlock_close(c);
    }
    printf("addresses/spread: %d connects: %d on A, %d on B\n", CONNECTS, on_a, on_b);
    ck_assert_int_eq(on_a + on_b, CONNECTS);
    /* A fair coin gives fewer than 5 of 40 one time in ten million. */
    ck_assert_msg(on_a >= 5 && on_b >= 5, "clients did not spread: %d on A, %d on B", on_a,
                  on_b);

    /* rlockctl takes the same list, by --server and by $RLOCK_SERVER. */
    char bin[512], out[320], dead[1024];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(&a, "ctl.out", out, sizeof out);
    snprintf(dead, sizeof dead, "unix:%s/nobody.sock,%s", a.dir, b.rlockd_addr);
    char *argv[] = {bin, "--server", dead, "run", "spread/r", "--", "true", NULL};
    int status;
    pid_t pid = h_spawn(argv, out);
    ck_assert_int_eq(h_wait_exit(pid, 30000, &status), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rlockctl --server LIST: %d",
                  status);
    setenv("RLOCK_SERVER", dead, 1);
    char *argv2[] = {bin, "run", "spread/r", "--", "true", NULL};
    pid = h_spawn(argv2, out);
    ck_assert_int_eq(h_wait_exit(pid, 30000, &status), 0);
    unsetenv("RLOCK_SERVER");
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "RLOCK_SERVER=LIST: %d",
                  status);
    h_env_stop(&b);
    h_env_stop(&a);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_dead_entries, test_spread};
    return h_run_tests("addresses", 120, tests, H_LEN(tests));
}
