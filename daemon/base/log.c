/* SPDX-License-Identifier: BSD-3-Clause */
/* log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int log_level = LOG_LEVEL_INFO;
static int log_journal = -1; /* -1 = not yet checked */

static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* syslog priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
static const int level_prio[] = {3, 4, 6, 7};

const char *log_level_name(int level)
{
    if (level < LOG_LEVEL_ERROR || level > LOG_LEVEL_DEBUG)
        return "unknown";
    return level_names[level];
}

int log_level_parse(const char *name)
{
    for (int i = LOG_LEVEL_ERROR; i <= LOG_LEVEL_DEBUG; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    if (strcmp(name, "warning") == 0)
        return LOG_LEVEL_WARN;
    return -1;
}

void log_set_level(int level)
{
    log_level = level;
}

int log_enabled(int level)
{
    return level <= log_level;
}

/*
 * 1 when stderr is the stream journald gave us: JOURNAL_STREAM names its
 * device and inode ("DEV:INO"). Only then: a child that inherited the
 * variable but writes to a file or terminal keeps timestamps.
 */
static int journal_is_stderr(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (v == NULL || sscanf(v, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_escape(const char *s, char *out, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < len; p++) {
        if (*p == '\\' || *p == '"') {
            out[o++] = '\\';
            out[o++] = (char)*p;
        } else if (*p < 0x20 || *p >= 0x7f) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 0xf];
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o] = '\0';
}

void log_msg(int level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    if (log_journal < 0)
        log_journal = journal_is_stderr();

    char line[2048];
    size_t n = 0;
    if (log_journal) {
        n = (size_t)snprintf(line, sizeof line, "<%d>", level_prio[level]);
    } else {
        struct timeval tv;
        struct tm tm;
        gettimeofday(&tv, NULL);
        gmtime_r(&tv.tv_sec, &tm);
        n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %-5s ",
                              (long)(tv.tv_usec / 1000), level_names[level]);
    }
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    n += (size_t)m;
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    fwrite(line, 1, n, stderr);
}
