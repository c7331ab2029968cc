/* SPDX-License-Identifier: BSD-3-Clause */
/* log.c — see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdint.h>
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

static size_t defuse(const char *msg, char *line, size_t n, size_t cap);

static void log_vmsg(int level, const char *fmt, va_list ap);

void log_msg(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

/* Lines of a kind clients can cause at will: at most `per_second` a second, the rest
 * counted and reported once the next second's first such line comes (process-wide, as
 * the level). */
struct log_limit {
    const char *what; /* "about peers (...)": the summary line names them */
    uint32_t per_second;
    int64_t window_ms; /* start of the current second */
    uint32_t lines;    /* written in it */
    uint64_t dropped;  /* not written since the last summary */
};

#define LOG_PEER_PER_SECOND 20
static struct log_limit peer_limit = {
    "about peers (refused connections, Hellos, frames)", LOG_PEER_PER_SECOND, 0, 0, 0};
#define LOG_TRACE_PER_SECOND 1000
static struct log_limit trace_limit = {"of traced lock operations", LOG_TRACE_PER_SECOND, 0,
                                       0, 0};

static void log_limited(struct log_limit *l, int level, const char *fmt, va_list ap)
{
    if (!log_enabled(level))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (now - l->window_ms >= 1000) {
        if (l->dropped > 0)
            log_msg(LOG_LEVEL_WARN,
                    "log: %llu more lines %s not written since %lld ms ago; at most %u a "
                    "second are",
                    (unsigned long long)l->dropped, l->what, (long long)(now - l->window_ms),
                    l->per_second);
        l->window_ms = now;
        l->lines = 0;
        l->dropped = 0;
    }
    if (l->lines >= l->per_second) {
        l->dropped++;
        return;
    }
    l->lines++;
    log_vmsg(level, fmt, ap);
}

void log_peer_msg(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_limited(&peer_limit, level, fmt, ap);
    va_end(ap);
}

void log_trace_msg(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_limited(&trace_limit, level, fmt, ap);
    va_end(ap);
}

static void log_vmsg(int level, const char *fmt, va_list ap)
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
    char msg[2048];
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    if (m < 0)
        return;
    n = defuse(msg, line, n, sizeof line - 1);
    line[n++] = '\n';
    fwrite(line, 1, n, stderr);
}

/*
 * The code point of the UTF-8 sequence at p when it is one that can make a line look other
 * than it is (bidi controls such as U+202E RIGHT-TO-LEFT OVERRIDE, zero-width characters,
 * U+2028/U+2029 line and paragraph separators, U+FEFF), with its length in *len; else 0.
 * Client names and resources may hold them (they are valid UTF-8); the daemon's own text never.
 */
static unsigned spoofing_char(const unsigned char *p, size_t *len)
{
    unsigned cp = 0;
    if (p[0] == 0xd8 && p[1] == 0x9c) {
        *len = 2;
        return 0x061c; /* ARABIC LETTER MARK */
    }
    if ((p[0] == 0xe2 || p[0] == 0xef) && (p[1] & 0xc0) == 0x80 && (p[2] & 0xc0) == 0x80)
        cp = ((p[0] & 0x0fu) << 12) | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
    *len = 3;
    if ((cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
        (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff)
        return cp;
    return 0;
}

/* Copy msg after the first n bytes of line (at most cap in all), each spoofing character
 * written as \u{XXXX}; returns the new length. */
static size_t defuse(const char *msg, char *line, size_t n, size_t cap)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0' && n < cap;) {
        size_t len;
        unsigned cp = *p >= 0xd8 ? spoofing_char(p, &len) : 0;
        if (cp == 0) {
            line[n++] = (char)*p++;
            continue;
        }
        char esc[16];
        int k = snprintf(esc, sizeof esc, "\\u{%04x}", cp);
        if (n + (size_t)k > cap)
            break;
        memcpy(line + n, esc, (size_t)k);
        n += (size_t)k;
        p += len;
    }
    return n;
}
