/* SPDX-License-Identifier: BSD-3-Clause */
/* procstat.c — see procstat.h. */
#include "procstat.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static double open_fds(void)
{
    struct stat st;
    if (stat("/proc/self/fd", &st) == 0 && st.st_size > 0)
        return (double)st.st_size;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    double n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

void procstat_read(struct procstat *ps)
{
    *ps = (struct procstat){-1, -1, -1, -1, -1};
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        ps->cpu_seconds = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                          (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f != NULL) {
        unsigned long size, resident;
        double page = (double)sysconf(_SC_PAGESIZE);
        if (fscanf(f, "%lu %lu", &size, &resident) == 2) {
            ps->virtual_bytes = (double)size * page;
            ps->resident_bytes = (double)resident * page;
        }
        fclose(f);
    }
    ps->open_fds = open_fds();
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        ps->max_fds = rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur;
}
