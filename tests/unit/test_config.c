/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_config.c — daemon/base/config.c: defaults, loading, every class of error
 * with its file and line, the dump, addresses, and the shipped
 * conf/rlockd.conf and docs/configuration.md against the key table.
 *
 * Files under test are written to a private temporary directory. When the
 * shipped conf file differs from the dump of the defaults, the expected text
 * is written to RLOCK_UNIT_BUILD_DIR/rlockd.conf.expected for review.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "check_main.h"
#include "config.h"
#include "log.h"

#ifndef RLOCK_SOURCE_DIR
#error "RLOCK_SOURCE_DIR must name the source tree"
#endif
#ifndef RLOCK_UNIT_BUILD_DIR
#define RLOCK_UNIT_BUILD_DIR "."
#endif

#define CONF_FILE RLOCK_SOURCE_DIR "/conf/rlockd.conf"
#define DOCS_FILE RLOCK_SOURCE_DIR "/docs/configuration.md"

static char test_dir[512];

/* Filler for long values and lines. */
#define X16 "xxxxxxxxxxxxxxxx"
#define X128 X16 X16 X16 X16 X16 X16 X16 X16

/* --- helpers ------------------------------------------------------------- */

/* Write text to test_dir/name; the full path goes to path[PATH_MAX]. */
static void write_temp(const char *name, const char *text, char *path)
{
    snprintf(path, PATH_MAX, "%s/%s", test_dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Whole file as a malloc'd string, or NULL when it cannot be read. */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, mem);
    fclose(f);
    fclose(mem);
    return text;
}

static char *dump_string(const struct config *c, int show_secrets)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(mem);
    config_dump(c, mem, show_secrets);
    fclose(mem);
    return text;
}

/* Load path; *errors gets everything config_load reported (caller frees). */
static struct config *load_capture(const char *path, char **errors)
{
    size_t len = 0;
    FILE *mem = open_memstream(errors, &len);
    ck_assert_ptr_nonnull(mem);
    struct config *c = config_load(path, mem);
    fclose(mem);
    return c;
}

/* Write text to a file, load it, and expect success with no messages. */
static struct config *load_ok(const char *text)
{
    char path[PATH_MAX];
    char *errors = NULL;
    write_temp("ok.conf", text, path);
    struct config *c = load_capture(path, &errors);
    ck_assert_msg(c != NULL, "load failed: %s", errors);
    ck_assert_str_eq(errors, "");
    free(errors);
    unlink(path);
    return c;
}

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p != '\0'; p++)
        n += *p == '\n';
    return n;
}

/* --- the table as documentation sees it ------------------------------------ */

/* config_key_doc walks the same keys as the dump, in its order, with the table's facts. */
START_TEST(test_key_doc)
{
    struct config *c = config_defaults();
    char *dump = dump_string(c, 1);
    struct config_key_doc k;
    size_t n = 0;
    const char *at = dump;
    for (; config_key_doc(n, &k) == 0; n++) {
        char line[160];
        snprintf(line, sizeof line, "\n%s =", k.name);
        const char *found = strstr(at, line);
        ck_assert_msg(found != NULL, "%s.%s not in the dump after the key before it", k.section,
                      k.name);
        at = found + 1;
        ck_assert_ptr_nonnull(k.help);
        ck_assert_uint_gt(strlen(k.help), 0);
        if (strcmp(k.section, "server") == 0 && strcmp(k.name, "listen") == 0) {
            ck_assert_str_eq(k.type, "string");
            ck_assert_str_eq(k.default_text, "127.0.0.1:7483");
            ck_assert_str_eq(k.min, "1");
            ck_assert_str_eq(k.max, "1024");
            ck_assert_int_eq(k.reloadable, 0);
        } else if (strcmp(k.section, "limits") == 0 && strcmp(k.name, "default_ttl") == 0) {
            ck_assert_str_eq(k.type, "duration");
            ck_assert_str_eq(k.min, "100ms");
            ck_assert_str_eq(k.max, "24h");
            ck_assert_int_eq(k.reloadable, 1);
        } else if (strcmp(k.section, "redis") == 0 && strcmp(k.name, "password") == 0) {
            ck_assert_int_eq(k.secret, 1);
        } else if (strcmp(k.section, "log") == 0) {
            ck_assert_str_eq(k.type, "log level");
            ck_assert_str_eq(k.min, "");
        }
    }
    size_t settings = 0; /* the dump's "key = value" lines */
    for (const char *p = dump; *p != '\0'; p = strchr(p, '\n') + 1) {
        settings += *p != '#' && *p != '[' && *p != '\n';
        if (strchr(p, '\n') == NULL)
            break;
    }
    ck_assert_uint_eq(n, settings);
    ck_assert_int_eq(config_key_doc(n + 1, &k), -1);
    free(dump);
    config_free(c);
}
END_TEST

