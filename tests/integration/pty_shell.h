/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pty_shell.h — a pseudo-terminal whose session is led by a tiny job-control
 * shell, for tests of programs that handle the terminal (rlockctl run).
 *
 * The shell is a forked child of the test. It starts one job in a process
 * group of its own in the terminal's foreground and writes what happens to
 * a report file: "JOB <pid>" once started, "STOPPED <sig> FG <pgrp>" when
 * the job stops (with the terminal's foreground at that moment), "CONT"
 * after the test said fg, and "EXIT <wait status> FG <pgrp>" at the end.
 * On a stop it takes the terminal back, as a shell does, and waits (up to
 * PTY_WAIT_MS) for the test's word to continue the job in the foreground.
 *
 * Every function fails the running test (Check) on error or timeout.
 */
#ifndef RLOCK_ITEST_PTY_SHELL_H
#define RLOCK_ITEST_PTY_SHELL_H

#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

/* The longest any wait here takes. */
#define PTY_WAIT_MS 15000

struct pty {
    int master;       /* the test's side of the terminal */
    int fg_pipe;      /* a byte written here: the shell continues the stopped job (fg) */
    pid_t shell;      /* the shell (session leader of the terminal) */
    pid_t job;        /* the shell's job, and its process group */
    char report[320]; /* the shell's report file, in the env's dir */
    char seen[8192];  /* what was read from the master so far (the latest, once it is full) */
    size_t nseen;
};

/* Open a pseudo-terminal and start argv (argv[0] a path) as the job of its shell. */
void pty_start(struct pty *t, struct h_env *e, char *const argv[]);
/* Wait until the terminal has shown text (reading everything it writes meanwhile; of a
 * program that redraws without end, the latest few kilobytes are kept). */
void pty_expect(struct pty *t, const char *text);
/* Forget what the terminal showed so far: the next pty_expect sees only what comes after. */
void pty_forget(struct pty *t);
/* Type a character on the terminal (a control character: '\003' is Ctrl-C). */
void pty_type(struct pty *t, char c);
/* Type a line on the terminal. */
void pty_type_line(struct pty *t, const char *text);
/* Tell the shell to continue its stopped job in the foreground. */
void pty_fg(struct pty *t);
/* Wait for the shell's report line starting with prefix ("EXIT "); *a, *b get its numbers. */
void pty_report(struct pty *t, const char *prefix, int *a, int *b);
/* The terminal's foreground process group. */
pid_t pty_foreground(const struct pty *t);
/* Kill the shell (its job dies with it) by pid, reap it, close the terminal. */
void pty_stop(struct pty *t);

#endif
