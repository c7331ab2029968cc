/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * procstat.h — the process's own resource use, for the process_* metrics
 * every Prometheus exporter has (names and units as the Prometheus client
 * libraries define them).
 */
#ifndef RLOCKD_PROCSTAT_H
#define RLOCKD_PROCSTAT_H

/* What was read; a field that could not be read is negative. */
struct procstat {
    double cpu_seconds;     /* user + system CPU time */
    double resident_bytes;  /* resident set size */
    double virtual_bytes;   /* virtual memory size */
    double open_fds;        /* file descriptors open */
    double max_fds;         /* RLIMIT_NOFILE's soft limit */
};

/*
 * Read them now. The count of open descriptors is /proc/self/fd's size, which
 * Linux gives since 6.2 without listing the directory; an older kernel says
 * 0 there, and the directory is listed instead (one entry per session: a
 * scrape of a daemon with 100,000 sessions reads 100,000 entries).
 */
void procstat_read(struct procstat *ps);

#endif