/* --- defaults and the shipped files -------------------------------------- */

START_TEST(test_defaults_validate)
{
    struct config *c = config_defaults();
    ck_assert_ptr_nonnull(c);
    char *errors = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&errors, &len);
    ck_assert_int_eq(config_validate(c, "defaults", mem), 0);
    fclose(mem);
    ck_assert_str_eq(errors, "");
    free(errors);

    ck_assert_str_eq(c->listen, "127.0.0.1:7483");
    ck_assert_str_eq(c->redis_address, "127.0.0.1:6379");
    ck_assert_str_eq(c->redis_password, "");
    ck_assert_str_eq(c->key_prefix, "rlock:");
    ck_assert_uint_eq(c->max_frame_bytes, 65536);
    ck_assert_uint_eq(c->session_timeout_ms, 10000);
    ck_assert_uint_eq(c->session_max_timeout_ms, 300000);
    ck_assert_uint_eq(c->command_timeout_ms, 300);
    ck_assert_uint_eq(c->min_ttl_ms, 1000);
    ck_assert_uint_eq(c->max_ttl_ms, 3600000);
    ck_assert_int_eq(c->log_level, LOG_LEVEL_INFO);
    config_free(c);
    config_free(NULL);
}
END_TEST

START_TEST(test_conf_file_is_dump_of_defaults)
{
    struct config *c = config_defaults();
    ck_assert_ptr_nonnull(c);
    char *expected = dump_string(c, 1);
    char *actual = read_all(CONF_FILE);
    int same = actual != NULL && strcmp(actual, expected) == 0;
    if (!same) {
        const char *out = RLOCK_UNIT_BUILD_DIR "/rlockd.conf.expected";
        FILE *f = fopen(out, "w");
        if (f != NULL) {
            fputs(expected, f);
            fclose(f);
        }
        ck_abort_msg("%s differs from the dump of the defaults; expected text is in %s",
                     CONF_FILE, out);
    }
    free(actual);
    free(expected);
    config_free(c);
}
END_TEST

START_TEST(test_conf_file_loads_as_defaults)
{
    char *errors = NULL;
    struct config *loaded = load_capture(CONF_FILE, &errors);
    ck_assert_msg(loaded != NULL, "%s", errors);
    ck_assert_str_eq(errors, "");
    struct config *defaults = config_defaults();
    char *a = dump_string(loaded, 1);
    char *b = dump_string(defaults, 1);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    free(errors);
    config_free(loaded);
    config_free(defaults);
}
END_TEST

/* Every key appears in the docs' table as "| `section.key` | DEFAULT | yes-or-restart |". */
START_TEST(test_docs_list_every_key)
{
    char *docs = read_all(DOCS_FILE);
    ck_assert_msg(docs != NULL, "cannot read %s", DOCS_FILE);
#define DOC_ROW(section, name, type, field, default_text, min, max, reloadable, ...)            \
    do {                                                                                        \
        char row[256];                                                                          \
        snprintf(row, sizeof row, "| `%s.%s` | %s%s%s | %s |", section, name,                   \
                 default_text[0] ? "`" : "", default_text[0] ? default_text : "(empty)",        \
                 default_text[0] ? "`" : "", (reloadable) ? "yes" : "restart");                 \
        ck_assert_msg(strstr(docs, row) != NULL, "%s lacks the row %s", DOCS_FILE, row);        \
    } while (0);
    CONFIG_KEYS(DOC_ROW)
#undef DOC_ROW
    free(docs);
}
END_TEST

/* --- good files ---------------------------------------------------------- */

