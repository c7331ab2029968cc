/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.h — rlockd's log lines on stderr.
 *
 * One line per event: "LEVEL message". When stderr is read by journald
 * (JOURNAL_STREAM names stderr's device and inode) each line starts with a
 * "<N>" syslog priority instead, so journalctl shows levels and the line
 * needs no timestamp. Otherwise lines carry an ISO-8601 timestamp.
 *
 * Text that comes from clients (names, resources) goes through log_escape
 * first when it has not been checked, so that no client can forge a line.
 *
 * The level is process-wide state, like stderr itself: it is the one piece
 * of mutable state outside main.c, set at startup and on reload.
 */
#ifndef RLOCKD_LOG_H
#define RLOCKD_LOG_H

#include <stddef.h>

enum log_level {
    LOG_LEVEL_ERROR = 0,
    LOG_LEVEL_WARN = 1,
    LOG_LEVEL_INFO = 2,
    LOG_LEVEL_DEBUG = 3,
};

/* Name of a level ("error", ...), and the level for a name (-1 if none). */
const char *log_level_name(int level);
int log_level_parse(const char *name);

void log_set_level(int level);
int log_enabled(int level);

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A line a remote peer can cause at will (a refused connection, Hello or frame): at most 20
 * such lines a second are written, the rest counted and reported in one line when the next
 * second's first such line comes. A flood of bad Hellos must not fill the journal and make
 * journald drop the lines that matter (a lost lock).
 */
void log_peer_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A line about a lock operation that carries a client's trace id (its grant, wait,
 * release, loss or failed renewal): written only for operations a client chose to
 * trace, so at most 1000 a second, the rest counted and reported as above.
 */
void log_trace_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * s with backslash and double quote escaped (\\, \") and every byte outside
 * printable ASCII as \xNN, cut to fit len. For text that failed its checks:
 * it may be invalid UTF-8 or hold C1 controls (U+0085 ends a line for some
 * readers), so no byte of it passes unescaped.
 */
void log_escape(const char *s, char *out, size_t len);

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_peer_warn(...) log_peer_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_peer_info(...) log_peer_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)                                                                          \
    do {                                                                                        \
        if (log_enabled(LOG_LEVEL_DEBUG))                                                       \
            log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__);                                              \
    } while (0)

#endif
