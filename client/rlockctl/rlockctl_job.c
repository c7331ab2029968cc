/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl_job.c — the processes of `rlockctl run`'s job.
 *
 * The job is the command and every process descended from it. A lock held
 * for the command alone protects nothing once the command has started
 * background work, so the job is what rlockctl stops on a loss and waits
 * for before it releases the lock. Three mechanisms find its processes:
 *
 *  - rlockctl is a child subreaper (PR_SET_CHILD_SUBREAPER): a process of
 *    the job whose parent dies is handed to rlockctl, not to init. So every
 *    process of the job stays in rlockctl's subtree, and waitpid(-1)
 *    failing with ECHILD means that none is left.
 *  - The command leads a process group of its own (JOB_OWN_GROUP), which a
 *    single kill() reaches at once, forks in progress included.
 *  - /proc: each descendant of rlockctl, by the parent pids in
 *    /proc/PID/stat, for the processes that changed group or session
 *    (setsid, daemons) and whose parent still lives.
 *
 * The command keeps rlockctl's process group (JOB_SHARED_GROUP) when
 * rlockctl is on a terminal but does not lead its group: then someone
 * else (a script, make -j, a pipeline) owns the group's job control, and
 * Ctrl-C, Ctrl-Z, fg and bg must keep treating rlockctl and its command as
 * one. The job is then reached through /proc only.
 *
 * The terminal (JOB_OWN_GROUP only): a shell gives the terminal to the
 * group of the job it starts; rlockctl passes it on to the command's group,
 * as a shell would, so that Ctrl-C and Ctrl-Z reach the command and the
 * command can read the terminal. When the command is stopped by the
 * terminal, rlockctl takes the terminal back and stops itself with the same
 * signal, so that the shell sees a stopped job; once continued, it gives the
 * terminal back to the command if the shell gave it to rlockctl (fg, not
 * bg). SIGTTOU stays blocked meanwhile: rlockctl changes the foreground and
 * writes its messages while in the background.
 */
#include "rlockctl_job.h"
#include "rlockctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* Warnings name at most this many survivors. */
#define JOB_SURVIVORS_SHOWN 10

/* One process as /proc/PID/stat shows it. */
struct job_proc {
    pid_t pid;
    pid_t ppid;
    pid_t pgrp;
    char state; /* R, S, D, T, Z, ... */
    char comm[24];
};

int job_init(struct job *j)
{
    memset(j, 0, sizeof *j);
    j->tty = -1;
    j->self = getpid();
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        ctl_err("run: prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
        return -1;
    }
    /*
     * The controlling terminal, whichever of the standard descriptors point
     * there: a command that reads it through /dev/tty (a password prompt)
     * needs the foreground as much as one that reads stdin.
     */
    int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (tty >= 0 && getpgrp() != j->self) {
        close(tty);
        j->mode = JOB_SHARED_GROUP;
        return 0;
    }
    j->mode = JOB_OWN_GROUP;
    j->tty = tty;
    if (tty >= 0) {
        sigset_t ttou;
        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        pthread_sigmask(SIG_BLOCK, &ttou, NULL);
    }
    return 0;
}

void job_child(const struct job *j)
{
    if (j->mode != JOB_OWN_GROUP)
        return;
    /*
     * Is rlockctl's group (rlockctl leads it: its id is j->self) in the
     * foreground? Not getpgrp(): the parent's setpgid may have moved this
     * child to its own group already.
     */
    int foreground = j->tty >= 0 && tcgetpgrp(j->tty) == j->self;
    setpgid(0, 0);
    /* Before exec, so the command never runs a moment in the background (SIGTTOU is blocked). */
    if (foreground)
        tcsetpgrp(j->tty, getpid());
}

void job_started(struct job *j, pid_t pid)
{
    j->pid = pid;
    /*
     * The child does the same; whichever runs first, the group exists before
     * either goes on. EACCES once the child has exec'd: it did it itself.
     */
    if (j->mode == JOB_OWN_GROUP)
        setpgid(pid, pid);
}

int job_reap(struct job *j)
{
    for (;;) {
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG | WUNTRACED);
        if (w == 0)
            return 0;
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return 1; /* ECHILD: nothing of the job is left */
        }
        if (w != j->pid || j->reaped)
            continue; /* an orphan of the job, handed to rlockctl: reaped is all it needs */
        if (WIFSTOPPED(status)) {
            j->stop_sig = WSTOPSIG(status);
            continue;
        }
        j->reaped = 1;
        j->status = status;
    }
}

/* Read /proc/PID/stat: "pid (comm) state ppid pgrp ...". 0, or -1 when pid is gone. */
static int job_read_stat(pid_t pid, struct job_proc *p)
{
    char path[32], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* comm may hold spaces and parentheses: it ends at the last ')'. */
    char *open_paren = strchr(buf, '(');
    char *close_paren = strrchr(buf, ')');
    int ppid, pgrp;
    if (!open_paren || !close_paren || close_paren < open_paren ||
        sscanf(close_paren + 1, " %c %d %d", &p->state, &ppid, &pgrp) != 3)
        return -1;
    p->pid = pid;
    p->ppid = ppid;
    p->pgrp = pgrp;
    size_t len = (size_t)(close_paren - open_paren - 1);
    if (len >= sizeof p->comm)
        len = sizeof p->comm - 1;
    memcpy(p->comm, open_paren + 1, len);
    p->comm[len] = '\0';
    return 0;
}