START_TEST(test_durations_with_units)
{
    struct config *c = load_ok("[server]\n"
                               "hello_timeout = 1500ms\n"
                               "shutdown_timeout = 0\n"
                               "[redis]\n"
                               "connect_timeout = 2\n"
                               "command_timeout = 0.25s\n"
                               "[session]\n"
                               "max_timeout = 1.5m\n"
                               "[limits]\n"
                               "max_ttl = 2h\n"
                               "max_wait = 90 s\n");
    ck_assert_uint_eq(c->hello_timeout_ms, 1500);
    ck_assert_uint_eq(c->shutdown_timeout_ms, 0);
    ck_assert_uint_eq(c->connect_timeout_ms, 2000);
    ck_assert_uint_eq(c->command_timeout_ms, 250);
    ck_assert_uint_eq(c->session_max_timeout_ms, 90000);
    ck_assert_uint_eq(c->max_ttl_ms, 7200000);
    ck_assert_uint_eq(c->max_wait_ms, 90000);
    config_free(c);
}
END_TEST

/* Comments (one as long as allowed), blank lines, CRLF, a BOM, indentation, inline comments. */
START_TEST(test_file_syntax_accepted)
{
    struct config *c = load_ok("\xef\xbb\xbf# comment\r\n"
                               "#" X128 X16 X16 X16 X16 "xxxx\r\n"
                               "; another\r\n"
                               "\r\n"
                               "[server]\r\n"
                               "   max_sessions = 7   ; inline comment\r\n"
                               "\tlisten = 127.0.0.1:1, [::1]:0 ,unix:/tmp/r.sock\r\n"
                               "[log]\r\n"
                               "level: debug\r\n");
    ck_assert_uint_eq(c->max_sessions, 7);
    ck_assert_str_eq(c->listen, "127.0.0.1:1, [::1]:0 ,unix:/tmp/r.sock");
    ck_assert_int_eq(c->log_level, LOG_LEVEL_DEBUG);
    config_free(c);
}
END_TEST

static const char round_trip_text[] = "[server]\n"
                                      "listen = [::1]:7000, unix:/run/rlockd/rlockd.sock\n"
                                      "max_sessions = 12\n"
                                      "hello_timeout = 1500ms\n"
                                      "[redis]\n"
                                      "address = unix:/run/redis/redis.sock\n"
                                      "user = locker\n"
                                      "password = s3cret\n"
                                      "key_prefix =\n"
                                      "[session]\n"
                                      "timeout = 1m\n"
                                      "[log]\n"
                                      "level = warn\n";

START_TEST(test_dump_load_round_trip)
{
    struct config *first = load_ok(round_trip_text);
    ck_assert_str_eq(first->key_prefix, "");
    ck_assert_str_eq(first->redis_password, "s3cret");
    char *dumped = dump_string(first, 1);
    struct config *second = load_ok(dumped);
    char *again = dump_string(second, 1);
    ck_assert_str_eq(dumped, again);
    ck_assert_ptr_nonnull(strstr(dumped, "\nkey_prefix =\n"));
    ck_assert_ptr_nonnull(strstr(dumped, "\nhello_timeout = 1500ms\n"));
    ck_assert_ptr_nonnull(strstr(dumped, "\ntimeout = 1m\n"));
    ck_assert_ptr_nonnull(strstr(dumped, "\nlevel = warn\n"));

    char *hidden = dump_string(first, 0);
    ck_assert_ptr_nonnull(strstr(hidden, "\npassword = <hidden>\n"));
    ck_assert_ptr_null(strstr(hidden, "s3cret"));
    free(hidden);
    free(dumped);
    free(again);
    config_free(first);
    config_free(second);
}
END_TEST

/* Values that load but could not be dumped as "key = value" and read back. */
static const struct {
    const char *file;
    const char *password;
    const char *dumped; /* its line in the dump */
} awkward_values[] = {
    {"[redis]\npassword=;x\n", ";x", "\npassword=;x\n"},
    {"[redis]\npassword=" X128 X16 X16 X16 "xxxxxxxxxxxx\n", X128 X16 X16 X16 "xxxxxxxxxxxx",
     "\npassword=" X128 X16 X16 X16 "xxxxxxxxxxxx\n"},
};

