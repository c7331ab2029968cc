/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * procinfo.h — what the kernel says about a process: CPU time and resident
 * memory from /proc, and which process listens on an address, so that the
 * benchmark can charge rlockd and Redis for their share of the work without
 * being told their pids.
 */
#ifndef BENCH_PROCINFO_H
#define BENCH_PROCINFO_H

#include <stdint.h>
#include <sys/types.h>

/* utime + stime of every thread of pid, in microseconds (/proc/PID/stat). 0 or -1. */
int proc_cpu_us(pid_t pid, uint64_t *us);
/* The same for this process, from getrusage (microsecond resolution instead of ticks). */
uint64_t proc_self_cpu_us(void);
/* VmRSS of pid in KiB (/proc/PID/status). 0 or -1. */
int proc_rss_kb(pid_t pid, uint64_t *kb);
/*
 * The pid of the process holding the listening socket of address
 * ("unix:/path", or "HOST:PORT" where only the port is compared), or -1.
 * Scans /proc/net and every process's descriptors, so it needs to be run
 * by the same user or root.
 */
pid_t proc_find_listener(const char *address);

#endif
