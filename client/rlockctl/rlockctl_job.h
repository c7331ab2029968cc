/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl_job.h — the job of `rlockctl run`: the command and every process
 * descended from it, its process group, and the controlling terminal.
 * rlockctl_run.c decides when to start, signal, suspend and wait; this
 * module knows how to do it for every process of the job.
 */
#ifndef RLOCKCTL_JOB_H
#define RLOCKCTL_JOB_H

#include <sys/types.h>

/* Where the command runs relative to rlockctl's process group (chosen by job_init). */
enum job_mode {
    JOB_OWN_GROUP,    /* the command leads a process group of its own */
    JOB_SHARED_GROUP, /* the command stays in rlockctl's group, which rlockctl does not lead */
};

struct job {
    enum job_mode mode;
    int tty;      /* JOB_OWN_GROUP: rlockctl's controlling terminal (close-on-exec), else -1 */
    pid_t self;   /* rlockctl */
    pid_t pid;    /* the command, 0 before job_started; with JOB_OWN_GROUP its group id too */
    int reaped;   /* the command has been waited for; status is its wait status */
    int status;
    int stop_sig; /* the signal that stopped the command (job_reap); the caller clears it */
};

/*
 * Make rlockctl the subreaper of everything it starts from now on, so that
 * no process of the job can leave its subtree, and choose the mode. With
 * JOB_OWN_GROUP and a controlling terminal, SIGTTOU is blocked in the
 * calling thread until the caller restores its signal mask (after
 * job_fini). Returns 0, or -1 after printing why.
 */
int job_init(struct job *j);
/* In the forked child before exec (async-signal-safe): its group, and the terminal. */
void job_child(const struct job *j);
/* In rlockctl right after the fork that started the command. */
void job_started(struct job *j, pid_t pid);
/*
 * Reap every child that has ended: the command (its status kept in j) and
 * the orphans of the job that were handed to rlockctl. Notes a stop of the
 * command in j->stop_sig. Returns 1 once rlockctl has no child left, which
 * (rlockctl being the subreaper) means that no process of the job is left.
 */
int job_reap(struct job *j);
/*
 * Send sig to every process of the job: the job's process group, and each
 * descendant of rlockctl found in /proc, wherever its group or session.
 * Processes forked meanwhile may be missed: call again to catch them.
 */
void job_signal(const struct job *j, int sig);
/* Give the terminal's foreground to the job, when rlockctl has it and the command runs. */
void job_tty_give(const struct job *j);
/* Take the terminal's foreground back from the job, when the job has it. */
void job_tty_take(const struct job *j);
/*
 * 1 when j->stop_sig is a stop by the terminal (SIGTSTP, SIGTTIN, SIGTTOU)
 * that rlockctl has to pass on to whoever runs it (JOB_OWN_GROUP on a terminal).
 */
int job_stopped_by_tty(const struct job *j);
/*
 * Take the terminal back and stop rlockctl with j->stop_sig, as the job
 * was, so that the shell sees a stopped job. Returns once rlockctl is
 * continued; the job is still stopped (see job_continue).
 */
void job_suspend(const struct job *j);
/* Continue the job after job_suspend: the terminal back to it if rlockctl has it, SIGCONT. */
void job_continue(const struct job *j);
/* Print a warning for every process of the job still there. Returns how many. */
int job_survivors(const struct job *j);
/* Take the terminal back (when the job has it) and close it. */
void job_fini(struct job *j);

#endif