START_TEST(test_dump_awkward_values)
{
    struct config *first = load_ok(awkward_values[_i].file);
    ck_assert_str_eq(first->redis_password, awkward_values[_i].password);
    char *dumped = dump_string(first, 1);
    ck_assert_ptr_nonnull(strstr(dumped, awkward_values[_i].dumped));
    struct config *second = load_ok(dumped);
    ck_assert_str_eq(second->redis_password, awkward_values[_i].password);
    char *again = dump_string(second, 1);
    ck_assert_str_eq(dumped, again);
    free(dumped);
    free(again);
    config_free(first);
    config_free(second);
}
END_TEST

START_TEST(test_dump_empty_secret)
{
    struct config *c = config_defaults();
    char *text = dump_string(c, 0);
    ck_assert_ptr_nonnull(strstr(text, "\npassword =\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n[server]\n"));
    ck_assert_ptr_nonnull(strstr(text, "\n# range: 500ms to 1h\ntimeout = 10s\n"));
    free(text);
    config_free(c);
}
END_TEST

static const struct {
    uint32_t ms;
    const char *text;
} dump_durations[] = {
    {0, "0s"},        {1, "1ms"},       {999, "999ms"}, {1000, "1s"},       {1500, "1500ms"},
    {90000, "90s"},   {120000, "2m"},   {5400000, "90m"}, {7200000, "2h"}, {86400000, "24h"},
};

START_TEST(test_dump_duration_units)
{
    struct config *c = config_defaults();
    c->max_wait_ms = dump_durations[_i].ms;
    char *text = dump_string(c, 1);
    char line[64];
    snprintf(line, sizeof line, "\nmax_wait = %s\n", dump_durations[_i].text);
    ck_assert_msg(strstr(text, line) != NULL, "no %s", line + 1);
    free(text);
    config_free(c);
}
END_TEST

/* --- bad files ----------------------------------------------------------- */

/*
 * Each file must be refused with a message "PATH" expect; text NULL means
 * the file does not exist.
 */