/* Every process in /proc, into a malloc'd array (*out). The count, or -1 on error. */
static ssize_t job_scan_all(struct job_proc **out)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return -1;
    struct job_proc *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            struct job_proc *nv = realloc(v, cap * sizeof *v);
            if (nv == NULL) {
                free(v);
                closedir(d);
                return -1;
            }
            v = nv;
        }
        if (job_read_stat((pid_t)pid, &v[n]) == 0)
            n++;
    }
    closedir(d);
    *out = v;
    return (ssize_t)n;
}

/*
 * The descendants of rlockctl among v[n], moved to the front of v. Returns
 * their count. A pass adds the children of those found before; it ends
 * when a pass adds none (as many passes as the job's tree is deep).
 */
static size_t job_descendants(pid_t self, struct job_proc *v, size_t n)
{
    size_t found = 0, added;
    do {
        added = 0;
        for (size_t i = found; i < n; i++) {
            int ours = v[i].ppid == self;
            for (size_t k = 0; k < found && !ours; k++)
                ours = v[i].ppid == v[k].pid;
            if (!ours)
                continue;
            struct job_proc t = v[found];
            v[found++] = v[i];
            v[i] = t;
            added++;
        }
    } while (added > 0);
    return found;
}

/* The processes of the job now, in *out (malloc'd). The count, or -1 when /proc cannot tell. */
static ssize_t job_scan(const struct job *j, struct job_proc **out)
{
    ssize_t n = job_scan_all(out);
    if (n < 0)
        return -1;
    return (ssize_t)job_descendants(j->self, *out, (size_t)n);
}

/*
 * Signal a process found by a scan, unless it has gone since. Its pid may
 * be reused as soon as its parent (another process of the job) reaps it:
 * the pidfd pins the process, and it is signalled only while its parent is
 * still the one seen, or rlockctl (it was orphaned since).
 */
static void job_kill_one(const struct job *j, const struct job_proc *p, int sig)
{
    int fd = pidfd_open(p->pid, 0);
    if (fd < 0) {
        if (errno != ESRCH)
            kill(p->pid, sig); /* no pidfds here (old kernel, seccomp) */
        return;
    }
    struct job_proc now;
    if (job_read_stat(p->pid, &now) == 0 && (now.ppid == p->ppid || now.ppid == j->self))
        pidfd_send_signal(fd, sig, NULL, 0);
    close(fd);
}

void job_signal(const struct job *j, int sig)
{
    struct job_proc *v = NULL;
    ssize_t n = job_scan(j, &v);
    /*
     * The group id is the command's pid: safe to use while the command is
     * not reaped, or while a process of the job is in the group (a group id
     * is not handed out again while the group has members).
     */
    int group = j->mode == JOB_OWN_GROUP && (!j->reaped || n < 0);
    for (ssize_t i = 0; i < n && j->mode == JOB_OWN_GROUP; i++)
        group |= v[i].pgrp == j->pid;
    if (group)
        kill(-j->pid, sig);
    else if (n < 0 && !j->reaped)
        kill(j->pid, sig);
    for (ssize_t i = 0; i < n; i++) {
        if (v[i].state != 'Z' && !(group && v[i].pgrp == j->pid))
            job_kill_one(j, &v[i], sig);
    }
    free(v);
}

void job_tty_give(const struct job *j)
{
    if (j->tty >= 0 && j->pid > 0 && !j->reaped && tcgetpgrp(j->tty) == getpgrp())
        tcsetpgrp(j->tty, j->pid);
}

void job_tty_take(const struct job *j)
{
    if (j->tty >= 0 && j->pid > 0 && tcgetpgrp(j->tty) == j->pid)
        tcsetpgrp(j->tty, getpgrp());
}

int job_stopped_by_tty(const struct job *j)
{
    int sig = j->stop_sig;
    return j->tty >= 0 && (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU);
}

void job_suspend(const struct job *j)
{
    job_tty_take(j);
    /*
     * These signals are never caught, so raising one stops the whole process
     * (the library's thread too) until SIGCONT. In an orphaned process group
     * the kernel discards it: there is no shell to continue rlockctl then,
     * and the job is continued at once.
     */
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, j->stop_sig);
    pthread_sigmask(SIG_UNBLOCK, &one, &old); /* SIGTTOU is blocked */
    raise(j->stop_sig);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void job_continue(const struct job *j)
{
    job_tty_give(j);
    if (!j->reaped)
        kill(-j->pid, SIGCONT);
}

int job_survivors(const struct job *j)
{
    struct job_proc *v = NULL;
    ssize_t n = job_scan(j, &v);
    for (ssize_t i = 0; i < n && i < JOB_SURVIVORS_SHOWN; i++)
        ctl_err("run: warning: pid %d (%s, state %c) of the job is still there", (int)v[i].pid,
                v[i].comm, v[i].state);
    if (n > JOB_SURVIVORS_SHOWN)
        ctl_err("run: warning: and %zd more", n - JOB_SURVIVORS_SHOWN);
    free(v);
    return n < 0 ? 0 : (int)n;
}

void job_fini(struct job *j)
{
    job_tty_take(j);
    if (j->tty >= 0)
        close(j->tty);
    j->tty = -1;
}
