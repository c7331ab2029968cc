/* log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

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

void log_msg(int level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    if (log_journal < 0)
        log_journal = getenv("JOURNAL_STREAM") != NULL;

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