static const struct {
    const char *text;
    const char *expect;
} bad_files[] = {
    {NULL, ": cannot open: No such file or directory\n"},
    {"[server]\nbogus = 1\n", ":2: server.bogus: unknown key\n"},
    {"[server]\nlisten = 127.0.0.1:1\n[sever]\nmax_sessions = 5\n",
     ":3: unknown section [sever]\n"},
    {"[server]\n[nothing]\n", ":2: unknown section [nothing]\n"},
    {"max_sessions = 5\n", ":1: max_sessions: key before any [section]\n"},
    {"# x\n[session]\ntimeout = 10 sec\n", ":3: session.timeout: not a duration (\"10 sec\""},
    {"[session]\ntimeout = -5s\n", ":2: session.timeout: not a duration"},
    {"[session]\ntimeout = 100ms\n", ":2: session.timeout: 100ms is out of range (500ms to 1h)\n"},
    {"[limits]\nmax_ttl = 25h\n", ":2: limits.max_ttl: 25h is out of range (100ms to 24h)\n"},
    {"[server]\nmax_sessions = 0\n", ":2: server.max_sessions: 0 is out of range (1 to 1000000)\n"},
    {"[server]\nmax_sessions = 99999999999999999999999\n",
     ":2: server.max_sessions: 99999999999999999999999 is out of range"},
    {"[server]\nmax_sessions = 12x\n", ":2: server.max_sessions: not a number (\"12x\")\n"},
    {"[server]\nmax_sessions = +5\n", ":2: server.max_sessions: not a number"},
    {"[server]\nmax_sessions =\n", ":2: server.max_sessions: not a number"},
    {"[log]\nlevel = loud\n", ":2: log.level: not a log level"},
    {"[redis]\nkey_prefix = " X128 "x\n",
     ":2: redis.key_prefix: too long (129 bytes, at most 128)\n"},
    {"[server]\nlisten =\n", ":2: server.listen: must not be empty\n"},
    {"[redis]\n\nkey_prefix = " X128 X16 X16 X16 X16 "\n",
     ":3: line too long (205 characters, at most 197)\n"},
    {"#" X128 X16 X16 X16 X16 "xxxxx\n", ":1: line too long (198 characters, at most 197)\n"},
    {"[server]\nlisten = 127.0.0.1:1\nlisten = 127.0.0.1:2\n",
     ":3: server.listen: duplicate key (first set on line 2)\n"},
    {"[server\nmax_sessions = 5\n", ":1: syntax error: section header without ']'\n"},
    {"[server]\njust words\n", ":2: syntax error: expected KEY = VALUE\n"},
    {"[session]\ntimeout = 5s\n   20s\n", ":3: syntax error: expected KEY = VALUE\n"},
    {"[server]\nbogus ; = 1\n", ":2: syntax error\n"},
    {"[server]\r\nbogus = 1\r\n", ":2: server.bogus: unknown key\n"},
    {"\xef\xbb\xbf[server]\nbogus = 1\n", ":2: server.bogus: unknown key\n"},
    {"[session]\n\nmin_timeout = 20s\n",
     ":3: session.min_timeout: 20s is more than session.timeout (10s)\n"},
    {"[session]\ntimeout = 20m\n",
     ":2: session.timeout: 20m is more than session.max_timeout (5m)\n"},
    {"[session]\nmax_timeout = 2s\n",
     ":2: session.max_timeout: 2s is less than session.timeout (10s)\n"},
    {"[limits]\ndefault_ttl = 200ms\n",
     ":2: limits.default_ttl: 200ms is less than limits.min_ttl (1s)\n"},
    {"[limits]\nmin_ttl = 600ms\n",
     ":2: limits.min_ttl: redis.command_timeout (300ms) must be at most a third of "
     "limits.min_ttl (600ms)"},
    {"[redis]\ncommand_timeout = 400ms\n",
     ":2: redis.command_timeout: redis.command_timeout (400ms) must be at most a third of "
     "limits.min_ttl (1s)"},
    {"[limits]\nmax_ttl = 10s\n",
     ":2: limits.max_ttl: 10s is less than limits.default_ttl (30s)\n"},
    {"[redis]\nreconnect_max = 10ms\n",
     ":2: redis.reconnect_max: 10ms is less than redis.reconnect_min (50ms)\n"},
    {"[server]\nlisten = localhost:7483\n",
     ":2: server.listen: entry 1 (localhost:7483): \"localhost\" is not a numeric IPv4 address"},
    {"[server]\nlisten = 127.0.0.1:1, ::1:5\n",
     ":2: server.listen: entry 2 (::1:5): IPv6 addresses go in brackets"},
    {"[server]\nlisten = 127.0.0.1:1,\n", ":2: server.listen: entry 2 is empty\n"},
    {"[server]\nlisten = 1.1.1.1:1,1.1.1.1:2,1.1.1.1:3,1.1.1.1:4,1.1.1.1:5,1.1.1.1:6,1.1.1.1:7,"
     "1.1.1.1:8,1.1.1.1:9\n",
     ":2: server.listen: more than 8 addresses\n"},
    {"[server]\nlisten = unix:run/rlockd.sock\n",
     ":2: server.listen: entry 1 (unix:run/rlockd.sock): unix socket path must be absolute"},
    {"[redis]\naddress = 127.0.0.1:0\n", ":2: redis.address: port 0 is not allowed here\n"},
    {"[redis]\naddress = 127.0.0.1:1,127.0.0.1:2\n",
     ":2: redis.address: exactly one address is allowed\n"},
    {"[redis]\naddress = 127.0.0.1:99999\n", ":2: redis.address: \"99999\" is not a port number"},
    {"[redis]\naddress = 127.0.0.1:1\ncluster_nodes = 127.0.0.1:2\n",
     ":3: redis.cluster_nodes: choose one of redis.address, redis.sentinels"},
    {"[redis]\nsentinels = 127.0.0.1:1\nmaster_name = m\ncluster_nodes = 127.0.0.1:2\n",
     ":4: redis.cluster_nodes: choose one of"},
    {"[redis]\nsentinels = 127.0.0.1:26379\n", ":2: redis.sentinels: redis.sentinels needs "
                                                "redis.master_name\n"},
    {"[redis]\nmaster_name = m\n",
     ":2: redis.master_name: redis.master_name is only used with redis.sentinels\n"},
    {"[redis]\nmin_replicas_acked = 1\nreplica_ack_timeout = 100ms\ncommand_timeout = 300ms\n",
     ":3: redis.replica_ack_timeout: redis.command_timeout + redis.replica_ack_timeout must be "
     "at most a third of limits.min_ttl (1s)"},
    {"[redis]\ncluster_nodes = 127.0.0.1:7000\ndatabase = 2\n",
     ":3: redis.database: a Redis Cluster has only database 0\n"},
    {"[redis]\ncluster_nodes = 127.0.0.1:7000, 127.0.0.1:0\n",
     ":2: redis.cluster_nodes: entry 2: port 0 is not allowed here\n"},
    {"[redis]\nsentinels = 127.0.0.1:1, redis:26379\nmaster_name = m\n",
     ":2: redis.sentinels: entry 2 (redis:26379): \"redis\" is not a numeric IPv4 address"},
};

