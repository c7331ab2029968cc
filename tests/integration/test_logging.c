/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_logging.c — what rlockd writes to its log:
 *
 *  - a client name with a newline, terminal escape sequences, quotes, a
 *    backslash, a C1 control and a byte that is not UTF-8 is refused at
 *    Hello with INVALID, and the refusal is logged escaped, on one line: no
 *    byte of the name reaches the log raw;
 *  - a valid name holding bidi controls, zero-width characters or line
 *    separators is accepted, and every line showing it writes them as
 *    \u{XXXX};
 *  - 500 bad Hellos in a burst write a bounded number of lines and a count
 *    of those not written;
 *  - with JOURNAL_STREAM naming its stderr (as journald sets it), every line
 *    starts with a "<N>" syslog priority and carries no timestamp; naming
 *    another stream (a child that inherited the variable), it does not.
 */
#include "admin_ctl.h"
#include "harness.h"
#include "harness_raw.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Send Hello with client_name name on a new connection; expect INVALID, then the close. */
static void hello_refused(struct h_env *e, const char *name, const char *why)
{
    struct h_raw c;
    h_raw_open(&c, e);
    h_raw_send_hello(&c, 1, name, 0);
    Rlock__V1__ServerMessage *m = NULL;
    ck_assert_int_eq(h_raw_read(&c, h_now_ms() + 5000, &m), 1);
    const Rlock__V1__Response *r = h_raw_response(m);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->status == RLOCK__V1__STATUS__STATUS_INVALID, "Hello answered %s",
                  wire_status_name(r->status));
    ck_assert_msg(strstr(r->message, why) != NULL, "Hello refused for \"%s\", not %s",
                  r->message, why);
    h_raw_free(m);
    ck_assert_int_eq(h_raw_read(&c, h_now_ms() + 5000, &m), 0); /* then closed */
    h_raw_close(&c);
}

/* The whole line of text that contains needle (malloc'd); fails when there is none. */
static char *line_with(const char *text, const char *needle)
{
    const char *hit = strstr(text, needle);
    ck_assert_msg(hit != NULL, "no line with \"%s\" in:\n%s", needle, text);
    const char *start = hit;
    while (start > text && start[-1] != '\n')
        start--;
    const char *end = strchr(hit, '\n');
    ck_assert_ptr_nonnull(end);
    return strndup(start, (size_t)(end - start));
}

START_TEST(test_client_name_escaped)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    size_t at = h_log_size(&e);
    /* A newline that would start a forged line, colours, quotes, a backslash, NEL (C1). */
    hello_refused(&e, "evil\n2031-01-01T00:00:00.000Z error forged \x1b[31mred\x1b[0m \"q\" \\ "
                      "\xc2\x85nel",
                  "control characters");
    char *log = h_log_wait_from(&e, at, "refused Hello", 5000);
    char *line = line_with(log, "refused Hello");
    const char *shown = "\"evil\\x0a2031-01-01T00:00:00.000Z error forged \\x1b[31mred\\x1b[0m "
                        "\\\"q\\\" \\\\ \\xc2\\x85nel\"";
    ck_assert_msg(strstr(line, shown) != NULL, "the name is not shown escaped:\n%s\nwanted %s",
                  line, shown);
    ck_assert_msg(strstr(line, "session ") != NULL && strstr(line, "(unix)") != NULL,
                  "no session id and peer: %s", line);
    /* Nothing of the name went out raw: no forged line, no escape or C1 bytes. */
    ck_assert_msg(strstr(log, "\n2031-01-01") == NULL, "a forged line reached the log:\n%s", log);
    ck_assert_msg(strchr(log, '\x1b') == NULL, "a raw ESC reached the log");
    ck_assert_msg(strstr(log, "\xc2\x85") == NULL, "a raw NEL reached the log");
    free(line);
    free(log);

    /* Bytes that are not UTF-8 are refused as such, and shown as \xNN too. */
    at = h_log_size(&e);
    hello_refused(&e, "bad\xff\xfe", "not valid UTF-8");
    log = h_log_wait_from(&e, at, "refused Hello", 5000);
    line = line_with(log, "refused Hello");
    ck_assert_msg(strstr(line, "\"bad\\xff\\xfe\"") != NULL, "not escaped: %s", line);
    ck_assert_msg(strchr(log, '\xff') == NULL, "a raw 0xff reached the log");
    free(line);
    free(log);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

/*
 * A client name that is valid UTF-8 but holds characters that change how a line looks
 * (U+202E RIGHT-TO-LEFT OVERRIDE, U+200B ZERO WIDTH SPACE, U+2028 LINE SEPARATOR, U+FEFF,
 * U+2066 LEFT-TO-RIGHT ISOLATE, U+061C ARABIC LETTER MARK) is accepted, and every line that
 * shows it writes those as \u{XXXX}: none reaches the log raw.
 */
