/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * chaos_store.c — the fenced store: the storage a lock protects, reduced to
 * what fencing needs. It keeps, per resource, the highest fence it has
 * accepted from any write and the highest from an exclusive write, each with
 * the hold that wrote it. An exclusive write with a fence below the highest
 * accepted (of either mode) is refused: a newer holder, reader or writer, was
 * granted after it, so its lock is gone. A shared write is refused below the
 * highest exclusive fence: a writer was granted after it. Shared writes among
 * themselves may come in any order: readers hold the resource together, and
 * their fences order their grants, not their writes (README.md, "Shared
 * holds"). A semaphore's holders write as shared ones (shared set, with their
 * permits): they hold its places together, and a place held long keeps a low
 * fence while others come and go, so no order of fences among them says one
 * is stale (README.md, "Semaphores"). A leader writes as an exclusive holder,
 * its term the fence: a deposed leader's lower term is refused. A write with
 * the same fence as one already accepted is accepted only from the same hold.
 *
 *   rlock-chaos --store DIR
 *
 * Listens on DIR/store.sock (SOCK_SEQPACKET: one struct chaos_write per
 * message, one struct chaos_reply back). Every decision goes to DIR/store.log
 * in arrival order, which is the order the offline check replays:
 *
 *   <us> STORE <res> <fence> <verdict> <believed> <slot> <pid> <hold_seq> <highest> <mode>
 *
 * (highest: of either mode, after this write; mode: x exclusive (a leader's
 * too), s shared, p a semaphore's holder.)
 * A write that is accepted although it is stale (lower than its mode's bound,
 * or an equal fence from another hold) cannot happen by construction; the
 * counter for it (writes_bad) is there so that a broken store would show.
 * Exits 0 on SIGTERM.
 */
#include "chaos.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define STORE_MAX_CONNS (CHAOS_MAX_WORKERS * 4)

static volatile sig_atomic_t store_stop;

static void store_on_term(int sig)
{
    (void)sig;
    store_stop = 1;
}

struct store_res {
    uint64_t highest;       /* of every accepted write, shared or exclusive */
    uint64_t hold_seq;      /* of the write that set highest */
    uint64_t highest_excl;  /* of the accepted exclusive writes */
    uint64_t hold_seq_excl; /* of the write that set highest_excl */
};

static int store_listen(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return -1;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path) {
        close(fd);
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sa.sun_path, path);
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void store_handle(struct chaos_shm *m, struct store_res *res, int logfd,
                         const struct chaos_write *w, struct chaos_reply *rep)
{
    memset(rep, 0, sizeof *rep);
    if (w->res >= (uint32_t)m->nres_all) {
        rep->verdict = CHAOS_W_REFUSED;
        chaos_log(logfd, "BADRES %u", w->res);
        return;
    }
    struct store_res *r = &res[w->res];
    /* An exclusive writer is overtaken by any newer holder, a shared one by a newer writer. */
    uint64_t bound = w->shared ? r->highest_excl : r->highest;
    int stale = w->fence < bound ||
                (w->fence == r->highest && w->hold_seq != r->hold_seq && r->highest != 0) ||
                (w->fence == r->highest_excl && w->hold_seq != r->hold_seq_excl &&
                 r->highest_excl != 0);
    if (w->fence < bound) {
        rep->verdict = CHAOS_W_REFUSED;
        atomic_fetch_add(&m->writes_refused, 1);
    } else {
        /* An equal fence from another hold is accepted here only to be counted: a
         * correct daemon never hands one fence to two holds, so this must stay 0. */
        rep->verdict = CHAOS_W_ACCEPTED;
        if (stale)
            atomic_fetch_add(&m->writes_bad, 1);
        else
            atomic_fetch_add(&m->writes_accepted, 1);
        if (w->fence >= r->highest) {
            r->highest = w->fence;
            r->hold_seq = w->hold_seq;
        }
        if (!w->shared) { /* accepted: not below highest, so not below highest_excl */
            r->highest_excl = w->fence;
            r->hold_seq_excl = w->hold_seq;
        }
    }
    rep->highest = r->highest;
    chaos_log(logfd, "STORE %u %llu %d %d %u %d %llu %llu %c", w->res,
              (unsigned long long)w->fence, rep->verdict, w->believed, w->slot, w->pid,
              (unsigned long long)w->hold_seq, (unsigned long long)r->highest,
              w->shared ? (w->permits ? 'p' : 's') : 'x');
}

int chaos_store_main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: rlock-chaos --store DIR\n");
        return 64;
    }
    const char *dir = argv[2];
    struct chaos_shm *m = chaos_shm_map(dir, 0);
    if (!m)
        return 1;
    struct sigaction sa = { .sa_handler = store_on_term };
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    char path[512];
    snprintf(path, sizeof path, "%s/store.sock", dir);
    int lfd = store_listen(path);
    if (lfd == -1) {
        fprintf(stderr, "chaos store: listen %s: %s\n", path, strerror(errno));
        return 1;
    }
    int logfd = chaos_log_open(dir, "store.log");
    if (logfd == -1)
        return 1;

    struct store_res res[CHAOS_MAX_RES];
    memset(res, 0, sizeof res);
    struct pollfd pfd[1 + STORE_MAX_CONNS];
    int n = 1;
    pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
    while (!store_stop) {
        int rc = poll(pfd, (nfds_t)n, 200);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "chaos store: poll: %s\n", strerror(errno));
            return 1;
        }
        for (int i = n - 1; i >= 1; i--) {
            if (!pfd[i].revents)
                continue;
            struct chaos_write w;
            ssize_t got = recv(pfd[i].fd, &w, sizeof w, 0);
            if (got == (ssize_t)sizeof w) {
                struct chaos_reply rep;
                store_handle(m, res, logfd, &w, &rep);
                if (send(pfd[i].fd, &rep, sizeof rep, MSG_NOSIGNAL) == (ssize_t)sizeof rep)
                    continue;
            } else if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            /* EOF (a worker exited or was killed), an error or a malformed message. */
            close(pfd[i].fd);
            pfd[i] = pfd[--n];
        }
        if (pfd[0].revents & POLLIN) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd >= 0 && n < 1 + STORE_MAX_CONNS)
                pfd[n++] = (struct pollfd){ .fd = cfd, .events = POLLIN };
            else if (cfd >= 0)
                close(cfd);
        }
    }
    chaos_log(logfd, "STOP accepted=%llu refused=%llu bad=%llu",
              (unsigned long long)atomic_load(&m->writes_accepted),
              (unsigned long long)atomic_load(&m->writes_refused),
              (unsigned long long)atomic_load(&m->writes_bad));
    close(logfd);
    unlink(path);
    return 0;
}