START_TEST(test_bad_file)
{
    char path[PATH_MAX];
    char name[32];
    snprintf(name, sizeof name, "bad%d.conf", _i);
    if (bad_files[_i].text != NULL)
        write_temp(name, bad_files[_i].text, path);
    else
        snprintf(path, sizeof path, "%s/%s", test_dir, name);
    char *errors = NULL;
    struct config *c = load_capture(path, &errors);
    ck_assert_msg(c == NULL, "file %d was accepted", _i);
    char want[PATH_MAX + 256];
    snprintf(want, sizeof want, "%s%s", path, bad_files[_i].expect);
    ck_assert_msg(strstr(errors, want) != NULL, "file %d: want \"%s\" in \"%s\"", _i, want, errors);
    free(errors);
    unlink(path);
}
END_TEST

/*
 * One message per problem, all of them, before giving up. A refused value
 * (session.timeout) is left out of the cross-field checks, so min_timeout =
 * 1h is not compared with it.
 */
START_TEST(test_all_errors_reported)
{
    char path[PATH_MAX];
    write_temp("many.conf",
               "[server]\n"
               "bogus = 1\n"
               "max_sessions = x\n"
               "[nope]\n"
               "a = b\n"
               "[session]\n"
               "timeout = 10 parsecs\n"
               "min_timeout = 1h\n"
               "key_prefix = " X128 X16 X16 X16 X16 "\n"
               "[limits]\n"
               "max_ttl = 10s\n"
               "[redis]\n"
               "address = redis:6379\n",
               path);
    char *errors = NULL;
    ck_assert_ptr_null(load_capture(path, &errors));
    ck_assert_msg(count_lines(errors) == 7, "%s", errors);
    const int lines[] = {2, 3, 4, 7, 9, 11, 13};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        char want[PATH_MAX + 16];
        snprintf(want, sizeof want, "%s:%d: ", path, lines[i]);
        ck_assert_msg(strstr(errors, want) != NULL, "no error on line %d: %s", lines[i], errors);
    }
    free(errors);
    unlink(path);
}
END_TEST

START_TEST(test_validate_without_lines)
{
    struct config *c = config_defaults();
    c->reconnect_min_ms = 5000;
    char *errors = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&errors, &len);
    ck_assert_int_eq(config_validate(c, "reload", mem), -1);
    fclose(mem);
    ck_assert_str_eq(errors,
                     "reload: redis.reconnect_min: 5s is more than redis.reconnect_max (1s)\n");
    free(errors);
    config_free(c);
}
END_TEST

/* --- addresses ----------------------------------------------------------- */

static const struct {
    const char *text;
    int ok;
    int is_unix;
    const char *host_or_path;
    uint16_t port;
} addresses[] = {
    {"127.0.0.1:7483", 1, 0, "127.0.0.1", 7483},
    {"0.0.0.0:0", 1, 0, "0.0.0.0", 0},
    {"[::1]:65535", 1, 0, "::1", 65535},
    {"[2001:db8::ff00:42:8329]:80", 1, 0, "2001:db8::ff00:42:8329", 80},
    {"unix:/run/rlockd.sock", 1, 1, "/run/rlockd.sock", 0},
    /* 107 bytes of path fit sun_path with its NUL; 108 do not. */
    {"unix:/" X16 X16 X16 X16 X16 X16 "xxxxxxxxxx", 1, 1,
     "/" X16 X16 X16 X16 X16 X16 "xxxxxxxxxx", 0},
    {"unix:/" X16 X16 X16 X16 X16 X16 "xxxxxxxxxxx", 0, 0, NULL, 0},
    {"unix:relative.sock", 0, 0, NULL, 0},
    {"unix:", 0, 0, NULL, 0},
    {"", 0, 0, NULL, 0},
    {"127.0.0.1", 0, 0, NULL, 0},
    {"127.0.0.1:", 0, 0, NULL, 0},
    {"127.0.0.1:65536", 0, 0, NULL, 0},
    {"127.0.0.1:-1", 0, 0, NULL, 0},
    {"127.0.0.1:+1", 0, 0, NULL, 0},
    {"127.0.0.1:80x", 0, 0, NULL, 0},
    {"1.2.3:80", 0, 0, NULL, 0},
    {":80", 0, 0, NULL, 0},
    {"[]:80", 0, 0, NULL, 0},
    {"[::1]", 0, 0, NULL, 0},
    {"[::1:80", 0, 0, NULL, 0},
    {"::1:80", 0, 0, NULL, 0},
    {"[127.0.0.1]:80", 0, 0, NULL, 0},
    {"localhost:80", 0, 0, NULL, 0},
    {" 127.0.0.1:80", 0, 0, NULL, 0},
};

