/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c — command line, config loading, process setup.
 */
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <protobuf-c/protobuf-c.h>

#include "build_commit.h"
#include "config.h"
#include "log.h"
#include "rlockd.h"
#include "tls.h"

#define DEFAULT_CONFIG "/etc/rlockd/rlockd.conf"

/*
 * Freed memory glibc keeps at the top of the heap before giving it back to the
 * kernel. Its default (128 kB, moving up with the mmap threshold) is crossed by
 * one loop turn's replies to a few hundred sessions: the heap shrank after each
 * turn and grew again in the next, and faulting the pages back in was half of
 * rlockd's CPU with 10,000 idle sessions pinging (docs/benchmarks.md, P5: 6% of
 * a core, 2.5% with this). A fixed value also fixes the mmap threshold at its
 * default: blocks of 128 kB and more (hash tables of many locks) are mapped on
 * their own and returned when freed, whatever the heap keeps.
 */
#define HEAP_TRIM_THRESHOLD (8 * 1024 * 1024)

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: rlockd [OPTIONS]\n"
            "Distributed lock daemon: serves locks kept in Redis to clients over TCP or a\n"
            "unix socket, renews them while their sessions live, releases them when a\n"
            "session ends.\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE   configuration file (default " DEFAULT_CONFIG ";\n"
            "                      built-in defaults if that file does not exist)\n"
            "  -t, --test-config   check the configuration, print problems, and exit\n"
            "      --dump-config   print the effective configuration and exit\n"
            "                      (secrets hidden)\n"
            "  -V, --version       print versions (rlockd and its libraries) and exit\n"
            "  -h, --help          this help\n"
            "\n"
            "Signals: SIGTERM/SIGINT/SIGQUIT/SIGPWR release (or hand over) every held\n"
            "lock and exit (a second one exits at once). SIGHUP reloads the\n"
            "configuration file: reloadable keys take effect, others are named as\n"
            "needing a restart, and a file with errors is refused (logged with\n"
            "file:line) while the old one stays. SIGUSR1 logs a line of state; other\n"
            "signals that would end the daemon (SIGUSR2, SIGALRM, ...) are ignored.\n"
            "Exit status: 0 after a clean shutdown, 1 on a runtime failure, 78 on a\n"
            "configuration error, 64 on a usage error.\n");
}

static void version(void)
{
    printf("rlockd %s (commit %s)\n", RLOCKD_VERSION, RLOCKD_COMMIT);
    printf("libevent %s, hiredis %d.%d.%d, protobuf-c %s\n", event_get_version(),
           HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, protobuf_c_version());
}

int main(int argc, char **argv)
{
    enum { OPT_DUMP = 256 };
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"test-config", no_argument, NULL, 't'},
        {"dump-config", no_argument, NULL, OPT_DUMP},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL;
    int test_only = 0, dump = 0, c;
    mallopt(M_TRIM_THRESHOLD, HEAP_TRIM_THRESHOLD);
    while ((c = getopt_long(argc, argv, "c:tVh", opts, NULL)) != -1) {
        switch (c) {
        case 'c': path = optarg; break;
        case 't': test_only = 1; break;
        case OPT_DUMP: dump = 1; break;
        case 'V': version(); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 64;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rlockd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 64;
    }

    struct config *cfg;
    struct stat st;
    if (path == NULL && stat(DEFAULT_CONFIG, &st) != 0) {
        cfg = config_defaults();
        if (cfg != NULL && !test_only && !dump)
            fprintf(stderr, "rlockd: %s not found; using built-in defaults\n", DEFAULT_CONFIG);
    } else {
        if (path == NULL)
            path = DEFAULT_CONFIG; /* the file read, so that SIGHUP reads it again */
        cfg = config_load(path, stderr);
    }
    if (cfg == NULL)
        return 78; /* EX_CONFIG; the problems were printed */
    if (test_only && cfg->tls_listen[0] != '\0') {
        /* The certificate, key and CA are read now: a bad key is found before a restart. */
        char err[512];
        struct tls_server *t = tls_server_new(cfg, err, sizeof err);
        if (t == NULL) {
            fprintf(stderr, "rlockd: %s\n", err);
            config_free(cfg);
            return 78;
        }
        tls_server_free(t);
    }
    if (test_only || dump) {
        if (dump)
            config_dump(cfg, stdout, 0);
        else if (path == NULL)
            printf("rlockd: %s not found; the built-in defaults are valid\n", DEFAULT_CONFIG);
        else
            printf("rlockd: configuration %s is valid\n", path);
        if (cfg->exposed[0] != '\0')
            fprintf(stderr, "rlockd: warning: %s\n", config_exposed_advice(cfg, path));
        config_free(cfg);
        return 0;
    }

    log_set_level(cfg->log_level);
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());

    struct server *srv = rlockd_new(cfg, path);
    if (srv == NULL)
        return 1;
    int rc = rlockd_run(srv);
    rlockd_free(srv);
    return rc;
}