START_TEST(test_spoofing_chars_escaped)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    size_t at = h_log_size(&e);
    struct h_raw c;
    h_raw_open(&c, &e);
    h_raw_hello(&c, 1, "ops\xe2\x80\xae" "gpj.exe\xe2\x80\x8bx\xe2\x80\xa8y\xef\xbb\xbf"
                       "\xe2\x81\xa6z\xd8\x9c", 0);
    /* rlockctl sessions shows the name the same way on a terminal. */
    char *table = NULL;
    ck_assert_int_eq(actl_run(&e, NULL, &table, NULL, "sessions", NULL), 0);
    ck_assert_msg(strstr(table, "ops\\u{202e}gpj.exe\\u{200b}x\\u{2028}y\\u{feff}\\u{2066}z"
                                "\\u{061c}") != NULL,
                  "rlockctl sessions does not show the name escaped:\n%s", table);
    free(table);
    h_raw_close(&c);
    /* Its own close line, not the close of the harness's readiness probe (which may be
     * logged after at): the line that shows the name and the close. */
    char *log = NULL;
    const char *close_line = NULL;
    for (int64_t end = h_now_ms() + 5000; close_line == NULL && h_now_ms() < end;) {
        free(log);
        log = h_log_wait_from(&e, at, "(unix, ops", 100);
        for (const char *p = strstr(log, "(unix, ops"); p != NULL && close_line == NULL;
             p = strstr(p + 1, "(unix, ops")) {
            const char *eol = strchr(p, '\n');
            const char *hit = strstr(p, "): closed: ");
            if (eol != NULL && hit != NULL && hit < eol)
                close_line = p;
        }
        if (close_line == NULL)
            h_sleep_ms(20);
    }
    ck_assert_msg(close_line != NULL, "the session's close was not logged:\n%s", log);
    char *line = line_with(close_line, "closed:");
    const char *shown = "ops\\u{202e}gpj.exe\\u{200b}x\\u{2028}y\\u{feff}\\u{2066}z\\u{061c}";
    ck_assert_msg(strstr(line, shown) != NULL, "not escaped:\n%s\nwanted %s", line, shown);
    static const char *const raw[] = {"\xe2\x80\xae", "\xe2\x80\x8b", "\xe2\x80\xa8",
                                      "\xef\xbb\xbf", "\xe2\x81\xa6", "\xd8\x9c"};
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++)
        ck_assert_msg(strstr(log, raw[i]) == NULL, "character %zu reached the log raw:\n%s", i,
                      log);
    free(line);
    free(log);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

/* Lines of text. */
static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; (p = strchr(p, '\n')) != NULL; p++)
        n++;
    return n;
}

/*
 * 500 bad Hellos in a burst: each is refused, but the log gets a bounded number of lines
 * about them (20 a second) and one line saying how many were not written, instead of
 * 1,000 lines that would make journald drop the ones that matter.
 */
START_TEST(test_bad_hello_flood)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    size_t at = h_log_size(&e);
    int64_t t0 = h_now_ms();
    for (int i = 0; i < 500; i++)
        hello_refused(&e, "flood\x01", "control characters");
    int64_t took = h_now_ms() - t0;
    h_sleep_ms(1100); /* the next second: the next such line comes after the summary */
    hello_refused(&e, "after\x01", "control characters");
    char *log = h_log_wait_from(&e, at, "refused Hello: client_name contains control characters: "
                                        "\"after\\x01\"", 5000);
    int lines = count_lines(log);
    printf("logging: 501 bad Hellos in %lld ms wrote %d lines\n", (long long)(took + 1100),
           lines);
    int seconds = (int)((took + 1100) / 1000) + 2;
    ck_assert_msg(lines <= 20 * seconds + seconds, "%d lines for 501 bad Hellos in %lld ms", lines,
                  (long long)(took + 1100));
    ck_assert_msg(strstr(log, "more lines about peers") != NULL, "no count of the lines dropped:\n%s",
                  log);
    free(log);
    h_assert_env_alive(&e);
    h_env_stop(&e);
}
END_TEST

/* Restart e's rlockd with JOURNAL_STREAM set to "DEV:INO" of path (the current log, or not). */
static void restart_with_journal(struct h_env *e, const char *path, int ino_delta)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    char v[64];
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + (unsigned long long)ino_delta);
    ck_assert_int_eq(h_rlockd_signal(e, SIGTERM), 0);
    setenv("JOURNAL_STREAM", v, 1);
    int rc = h_rlockd_start(e);
    unsetenv("JOURNAL_STREAM");
    ck_assert_int_eq(rc, 0);
}

START_TEST(test_journald_priorities)
{
    struct h_env e;
    h_env_start_or_fail(&e, NULL);
    char path[320];
    h_env_path(&e, "rlockd.log", path, sizeof path);

    size_t at = h_log_size(&e);
    restart_with_journal(&e, path, 0);
    hello_refused(&e, "x\x01", "control characters");
    char *log = h_log_wait_from(&e, at, "refused Hello", 5000);
    /* The first line after `at` is the old daemon's last: start at the new one's first. */
    const char *fresh = strstr(log, "<6>listening on unix:");
    ck_assert_msg(fresh != NULL, "no \"<6>listening on\" line:\n%s", log);
    ck_assert_msg(strstr(fresh, "<4>session ") != NULL, "the refusal is not <4>:\n%s", fresh);
    for (const char *p = fresh; *p != '\0'; p = strchr(p, '\n') + 1) {
        ck_assert_msg(p[0] == '<' && p[1] >= '0' && p[1] <= '7' && p[2] == '>',
                      "a line without a priority prefix: %.80s", p);
        ck_assert_msg(strncmp(p + 3, "20", 2) != 0, "a timestamp after the prefix: %.80s", p);
        if (strchr(p, '\n') == NULL)
            break;
    }
    free(log);

    /* JOURNAL_STREAM inherited, but stderr is another file: timestamps, no prefixes. */
    at = h_log_size(&e);
    restart_with_journal(&e, path, 1);
    hello_refused(&e, "y\x02", "control characters");
    log = h_log_wait_from(&e, at, "refused Hello", 5000);
    char *line = line_with(log, "refused Hello");
    ck_assert_msg(strncmp(line, "20", 2) == 0 && strstr(line, " warn ") != NULL,
                  "not a timestamped warn line: %s", line);
    free(line);
    free(log);
    h_env_stop(&e);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_client_name_escaped, test_spoofing_chars_escaped,
                            test_bad_hello_flood, test_journald_priorities};
    return h_run_tests("logging", 120, tests, H_LEN(tests));
}
