/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_counter.c — the mutual-exclusion counter: worker processes each
 * run read-sleep-write increments of a counter file under `rlockctl run`.
 * Any overlap of two critical sections loses an increment, so the final
 * count must be exact; the fences the sections saw (logged in entry order)
 * must strictly increase. Called from test bodies: it asserts.
 */
#include "harness.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* The critical section: $1 counter file, $2 fence log. */
static const char section_sh[] = "n=$(cat \"$1\")\n"
                                 "sleep 0.001\n"
                                 "echo $((n + 1)) > \"$1\"\n"
                                 "echo \"$RLOCK_FENCE\" >> \"$2\"\n";

/* One contender: $1 rlockctl, $2 address, $3 counter, $4 log, $5 section script, $6 rounds. */
static const char worker_sh[] =
    "i=0\n"
    "while [ $i -lt \"$6\" ]; do\n"
    "    \"$1\" run --server \"$2\" --wait 60s counter -- sh \"$5\" \"$3\" \"$4\"\n"
    "    rc=$?\n"
    "    if [ $rc -ne 0 ]; then echo \"worker $$: rlockctl exited $rc in round $i\" >&2; exit 1; fi\n"
    "    i=$((i + 1))\n"
    "done\n";

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/* Check the fence log: want lines, strictly increasing. */
static void check_fences(const char *path, int want)
{
    char *text = h_read_file(path);
    ck_assert_ptr_nonnull(text);
    int lines = 0;
    uint64_t last = 0;
    for (char *p = text; *p;) {
        char *end;
        errno = 0;
        uint64_t f = strtoull(p, &end, 10);
        ck_assert_msg(end != p && *end == '\n' && errno == 0, "fence log line %d malformed",
                      lines + 1);
        ck_assert_msg(f > last, "fence log line %d: %" PRIu64 " not above %" PRIu64, lines + 1,
                      f, last);
        last = f;
        lines++;
        p = end + 1;
    }
    free(text);
    ck_assert_int_eq(lines, want);
}

int64_t h_counter_run(struct h_env *e, const char *const addrs[], int naddrs, int procs,
                      int rounds, int deadline_ms)
{
    ck_assert_int_le(procs, H_COUNTER_PROCS_MAX);
#ifdef H_SANITIZED
    /* The full counts run in the plain build; see tests/integration/CMakeLists.txt. */
    rounds = rounds / 4 > 10 ? rounds / 4 : rounds;
#endif
    char counter[320], log[320], section[320], worker[320], bin[512], nrounds[16];
    h_env_path(e, "counter", counter, sizeof counter);
    h_env_path(e, "fences.log", log, sizeof log);
    h_env_path(e, "section.sh", section, sizeof section);
    h_env_path(e, "worker.sh", worker, sizeof worker);
    h_bin("rlockctl", bin, sizeof bin);
    snprintf(nrounds, sizeof nrounds, "%d", rounds);
    write_text(counter, "0\n");
    write_text(log, "");
    write_text(section, section_sh);
    write_text(worker, worker_sh);

    pid_t pids[H_COUNTER_PROCS_MAX];
    int64_t t0 = h_now_ms();
    for (int i = 0; i < procs; i++) {
        char *argv[] = { "/bin/sh", worker, bin, (char *)addrs[i % naddrs], counter, log,
                         section, nrounds, NULL };
        pids[i] = h_spawn(argv, NULL);
        ck_assert_int_gt(pids[i], 0);
    }
    int statuses[H_COUNTER_PROCS_MAX];
    int rc = h_wait_all(pids, procs, deadline_ms, statuses, e);
    int64_t elapsed = h_now_ms() - t0;
    if (rc != 0)
        for (int i = 0; i < procs; i++)
            kill(pids[i], SIGKILL);
    ck_assert_msg(rc == 0, "workers not done within %d ms", deadline_ms);

    char *count = h_read_file(counter);
    ck_assert_ptr_nonnull(count);
    printf("counter: %d processes on %d daemon%s x %d rounds in %lld ms (%.2f ms per section); "
           "counter %s",
           procs, naddrs, naddrs == 1 ? "" : "s", rounds, (long long)elapsed,
           (double)elapsed / (procs * rounds), count);
    fflush(stdout);
    for (int i = 0; i < procs; i++) {
        char st[32];
        ck_assert_msg(WIFEXITED(statuses[i]) && WEXITSTATUS(statuses[i]) == 0,
                      "worker %d ended with %s", i, h_status_str(statuses[i], st, sizeof st));
    }
    ck_assert_int_eq(atoi(count), procs * rounds);
    free(count);
    check_fences(log, procs * rounds);
    return elapsed;
}
