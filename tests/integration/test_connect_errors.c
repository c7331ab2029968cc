/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_connect_errors.c — a connect that fails says which address was tried
 * and what to check, through librlock (rlock_connect's err) and rlockctl
 * (its stderr, exit 69):
 *
 *   - a unix socket path where no socket is: "no socket at that path", the
 *     daemon's default address named;
 *   - a TCP port nothing listens on (a port this test bound and closed):
 *     "nothing listens there: is rlockd running", the default named;
 *   - a unix socket file nobody listens on (bound, never listened): "nothing
 *     listens on that socket".
 *
 * No daemon is started: that is the point.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/rlconn.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* The directory and what the test left in it. */
static void drop_dir(void)
{
    static const char *const names[] = {"ctl.out", "ctl.err", "stale.sock"};
    char path[128];
    for (size_t i = 0; i < H_LEN(names); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* address given to rlock_connect and to rlockctl ping: both fail naming it, with hint. */
static void expect_hint(const char *address, const char *hint)
{
    char err[512] = "";
    struct rlock_client *c = NULL;
    ck_assert_int_eq(rlock_connect(address, NULL, &c, err, sizeof err), RLOCK_ERR_CONNECT);
    printf("librlock: %s\n", err);
    ck_assert_msg(strstr(err, address) != NULL, "the error does not name %s: %s", address, err);
    ck_assert_msg(strstr(err, hint) != NULL, "no hint \"%s\" in: %s", hint, err);
    ck_assert_msg(strstr(err, RLOCK_DEFAULT_ADDRESS) != NULL || strstr(err, "unix") != NULL,
                  "the default address is not named: %s", err);

    char bin[256], out[128], errfile[128];
    snprintf(out, sizeof out, "%s/ctl.out", dir);
    snprintf(errfile, sizeof errfile, "%s/ctl.err", dir);
    unlink(errfile);
    char *argv[] = {(char *)h_bin("rlockctl", bin, sizeof bin), "--server", (char *)address,
                    "--timeout", "2s", "ping", NULL};
    pid_t pid = h_spawn_io(argv, out, errfile);
    ck_assert_int_gt(pid, 0);
    int status = 0;
    ck_assert_int_eq(h_wait_exit(pid, 20000, &status), 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 69, "rlockctl ping exited %d",
                  status);
    char *said = h_read_file(errfile);
    ck_assert_ptr_nonnull(said);
    printf("rlockctl: %s", said);
    ck_assert_msg(strstr(said, address) != NULL && strstr(said, hint) != NULL,
                  "rlockctl said: %s", said);
    free(said);
}

START_TEST(test_unix_path_missing)
{
    make_dir();
    char address[128];
    snprintf(address, sizeof address, "unix:%s/no-rlockd.sock", dir);
    expect_hint(address, "no socket at that path");
    drop_dir();
}
END_TEST

START_TEST(test_tcp_refused)
{
    make_dir();
    char address[64];
    snprintf(address, sizeof address, "127.0.0.1:%d", h_free_port()); /* bound, closed */
    expect_hint(address, "nothing listens there: is rlockd running");
    drop_dir();
}
END_TEST

START_TEST(test_unix_not_listening)
{
    make_dir();
    char address[128];
    snprintf(address, sizeof address, "unix:%s/stale.sock", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%.100s", address + 5);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0); /* never listens */
    expect_hint(address, "nothing listens on that socket");
    close(fd);
    drop_dir();
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_unix_path_missing, test_tcp_refused, test_unix_not_listening};
    return h_run_tests("connect_errors", 60, tests, H_LEN(tests));
}
