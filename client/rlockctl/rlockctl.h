/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl.h — what the rlockctl subcommands share: global options, exit
 * codes, and helpers for connecting, parsing durations and reporting errors.
 */
#ifndef RLOCKCTL_H
#define RLOCKCTL_H

#include <stdint.h>
#include <sysexits.h>

#include "rlock.h"

/* The lock was lost while the command ran (no sysexits.h code fits). */
#define CTL_EX_LOST 79
/* leader: nobody leads the election (as for release --force when nobody holds the lock). */
#define CTL_EX_NO_LEADER EX_NOINPUT
/* The shell's codes for a command that cannot be executed / found. */
#define CTL_EX_NOEXEC 126
#define CTL_EX_NOTFOUND 127

/* Options given before the subcommand. */
struct ctl {
    const char *server;     /* --server, $RLOCK_SERVER or RLOCK_DEFAULT_ADDRESS */
    uint32_t timeout_ms;    /* --timeout: per call and for connecting */
    const char *token_file; /* --token-file or $RLOCK_TOKEN_FILE; NULL = no token */
    /* For tls:// addresses: --tls-ca, --tls-cert, --tls-key, --tls-server-name, or
     * $RLOCK_TLS_CA, $RLOCK_TLS_CERT, $RLOCK_TLS_KEY, $RLOCK_TLS_SERVER_NAME */
    const char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
};

/* "rlockctl: " + message + newline on stderr. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * Connect to ctl->server with opts (the connect timeout is taken from ctl, the
 * auth token from ctl->token_file). Returns 0, or the exit code after
 * printing why.
 */
int ctl_connect(const struct ctl *ctl, struct rlock_options *opts, struct rlock_client **out);
/* The exit code for a failed library call. */
int ctl_exit_code(enum rlock_err e);
/* Parse the value of option opt as a duration (bare number = seconds). 0, or -1 after printing why. */
int ctl_duration(const char *opt, const char *s, uint32_t *out_ms);
/*
 * The global options are accepted after the subcommand's name too
 * ("rlockctl run --server ADDR ..."): each subcommand lists these entries in
 * its getopt_long table and CTL_GLOBAL_SHORTOPTS in its option string (with
 * a leading "+:"), and hands every option it does not know itself to
 * ctl_other_option.
 */
#define CTL_GLOBAL_LONGOPTS                                                                   \
    {"server", required_argument, NULL, 's'}, {"timeout", required_argument, NULL, 't'},      \
        {"token-file", required_argument, NULL, CTL_OPT_TOKEN_FILE},                          \
        {"tls-ca", required_argument, NULL, CTL_OPT_TLS_CA},                                  \
        {"tls-cert", required_argument, NULL, CTL_OPT_TLS_CERT},                              \
        {"tls-key", required_argument, NULL, CTL_OPT_TLS_KEY},                                \
        {"tls-server-name", required_argument, NULL, CTL_OPT_TLS_SERVER_NAME}
#define CTL_GLOBAL_SHORTOPTS "s:t:"
/* getopt_long's values for the long-only global options (above any char and any
 * subcommand's own values). */
#define CTL_OPT_TOKEN_FILE 0x200
#define CTL_OPT_TLS_CA 0x201
#define CTL_OPT_TLS_CERT 0x202
#define CTL_OPT_TLS_KEY 0x203
#define CTL_OPT_TLS_SERVER_NAME 0x204
/* Their lines in each subcommand's --help. */
#define CTL_GLOBAL_HELP                                                                       \
    "  -s, --server ADDR   daemon address (see rlockctl --help)\n"                              \
    "  -t, --timeout D     longest wait for each answer of the daemon (default 5s)\n"           \
    "      --token-file F  file holding the auth token (default $RLOCK_TOKEN_FILE)\n"           \
    "      --tls-ca F, --tls-cert F, --tls-key F, --tls-server-name NAME\n"                     \
    "                      for tls:// addresses (see rlockctl --help)\n"
/*
 * Apply a global option, or report an unknown option / missing value for
 * subcommand cmd. Returns 0 to go on, else EX_USAGE (after printing why).
 */
int ctl_other_option(struct ctl *ctl, const char *cmd, int ch, char *const argv[]);

/* Subcommands: argv[0] is the subcommand's name; each returns the exit code. */
int ctl_run(struct ctl *ctl, int argc, char **argv);
/* `run` under a campaign: the command runs while leader (rlockctl_run.c). */
int ctl_elect(struct ctl *ctl, int argc, char **argv);
/* Who leads an election, once or as it changes (rlockctl_leader.c). */
int ctl_leader(struct ctl *ctl, int argc, char **argv);
/* The operators' views and actions (rlockctl_admin.c). */
int ctl_sessions(struct ctl *ctl, int argc, char **argv);
int ctl_locks(struct ctl *ctl, int argc, char **argv);
int ctl_release(struct ctl *ctl, int argc, char **argv);
int ctl_kill_session(struct ctl *ctl, int argc, char **argv);
int ctl_info(struct ctl *ctl, int argc, char **argv);
/* Where acquires wait, live or once (rlockctl_top.c). */
int ctl_top(struct ctl *ctl, int argc, char **argv);

#endif