START_TEST(test_parse_address)
{
    struct config_address a;
    memset(&a, 0xab, sizeof a);
    struct config_address before = a;
    char err[256] = "";
    int rc = config_parse_address(addresses[_i].text, &a, err, sizeof err);
    if (!addresses[_i].ok) {
        ck_assert_msg(rc == -1, "\"%s\" was accepted", addresses[_i].text);
        ck_assert_msg(err[0] != '\0', "no reason for \"%s\"", addresses[_i].text);
        ck_assert_msg(memcmp(&a, &before, sizeof a) == 0, "out changed on error");
        return;
    }
    ck_assert_msg(rc == 0, "\"%s\": %s", addresses[_i].text, err);
    ck_assert_int_eq(a.is_unix, addresses[_i].is_unix);
    ck_assert_str_eq(a.is_unix ? a.path : a.host, addresses[_i].host_or_path);
    ck_assert_str_eq(a.is_unix ? a.host : a.path, "");
    ck_assert_uint_eq(a.port, addresses[_i].port);
}
END_TEST

START_TEST(test_parse_listen)
{
    struct config_address out[CONFIG_MAX_LISTEN];
    char err[256];
    ck_assert_int_eq(config_parse_listen(" 127.0.0.1:1 ,\t[::1]:2,unix:/x ", out, CONFIG_MAX_LISTEN,
                                         err, sizeof err),
                     3);
    ck_assert_str_eq(out[0].host, "127.0.0.1");
    ck_assert_uint_eq(out[1].port, 2);
    ck_assert_str_eq(out[2].path, "/x");
    ck_assert_int_eq(config_parse_listen("127.0.0.1:1,127.0.0.1:2", out, 1, err, sizeof err), -1);
    ck_assert_str_eq(err, "more than 1 addresses");
    ck_assert_int_eq(config_parse_listen("", out, CONFIG_MAX_LISTEN, err, sizeof err), -1);
    ck_assert_str_eq(err, "entry 1 is empty");
    ck_assert_int_eq(config_parse_listen("1.2.3.4:1,,1.2.3.4:2", out, CONFIG_MAX_LISTEN, NULL, 0),
                     -1);
}
END_TEST

/* --- [auth] -------------------------------------------------------------- */

#define TOKEN_A "admin-token-5f1e2d3c4b5a6978"
#define TOKEN_C "client-token-0a1b2c3d4e5f6071"

/* The tokens of token_file and tokens are read into c->auth; the dump shows neither. */
START_TEST(test_auth_tokens_loaded)
{
    char tokens[PATH_MAX], conf[PATH_MAX + 128];
    write_temp("tokens", "# ops\nclient " TOKEN_C "\n", tokens);
    ck_assert_int_eq(chmod(tokens, 0600), 0);
    snprintf(conf, sizeof conf, "[auth]\ntoken_file = %s\ntokens = admin " TOKEN_A "\n", tokens);
    struct config *c = load_ok(conf);
    ck_assert_ptr_nonnull(c->auth);
    ck_assert_uint_eq(auth_tokens_count(c->auth, AUTH_ROLE_ADMIN), 1);
    ck_assert_uint_eq(auth_tokens_count(c->auth, AUTH_ROLE_CLIENT), 1);
    ck_assert_int_eq(auth_check(c->auth, TOKEN_A, strlen(TOKEN_A), NULL), AUTH_ROLE_ADMIN);
    ck_assert_int_eq(auth_check(c->auth, TOKEN_C, strlen(TOKEN_C), NULL), AUTH_ROLE_CLIENT);
    char *text = dump_string(c, 0);
    ck_assert_ptr_nonnull(strstr(text, "\ntokens = <hidden>\n"));
    ck_assert_ptr_nonnull(strstr(text, tokens));
    ck_assert_ptr_null(strstr(text, "token-"));
    free(text);
    config_free(c);
    c = config_defaults();
    ck_assert_ptr_null(c->auth);
    config_free(c);
    unlink(tokens);
}
END_TEST

