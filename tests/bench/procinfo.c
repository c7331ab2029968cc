/* SPDX-License-Identifier: BSD-3-Clause */
/* procinfo.c — see procinfo.h. */
#include "procinfo.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int proc_cpu_us(pid_t pid, uint64_t *us)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: count from the last ')'. */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    unsigned long long utime, stime;
    /* After ')': state(3) ... utime is field 14, stime 15. */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
               &stime) != 2)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    *us = (uint64_t)(utime + stime) * 1000000u / (uint64_t)(hz > 0 ? hz : 100);
    return 0;
}

uint64_t proc_self_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int proc_rss_kb(pid_t pid, uint64_t *kb)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    int rc = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long long v;
        if (sscanf(line, "VmRSS: %llu kB", &v) == 1) {
            *kb = v;
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

#define SO_ACCEPTCON_FLAG 0x10000 /* __SO_ACCEPTCON in /proc/net/unix: a listening socket */
#define TCP_LISTEN_STATE 0x0A

/* Inode of the listening unix socket bound to path, or 0. */
static unsigned long unix_listener_inode(const char *path)
{
    FILE *f = fopen("/proc/net/unix", "r");
    if (f == NULL)
        return 0;
    char line[512];
    unsigned long found = 0;
    while (found == 0 && fgets(line, sizeof line, f) != NULL) {
        unsigned long flags, inode;
        int off = 0;
        if (sscanf(line, "%*s %*s %*s %lx %*s %*s %lu %n", &flags, &inode, &off) != 2 || off == 0)
            continue;
        char *name = line + off;
        name[strcspn(name, "\n")] = '\0';
        if ((flags & SO_ACCEPTCON_FLAG) && strcmp(name, path) == 0)
            found = inode;
    }
    fclose(f);
    return found;
}

/* Inode of a TCP socket listening on port (any local address), or 0. */
static unsigned long tcp_listener_inode(unsigned port)
{
    static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        FILE *f = fopen(files[i], "r");
        if (f == NULL)
            continue;
        char line[512];
        unsigned long found = 0;
        while (found == 0 && fgets(line, sizeof line, f) != NULL) {
            char local[64];
            unsigned st;
            unsigned long inode;
            if (sscanf(line, " %*s %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &st, &inode) != 3)
                continue;
            const char *colon = strrchr(local, ':');
            if (colon != NULL && st == TCP_LISTEN_STATE && strtoul(colon + 1, NULL, 16) == port)
                found = inode;
        }
        fclose(f);
        if (found != 0)
            return found;
    }
    return 0;
}

/* The process with a descriptor on socket inode, or -1. */
static pid_t owner_of_inode(unsigned long inode)
{
    char want[64];
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *proc = opendir("/proc");
    if (proc == NULL)
        return -1;
    pid_t found = -1;
    struct dirent *d;
    while (found < 0 && (d = readdir(proc)) != NULL) {
        char *end;
        long pid = strtol(d->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        char fdpath[64];
        snprintf(fdpath, sizeof fdpath, "/proc/%ld/fd", pid);
        DIR *fds = opendir(fdpath);
        if (fds == NULL)
            continue;
        struct dirent *fd;
        while (found < 0 && (fd = readdir(fds)) != NULL) {
            char link[320], target[64];
            snprintf(link, sizeof link, "%s/%s", fdpath, fd->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n <= 0)
                continue;
            target[n] = '\0';
            if (strcmp(target, want) == 0)
                found = (pid_t)pid;
        }
        closedir(fds);
    }
    closedir(proc);
    return found;
}

pid_t proc_find_listener(const char *address)
{
    if (address == NULL)
        return -1;
    unsigned long inode = 0;
    if (strncmp(address, "unix:", 5) == 0) {
        inode = unix_listener_inode(address + 5);
    } else {
        const char *colon = strrchr(address, ':');
        if (colon == NULL)
            return -1;
        inode = tcp_listener_inode((unsigned)strtoul(colon + 1, NULL, 10));
    }
    return inode == 0 ? -1 : owner_of_inode(inode);
}