/* Each problem names the key and line, and the token file's own line; never a token. */
START_TEST(test_auth_errors)
{
    char tokens[PATH_MAX], conf[PATH_MAX], text[PATH_MAX + 128], want[3 * PATH_MAX + 256];
    char *errors = NULL;
    write_temp("tokens", "admin " TOKEN_A "\nroot " TOKEN_C "\n", tokens);
    ck_assert_int_eq(chmod(tokens, 0640), 0);
    snprintf(text, sizeof text, "[auth]\n\ntoken_file = %s\ntokens = admin short\n", tokens);
    write_temp("auth.conf", text, conf);
    ck_assert_ptr_null(load_capture(conf, &errors));
    snprintf(want, sizeof want,
             "%s:4: auth.tokens: entry 1: token too short (at least 16 characters)\n"
             "%s:3: auth.token_file: %s: line 2: unknown role (use admin or client)\n",
             conf, conf, tokens);
    ck_assert_str_eq(errors, want);
    free(errors);

    ck_assert_int_eq(chmod(tokens, 0644), 0);
    snprintf(text, sizeof text, "[auth]\ntoken_file = %s\n", tokens);
    write_temp("auth.conf", text, conf);
    ck_assert_ptr_null(load_capture(conf, &errors));
    snprintf(want, sizeof want,
             "%s:2: auth.token_file: %s: readable or writable by others (mode 0644); chmod o-rw "
             "it\n",
             conf, tokens);
    ck_assert_str_eq(errors, want);
    free(errors);

    write_temp("tokens", "# nothing yet\n", tokens);
    ck_assert_int_eq(chmod(tokens, 0600), 0);
    ck_assert_ptr_null(load_capture(conf, &errors));
    snprintf(want, sizeof want, "%s:2: auth.token_file: %s: no token in the file\n", conf,
             tokens);
    ck_assert_str_eq(errors, want);
    free(errors);
    unlink(tokens);
    unlink(conf);
}
END_TEST

/* --- runner -------------------------------------------------------------- */

/* Remove test_dir and whatever a failed test left in it. */
static void remove_test_dir(void)
{
    DIR *d = opendir(test_dir);
    if (d != NULL) {
        struct dirent *e;
        char path[PATH_MAX + 256];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", test_dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(test_dir);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(test_dir, sizeof test_dir, "%s/rlockd-unit-config-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(test_dir) == NULL) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    const struct unit_test tests[] = {
        {"defaults", test_defaults_validate, 0},
        {"defaults", test_conf_file_is_dump_of_defaults, 0},
        {"defaults", test_conf_file_loads_as_defaults, 0},
        {"defaults", test_docs_list_every_key, 0},
        {"defaults", test_key_doc, 0},
        {"load", test_durations_with_units, 0},
        {"load", test_file_syntax_accepted, 0},
        {"load", test_dump_load_round_trip, 0},
        {"load", test_dump_awkward_values, UNIT_COUNT(awkward_values)},
        {"load", test_dump_empty_secret, 0},
        {"load", test_dump_duration_units, UNIT_COUNT(dump_durations)},
        {"errors", test_bad_file, UNIT_COUNT(bad_files)},
        {"errors", test_all_errors_reported, 0},
        {"errors", test_validate_without_lines, 0},
        {"addresses", test_parse_address, UNIT_COUNT(addresses)},
        {"addresses", test_parse_listen, 0},
        {"auth", test_auth_tokens_loaded, 0},
        {"auth", test_auth_errors, 0},
    };
    int rc = unit_run("config", tests, sizeof tests / sizeof tests[0]);
    remove_test_dir();
    return rc;
}
