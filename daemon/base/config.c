/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * config.c — load, check and print rlockd's configuration.
 *
 * Everything is driven by the CONFIG_KEYS table in config.h: it is expanded
 * once here into config_keys[] (name, type, offset of the field in struct
 * config, default text, bounds, help), and every operation walks that array.
 * Defaults go through the same value parser as the file, so a bad default is
 * caught by the same code (and by the unit tests).
 *
 * Reading a file happens in three phases, each reporting every problem it
 * finds as "FILE:LINE: section.key: problem" before giving up:
 *   1. lines: our own reader feeds libinih one physical line at a time, so
 *      the reader's counter is the line number of whatever the handler sees
 *      (Debian's inih 55 is built without INI_HANDLER_LINENO). It refuses
 *      lines longer than inih's buffer, which inih would cut silently, and
 *      lines inih would not understand, and strips leading blanks so that
 *      inih never treats an indented line as the continuation of a value.
 *   2. values: unknown sections and keys, duplicates, bad or out-of-range
 *      values, over-long strings.
 *   3. cross-field checks (min <= default <= max, addresses), skipping any
 *      key whose value was refused: its field still holds the default, and
 *      a conflict with that would only be noise.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <ini.h>

#include "auth.h"
#include "duration.h"
#include "log.h"
#include "secretfile.h"

struct config_key {
    const char *section;
    const char *name;
    enum config_type type;
    size_t offset;
    const char *default_text;
    uint32_t min;
    uint32_t max;
    int reloadable;
    int secret;
    const char *help;
};

#define CONFIG_ROW(section, name, type, field, default_text, min, max, reloadable, secret, help) \
    {section, name, type, offsetof(struct config, field), default_text, min, max, reloadable,     \
     secret, help},
static const struct config_key config_keys[] = {CONFIG_KEYS(CONFIG_ROW)};
#undef CONFIG_ROW

/* KEY_<field>: a row's index in config_keys[], for the cross-field checks. */
#define CONFIG_INDEX(section, name, type, field, ...) KEY_##field,
enum config_key_index { CONFIG_KEYS(CONFIG_INDEX) KEY_COUNT };
#undef CONFIG_INDEX

/* Each row's type must match the C type of its field. */
#define FIELD_KIND(field) _Generic(((struct config *)0)->field, char *: 0, uint32_t: 1, int: 2)
#define TYPE_KIND(type)                                                                         \
    ((type) == CONFIG_STRING ? 0 : ((type) == CONFIG_UINT || (type) == CONFIG_DURATION) ? 1 : 2)
#define CONFIG_CHECK(section, name, type, field, ...)                                          \
    _Static_assert(FIELD_KIND(field) == TYPE_KIND(type), "type of config field " #field);
CONFIG_KEYS(CONFIG_CHECK)
#undef CONFIG_CHECK

#define FIELD_PTR(c, key, ctype) ((ctype *)(void *)((char *)(c) + (key)->offset))
#define FIELD_VAL(c, key, ctype) (*(ctype const *)(const void *)((const char *)(c) + (key)->offset))

/*
 * Longest line accepted: inih 55's buffer (200 bytes as Debian builds it)
 * less room for "\r\n\0". Longer lines would be cut silently, so they are
 * refused; a smaller buffer lowers the limit further.
 */
#define CONFIG_MAX_LINE 197

/* Enough for "4294967295ms" and for any uint32 in decimal. */
#define NUM_TEXT 24

/* Durations are printed in the largest unit that divides them exactly. */
static void format_duration(uint32_t ms, char *buf, size_t len)
{
    static const struct {
        uint32_t ms;
        const char *suffix;
    } units[] = {{3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
    if (ms == 0) {
        snprintf(buf, len, "0s");
        return;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (ms % units[i].ms == 0) {
            snprintf(buf, len, "%u%s", ms / units[i].ms, units[i].suffix);
            return;
        }
    }
}

/* A number or a duration of key k, as the file would spell it. */
static void format_number(const struct config_key *k, uint32_t v, char *buf, size_t len)
{
    if (k->type == CONFIG_DURATION)
        format_duration(v, buf, len);
    else
        snprintf(buf, len, "%u", v);
}

/* Decimal digits only; values past UINT64_MAX saturate (and are out of range anyway). */
static int parse_uint(const char *text, uint64_t *out)
{
    if (*text == '\0')
        return -1;
    uint64_t v = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
    }
    *out = v;
    return 0;
}

static int parse_bool(const char *text)
{
    static const char *const yes[] = {"yes", "true", "on", "1"};
    static const char *const no[] = {"no", "false", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(text, yes[i]) == 0)
            return 1;
        if (strcasecmp(text, no[i]) == 0)
            return 0;
    }
    return -1;
}

/* Check v against k's bounds; msg gets "X is out of range (MIN to MAX)". */
static int check_range(const struct config_key *k, uint64_t v, const char *shown, char *msg,
                       size_t len)
{
    if (v >= k->min && v <= k->max)
        return 0;
    char lo[NUM_TEXT], hi[NUM_TEXT];
    format_number(k, k->min, lo, sizeof lo);
    format_number(k, k->max, hi, sizeof hi);
    snprintf(msg, len, "%s is out of range (%s to %s)", shown, lo, hi);
    return -1;
}

/*
 * Parse text as the value of key k and store it in c. Returns 0, or -1 with a
 * reason in msg (c unchanged). Secret values are never echoed in msg.
 */
static int config_set(struct config *c, const struct config_key *k, const char *text, char *msg,
                      size_t len)
{
    uint64_t v = 0;
    switch (k->type) {
    case CONFIG_STRING: {
        size_t n = strlen(text);
        if (n < k->min) {
            if (n == 0)
                snprintf(msg, len, "must not be empty");
            else
                snprintf(msg, len, "too short (%zu bytes, at least %u)", n, k->min);
            return -1;
        }
        if (n > k->max) {
            snprintf(msg, len, "too long (%zu bytes, at most %u)", n, k->max);
            return -1;
        }
        char *copy = strdup(text);
        if (copy == NULL) {
            snprintf(msg, len, "out of memory");
            return -1;
        }
        char **slot = FIELD_PTR(c, k, char *);
        free(*slot);
        *slot = copy;
        return 0;
    }
    case CONFIG_UINT:
    case CONFIG_DURATION: {
        int duration_key = k->type == CONFIG_DURATION;
        int rc = duration_key ? duration_parse_ms(text, 1000, &v) : parse_uint(text, &v);
        if (rc < 0) {
            snprintf(msg, len, "not %s (\"%s\"%s)", duration_key ? "a duration" : "a number", text,
                     duration_key ? "; use ms, s, m or h" : "");
            return -1;
        }
        const char *shown = text;
        char formatted[NUM_TEXT];
        if (duration_key) {
            format_duration((uint32_t)v, formatted, sizeof formatted);
            shown = formatted;
        }
        if (check_range(k, v, shown, msg, len) < 0)
            return -1;
        *FIELD_PTR(c, k, uint32_t) = (uint32_t)v;
        return 0;
    }
    case CONFIG_BOOL:
    case CONFIG_LOGLEVEL: {
        int bool_key = k->type == CONFIG_BOOL;
        int n = bool_key ? parse_bool(text) : log_level_parse(text);
        if (n < 0) {
            snprintf(msg, len, "not %s (\"%s\"; use %s)", bool_key ? "yes/no" : "a log level", text,
                     bool_key ? "yes or no" : "error, warn, info or debug");
            return -1;
        }
        *FIELD_PTR(c, k, int) = n;
        return 0;
    }
    }
    snprintf(msg, len, "unsupported type");
    return -1;
}

struct config *config_defaults(void)
{
    struct config *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    char msg[256];
    for (size_t i = 0; i < KEY_COUNT; i++) {
        if (config_set(c, &config_keys[i], config_keys[i].default_text, msg, sizeof msg) < 0) {
            config_free(c);
            return NULL;
        }
    }
    return c;
}

void config_free(struct config *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < KEY_COUNT; i++)
        if (config_keys[i].type == CONFIG_STRING)
            free(*FIELD_PTR(c, &config_keys[i], char *));
    auth_tokens_free(c->auth);
    free(c);
}

int config_key_doc(size_t i, struct config_key_doc *out)
{
    static const char *const type_names[] = {
        [CONFIG_STRING] = "string",   [CONFIG_UINT] = "number",        [CONFIG_DURATION] = "duration",
        [CONFIG_BOOL] = "boolean",    [CONFIG_LOGLEVEL] = "log level",
    };
    if (i >= KEY_COUNT)
        return -1;
    const struct config_key *k = &config_keys[i];
    memset(out, 0, sizeof *out);
    out->section = k->section;
    out->name = k->name;
    out->type = type_names[k->type];
    out->default_text = k->default_text;
    out->help = k->help;
    out->reloadable = k->reloadable;
    out->secret = k->secret;
    if (k->type == CONFIG_STRING) {
        snprintf(out->min, sizeof out->min, "%u", k->min);
        snprintf(out->max, sizeof out->max, "%u", k->max);
    } else if (k->type == CONFIG_UINT || k->type == CONFIG_DURATION) {
        format_number(k, k->min, out->min, sizeof out->min);
        format_number(k, k->max, out->max, sizeof out->max);
    }
    return 0;
}

/* --- addresses ----------------------------------------------------------- */

#define UNIX_PREFIX "unix:"

int config_parse_address(const char *text, struct config_address *out, char *err, size_t errlen)
{
    struct config_address a;
    memset(&a, 0, sizeof a);

    if (strncmp(text, UNIX_PREFIX, strlen(UNIX_PREFIX)) == 0) {
        const char *path = text + strlen(UNIX_PREFIX);
        if (path[0] != '/') {
            snprintf(err, errlen, "unix socket path must be absolute (unix:/path)");
            return -1;
        }
        size_t n = strlen(path);
        if (n >= sizeof a.path) {
            snprintf(err, errlen, "unix socket path too long (%zu bytes, at most %zu)", n,
                     sizeof a.path - 1);
            return -1;
        }
        a.is_unix = 1;
        memcpy(a.path, path, n + 1);
        *out = a;
        return 0;
    }

    const char *colon = strrchr(text, ':');
    if (colon == NULL) {
        snprintf(err, errlen, "expected HOST:PORT, [IPV6]:PORT or unix:/path");
        return -1;
    }
    const char *host = text;
    size_t host_len = (size_t)(colon - text);
    int family = AF_INET;
    if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
        host++;
        host_len -= 2;
        family = AF_INET6;
    } else if (memchr(host, ':', host_len) != NULL) {
        snprintf(err, errlen, "IPv6 addresses go in brackets: [ADDRESS]:PORT");
        return -1;
    }
    if (host_len == 0 || host_len >= sizeof a.host) {
        snprintf(err, errlen, "missing or over-long host");
        return -1;
    }
    memcpy(a.host, host, host_len);
    a.host[host_len] = '\0';
    unsigned char bin[sizeof(struct in6_addr)];
    if (inet_pton(family, a.host, bin) != 1) {
        snprintf(err, errlen, "\"%s\" is not a numeric %s address (names are not resolved)", a.host,
                 family == AF_INET ? "IPv4" : "IPv6");
        return -1;
    }
    uint64_t port = 0;
    if (parse_uint(colon + 1, &port) < 0 || port > 65535) {
        snprintf(err, errlen, "\"%s\" is not a port number (0 to 65535)", colon + 1);
        return -1;
    }
    a.port = (uint16_t)port;
    *out = a;
    return 0;
}

int config_parse_listen(const char *text, struct config_address *out, size_t max, char *err,
                        size_t errlen)
{
    size_t count = 0;
    const char *p = text;
    for (;;) {
        const char *end = strchr(p, ',');
        if (end == NULL)
            end = p + strlen(p);
        while (p < end && isblank((unsigned char)*p))
            p++;
        const char *stop = end;
        while (stop > p && isblank((unsigned char)stop[-1]))
            stop--;
        size_t n = (size_t)(stop - p);
        char entry[256];
        char why[192];
        if (n == 0) {
            snprintf(err, errlen, "entry %zu is empty", count + 1);
            return -1;
        }
        if (count == max) {
            snprintf(err, errlen, "more than %zu addresses", max);
            return -1;
        }
        if (n >= sizeof entry) {
            snprintf(err, errlen, "entry %zu is too long (%zu bytes)", count + 1, n);
            return -1;
        }
        memcpy(entry, p, n);
        entry[n] = '\0';
        if (config_parse_address(entry, &out[count], why, sizeof why) < 0) {
            /* An address fits in 64 bytes; a longer entry is quoted by its start. */
            snprintf(err, errlen, "entry %zu (%.64s): %s", count + 1, entry, why);
            return -1;
        }
        count++;
        if (*end == '\0')
            return (int)count;
        p = end + 1;
    }
}

/* --- cross-field checks -------------------------------------------------- */

/*
 * Where problems are reported: origin is the file name (or another label),
 * lines[] the line each key was set on (0 = not in the file) and refused[]
 * whether its value was rejected; both NULL outside config_load.
 */
struct config_report {
    const char *origin;
    const int *lines;
    const unsigned char *refused;
    FILE *err;
    int errors;
};

static int key_line(const struct config_report *r, size_t index)
{
    return r->lines == NULL ? 0 : r->lines[index];
}

static int key_refused(const struct config_report *r, size_t index)
{
    return r->refused != NULL && r->refused[index];
}

static void report(struct config_report *r, int line, const struct config_key *k, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));

static void report(struct config_report *r, int line, const struct config_key *k, const char *fmt,
                   ...)
{
    r->errors++;
    if (r->err == NULL)
        return;
    if (line > 0)
        fprintf(r->err, "%s:%d: ", r->origin, line);
    else
        fprintf(r->err, "%s: ", r->origin);
    if (k != NULL)
        fprintf(r->err, "%s.%s: ", k->section, k->name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->err, fmt, ap);
    va_end(ap);
    fputc('\n', r->err);
}

/* Pairs of keys whose values must satisfy lo <= hi. */
static const struct {
    enum config_key_index lo, hi;
} config_order[] = {
    {KEY_session_min_timeout_ms, KEY_session_timeout_ms},
    {KEY_session_timeout_ms, KEY_session_max_timeout_ms},
    {KEY_min_ttl_ms, KEY_default_ttl_ms},
    {KEY_default_ttl_ms, KEY_max_ttl_ms},
    {KEY_reconnect_min_ms, KEY_reconnect_max_ms},
    {KEY_lock_delay_ms, KEY_max_lock_delay_ms},
};

/*
 * Report a broken pair at the key set later in the file (the one that made
 * the conflict), naming the other key and its value.
 */
static void check_order(struct config_report *r, const struct config *c, size_t lo, size_t hi)
{
    const struct config_key *klo = &config_keys[lo], *khi = &config_keys[hi];
    uint32_t vlo = FIELD_VAL(c, klo, uint32_t), vhi = FIELD_VAL(c, khi, uint32_t);
    if (vlo <= vhi || key_refused(r, lo) || key_refused(r, hi))
        return;
    char tlo[NUM_TEXT], thi[NUM_TEXT];
    format_number(klo, vlo, tlo, sizeof tlo);
    format_number(khi, vhi, thi, sizeof thi);
    if (key_line(r, lo) >= key_line(r, hi))
        report(r, key_line(r, lo), klo, "%s is more than %s.%s (%s)", tlo, khi->section,
               khi->name, thi);
    else
        report(r, key_line(r, hi), khi, "%s is less than %s.%s (%s)", thi, klo->section,
               klo->name, tlo);
}

/*
 * A renew is sent a third of a lease after the last one; if it can take
 * longer than that to time out, one slow command can cost a lock.
 */
static void check_command_timeout(struct config_report *r, const struct config *c)
{
    if (key_refused(r, KEY_command_timeout_ms) || key_refused(r, KEY_min_ttl_ms) ||
        (uint64_t)c->command_timeout_ms * 3 <= c->min_ttl_ms)
        return;
    size_t at = key_line(r, KEY_command_timeout_ms) >= key_line(r, KEY_min_ttl_ms)
                    ? KEY_command_timeout_ms
                    : KEY_min_ttl_ms;
    char tc[NUM_TEXT], tm[NUM_TEXT];
    format_number(&config_keys[KEY_command_timeout_ms], c->command_timeout_ms, tc, sizeof tc);
    format_number(&config_keys[KEY_min_ttl_ms], c->min_ttl_ms, tm, sizeof tm);
    report(r, key_line(r, at), &config_keys[at],
           "redis.command_timeout (%s) must be at most a third of limits.min_ttl (%s), so "
           "that a renew can time out and be retried within the shortest lease",
           tc, tm);
}

/* A grant's WAIT holds its connection: the call deadline grows by replica_ack_timeout. */
static void check_replica_ack(struct config_report *r, const struct config *c)
{
    if (c->min_replicas_acked == 0 || key_refused(r, KEY_replica_ack_timeout_ms) ||
        key_refused(r, KEY_command_timeout_ms) || key_refused(r, KEY_min_ttl_ms) ||
        (uint64_t)(c->command_timeout_ms + c->replica_ack_timeout_ms) * 3 <= c->min_ttl_ms ||
        (uint64_t)c->command_timeout_ms * 3 > c->min_ttl_ms)
        return;
    char tm[NUM_TEXT];
    format_number(&config_keys[KEY_min_ttl_ms], c->min_ttl_ms, tm, sizeof tm);
    report(r, key_line(r, KEY_replica_ack_timeout_ms), &config_keys[KEY_replica_ack_timeout_ms],
           "redis.command_timeout + redis.replica_ack_timeout must be at most a third of "
           "limits.min_ttl (%s) when redis.min_replicas_acked is set: a grant's WAIT holds "
           "the calls behind it, renewals included",
           tm);
}

static void check_addresses(struct config_report *r, const struct config *c)
{
    struct config_address addrs[CONFIG_MAX_LISTEN], m;
    char why[320];
    int nlisten = -1;
    if (!key_refused(r, KEY_listen) &&
        (nlisten = config_parse_listen(c->listen, addrs, CONFIG_MAX_LISTEN, why, sizeof why)) < 0)
        report(r, key_line(r, KEY_listen), &config_keys[KEY_listen], "%s", why);
    if (!key_refused(r, KEY_metrics_listen) && c->metrics_listen[0] != '\0') {
        const struct config_key *mk = &config_keys[KEY_metrics_listen];
        if (config_parse_address(c->metrics_listen, &m, why, sizeof why) < 0)
            report(r, key_line(r, KEY_metrics_listen), mk, "%s", why);
        for (int i = 0; i < nlisten; i++)
            if (m.is_unix == addrs[i].is_unix &&
                (m.is_unix ? strcmp(m.path, addrs[i].path) == 0
                           : strcmp(m.host, addrs[i].host) == 0 && m.port == addrs[i].port &&
                                 m.port != 0))
                report(r, key_line(r, KEY_metrics_listen), mk,
                       "the same address as server.listen");
    }

    const struct config_key *k = &config_keys[KEY_redis_address];
    int line = key_line(r, KEY_redis_address);
    if (key_refused(r, KEY_redis_address))
        return;
    if (strchr(c->redis_address, ',') != NULL)
        report(r, line, k, "exactly one address is allowed");
    else if (config_parse_address(c->redis_address, addrs, why, sizeof why) < 0)
        report(r, line, k, "%s", why);
    else if (!addrs[0].is_unix && addrs[0].port == 0)
        report(r, line, k, "port 0 is not allowed here");
}

/* A list of Redis nodes (sentinels, cluster seeds): numeric addresses, real ports. */
static void check_node_list(struct config_report *r, size_t key, const char *text)
{
    struct config_address nodes[CONFIG_MAX_REDIS_NODES];
    char why[320];
    if (key_refused(r, key) || text[0] == '\0')
        return;
    int n = config_parse_listen(text, nodes, CONFIG_MAX_REDIS_NODES, why, sizeof why);
    if (n < 0) {
        report(r, key_line(r, key), &config_keys[key], "%s", why);
        return;
    }
    for (int i = 0; i < n; i++)
        if (!nodes[i].is_unix && nodes[i].port == 0)
            report(r, key_line(r, key), &config_keys[key], "entry %d: port 0 is not allowed here",
                   i + 1);
}

/*
 * One topology: redis.address (given in the file), redis.sentinels or
 * redis.cluster_nodes, never two; master_name goes with sentinels only;
 * a cluster has only database 0.
 */
static void check_topology(struct config_report *r, const struct config *c)
{
    check_node_list(r, KEY_redis_sentinels, c->redis_sentinels);
    check_node_list(r, KEY_redis_cluster_nodes, c->redis_cluster_nodes);
    int has_address = key_line(r, KEY_redis_address) > 0;
    int has_sentinels = c->redis_sentinels[0] != '\0';
    int has_cluster = c->redis_cluster_nodes[0] != '\0';
    if (has_address + has_sentinels + has_cluster > 1) {
        size_t at = has_cluster ? KEY_redis_cluster_nodes : KEY_redis_sentinels;
        report(r, key_line(r, at), &config_keys[at],
               "choose one of redis.address, redis.sentinels (with redis.master_name) and "
               "redis.cluster_nodes");
    }
    if (has_sentinels && c->redis_master_name[0] == '\0')
        report(r, key_line(r, KEY_redis_sentinels), &config_keys[KEY_redis_sentinels],
               "redis.sentinels needs redis.master_name");
    if (!has_sentinels && c->redis_master_name[0] != '\0')
        report(r, key_line(r, KEY_redis_master_name), &config_keys[KEY_redis_master_name],
               "redis.master_name is only used with redis.sentinels");
    if (has_cluster && c->redis_database != 0)
        report(r, key_line(r, KEY_redis_database), &config_keys[KEY_redis_database],
               "a Redis Cluster has only database 0");
}

/* [tls]: what a TLS listener needs; the names of client_certs and min_version. */
static void check_tls(struct config_report *r, const struct config *c)
{
    struct config_address addrs[CONFIG_MAX_LISTEN];
    char why[320];
    if (strcmp(c->tls_client_certs, "none") != 0 && strcmp(c->tls_client_certs, "optional") != 0 &&
        strcmp(c->tls_client_certs, "required") != 0)
        report(r, key_line(r, KEY_tls_client_certs), &config_keys[KEY_tls_client_certs],
               "\"%s\" is none of none, optional and required", c->tls_client_certs);
    if (strcmp(c->tls_min_version, "1.2") != 0 && strcmp(c->tls_min_version, "1.3") != 0)
        report(r, key_line(r, KEY_tls_min_version), &config_keys[KEY_tls_min_version],
               "\"%s\" is neither 1.2 nor 1.3", c->tls_min_version);
    if (key_refused(r, KEY_tls_listen) || c->tls_listen[0] == '\0')
        return;
    if (config_parse_listen(c->tls_listen, addrs, CONFIG_MAX_LISTEN, why, sizeof why) < 0)
        report(r, key_line(r, KEY_tls_listen), &config_keys[KEY_tls_listen], "%s", why);
    char cred[4200];
    if (c->tls_cert_file[0] == '\0' ||
        (c->tls_key_file[0] == '\0' && !secretfile_credential("tls-key", cred, sizeof cred)))
        report(r, key_line(r, KEY_tls_listen), &config_keys[KEY_tls_listen],
               "tls.listen needs tls.cert_file and tls.key_file (or the systemd credential "
               "tls-key)");
    if (strcmp(c->tls_client_certs, "none") != 0 && c->tls_ca_file[0] == '\0')
        report(r, key_line(r, KEY_tls_client_certs), &config_keys[KEY_tls_client_certs],
               "client certificates need tls.ca_file to verify them");
}

/* server.shutdown names one of the two ways to stop. */
static void check_shutdown(struct config_report *r, const struct config *c)
{
    if (strcmp(c->shutdown_mode, "handover") != 0 && strcmp(c->shutdown_mode, "release") != 0)
        report(r, key_line(r, KEY_shutdown_mode), &config_keys[KEY_shutdown_mode],
               "\"%s\" is neither handover nor release", c->shutdown_mode);
}

const char *config_exposed_advice(const struct config *c, const char *path)
{
    static char buf[1400];
    snprintf(buf, sizeof buf,
             "%s holds %s and other users can read it: chmod o-r it, or move the secrets to "
             "auth.token_file, redis.password_file or systemd credentials (docs/operations.md, "
             "\"Securing rlockd\")",
             path, c->exposed);
    return buf;
}

int config_handover(const struct config *c)
{
    return strcmp(c->shutdown_mode, "handover") == 0;
}

enum config_topology config_topology(const struct config *c)
{
    if (c->redis_sentinels[0] != '\0')
        return TOPOLOGY_SENTINEL;
    if (c->redis_cluster_nodes[0] != '\0')
        return TOPOLOGY_CLUSTER;
    return TOPOLOGY_SINGLE;
}

const char *config_topology_name(enum config_topology t)
{
    static const char *const names[] = {"single", "sentinel", "cluster"};
    return names[t];
}

static int validate(struct config_report *r, const struct config *c)
{
    int before = r->errors;
    for (size_t i = 0; i < sizeof config_order / sizeof config_order[0]; i++)
        check_order(r, c, config_order[i].lo, config_order[i].hi);
    check_command_timeout(r, c);
    check_replica_ack(r, c);
    check_addresses(r, c);
    check_topology(r, c);
    check_shutdown(r, c);
    check_tls(r, c);
    return r->errors == before ? 0 : -1;
}

/*
 * Read the [auth] tokens into c->auth (left NULL when there are none): the
 * inline ones, then those of token_file, or with none named, those of the
 * systemd credential "tokens" (secretfile.h). Problems name the entry or the
 * file's line, never the token.
 */
static void load_tokens(struct config_report *r, struct config *c)
{
    char why[320];
    if (c->auth_inline[0] != '\0' && !key_refused(r, KEY_auth_inline) &&
        auth_tokens_parse(&c->auth, c->auth_inline, strlen(c->auth_inline), 1, why,
                          sizeof why) < 0)
        report(r, key_line(r, KEY_auth_inline), &config_keys[KEY_auth_inline], "%s", why);
    if (key_refused(r, KEY_auth_token_file))
        return;
    char cred[4200];
    const char *path = c->auth_token_file;
    if (path[0] == '\0' && secretfile_credential("tokens", cred, sizeof cred)) {
        path = cred;
        c->tokens_from_credential = 1;
    }
    if (path[0] == '\0')
        return;
    size_t before = c->auth != NULL ? c->auth->n : 0;
    if (auth_tokens_load_file(&c->auth, path, why, sizeof why) < 0)
        report(r, key_line(r, KEY_auth_token_file), &config_keys[KEY_auth_token_file],
               "%s: %s", path, why);
    else if ((c->auth != NULL ? c->auth->n : 0) == before)
        report(r, key_line(r, KEY_auth_token_file), &config_keys[KEY_auth_token_file],
               "%s: no token in the file", path);
}

/*
 * redis.password from redis.password_file, or with neither key set, from the
 * systemd credential "redis-password": the file's text without one final
 * newline, on one line.
 */
static void load_password(struct config_report *r, struct config *c)
{
    if (key_refused(r, KEY_redis_password_file) || key_refused(r, KEY_redis_password))
        return;
    const struct config_key *k = &config_keys[KEY_redis_password_file];
    int line = key_line(r, KEY_redis_password_file);
    char cred[4200];
    const char *path = c->redis_password_file;
    if (path[0] != '\0' && c->redis_password[0] != '\0') {
        report(r, line, k, "give redis.password or redis.password_file, not both");
        return;
    }
    if (path[0] == '\0' && c->redis_password[0] == '\0' &&
        secretfile_credential("redis-password", cred, sizeof cred)) {
        path = cred;
        c->password_from_credential = 1;
    }
    if (path[0] == '\0')
        return;
    char why[256], *text;
    size_t len;
    if (secretfile_read(path, 1026, &text, &len, why, sizeof why) != 0) {
        report(r, line, k, "%s: %s", path, why);
        return;
    }
    size_t n = len;
    if (n > 0 && text[n - 1] == '\n')
        n--;
    if (n > 0 && text[n - 1] == '\r')
        n--;
    if (n == 0 || n > 1024 || memchr(text, '\n', n) != NULL || memchr(text, '\r', n) != NULL ||
        memchr(text, '\0', n) != NULL) {
        report(r, line, k, "%s: %s", path,
               n == 0 ? "empty" : n > 1024 ? "longer than 1024 bytes"
                                           : "more than one line, or a NUL byte");
    } else {
        char *pw = strndup(text, n);
        if (pw == NULL) {
            report(r, line, k, "out of memory");
        } else {
            free(c->redis_password);
            c->redis_password = pw;
        }
    }
    secretfile_free(text, len);
}

/* The secret keys set in the file itself (f) when other users can read it, into c->exposed. */
static void note_exposed(FILE *f, struct config *c)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || (st.st_mode & S_IROTH) == 0)
        return;
    const char *names[] = {c->auth_inline[0] ? "auth.tokens" : NULL,
                           c->redis_password[0] ? "redis.password" : NULL,
                           c->sentinel_password[0] ? "redis.sentinel_password" : NULL};
    size_t at = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (names[i] == NULL)
            continue;
        int n = snprintf(c->exposed + at, sizeof c->exposed - at, "%s%s", at ? ", " : "",
                         names[i]);
        if (n > 0 && (size_t)n < sizeof c->exposed - at)
            at += (size_t)n;
    }
}

int config_validate(const struct config *c, const char *origin, FILE *err)
{
    struct config_report r = {origin, NULL, NULL, err, 0};
    return validate(&r, c);
}

/* --- reading a file ------------------------------------------------------ */

struct config_loader {
    struct config_report report;
    struct config *c;
    FILE *f;
    char *buf; /* getline buffer */
    size_t cap;
    int lineno;       /* line last handed to inih */
    int section_line; /* line of the current [section] header */
    int section_reported;
    int lines[KEY_COUNT];
    unsigned char refused[KEY_COUNT];
};

static int section_known(const char *name)
{
    for (size_t i = 0; i < KEY_COUNT; i++)
        if (strcmp(config_keys[i].section, name) == 0)
            return 1;
    return 0;
}

/* "[name]" (the name is what inih will pass to the handler) or "[name" (a syntax error). */
static int check_section_header(struct config_loader *l, const char *line)
{
    const char *close = strchr(line, ']');
    l->section_line = l->lineno;
    l->section_reported = 0;
    if (close == NULL)
        return -1;
    char name[64];
    size_t n = (size_t)(close - line - 1);
    if (n >= sizeof name)
        n = sizeof name - 1;
    memcpy(name, line + 1, n);
    name[n] = '\0';
    if (!section_known(name)) {
        report(&l->report, l->lineno, NULL, "unknown section [%s]", name);
        l->section_reported = 1;
    }
    return 0;
}

/*
 * inih's ini_reader: hand over the next physical line with leading blanks
 * removed, or an empty line in place of one we have already reported.
 */
static char *loader_read(char *str, int num, void *stream)
{
    struct config_loader *l = stream;
    if (num < 4)
        return NULL;
    errno = 0;
    ssize_t got = getline(&l->buf, &l->cap, l->f);
    if (got < 0) {
        if (ferror(l->f))
            report(&l->report, 0, NULL, "cannot read: %s", strerror(errno));
        return NULL;
    }
    l->lineno++;
    size_t n = (size_t)got;
    while (n > 0 && (l->buf[n - 1] == '\n' || l->buf[n - 1] == '\r'))
        n--;
    l->buf[n] = '\0';
    const char *line = l->buf;
    if (l->lineno == 1 && strncmp(line, "\xef\xbb\xbf", 3) == 0)
        line += 3;
    while (isblank((unsigned char)*line))
        line++;
    size_t len = strlen(line);
    size_t max = CONFIG_MAX_LINE;
    if ((size_t)num - 3 < max)
        max = (size_t)num - 3;

    int bad = 1;
    if (len != n - (size_t)(line - l->buf))
        report(&l->report, l->lineno, NULL, "line contains a NUL byte");
    else if (n > max)
        report(&l->report, l->lineno, NULL, "line too long (%zu characters, at most %zu)", n, max);
    else if (line[0] == '[' && check_section_header(l, line) < 0)
        report(&l->report, l->lineno, NULL, "syntax error: section header without ']'");
    else if (line[0] != '\0' && line[0] != '#' && line[0] != ';' && line[0] != '[' &&
             strpbrk(line, "=:") == NULL)
        report(&l->report, l->lineno, NULL, "syntax error: expected KEY = VALUE");
    else
        bad = 0;
    if (bad)
        line = "";
    snprintf(str, (size_t)num, "%s\n", line);
    return str;
}

static const struct config_key *find_key(const char *section, const char *name, size_t *index)
{
    for (size_t i = 0; i < KEY_COUNT; i++) {
        if (strcmp(config_keys[i].section, section) == 0 &&
            strcmp(config_keys[i].name, name) == 0) {
            *index = i;
            return &config_keys[i];
        }
    }
    return NULL;
}

/* inih's handler: called for each KEY = VALUE, on the line l->lineno. */
static int loader_handle(void *user, const char *section, const char *name, const char *value)
{
    struct config_loader *l = user;
    struct config_report *r = &l->report;
    size_t i = 0;
    const struct config_key *k = find_key(section, name, &i);
    if (k == NULL) {
        if (section[0] == '\0') {
            report(r, l->lineno, NULL, "%s: key before any [section]", name);
        } else if (!section_known(section)) {
            if (!l->section_reported)
                report(r, l->section_line, NULL, "unknown section [%s]", section);
            l->section_reported = 1;
        } else {
            report(r, l->lineno, NULL, "%s.%s: unknown key", section, name);
        }
        return 1;
    }
    if (l->lines[i] != 0) {
        report(r, l->lineno, k, "duplicate key (first set on line %d)", l->lines[i]);
        return 1;
    }
    l->lines[i] = l->lineno;
    char msg[320];
    if (config_set(l->c, k, value, msg, sizeof msg) < 0) {
        l->refused[i] = 1;
        report(r, l->lineno, k, "%s", msg);
    }
    return 1;
}

struct config *config_load(const char *path, FILE *err)
{
    struct config *result = NULL;
    struct config_loader l;
    memset(&l, 0, sizeof l);
    l.report.origin = path;
    l.report.err = err;
    l.report.lines = l.lines;
    l.report.refused = l.refused;

    l.c = config_defaults();
    if (l.c == NULL) {
        report(&l.report, 0, NULL, "out of memory");
        goto done;
    }
    l.f = fopen(path, "r");
    if (l.f == NULL) {
        report(&l.report, 0, NULL, "cannot open: %s", strerror(errno));
        goto done;
    }
    int rc = ini_parse_stream(loader_read, &l, loader_handle, &l);
    if (rc > 0)
        report(&l.report, rc, NULL, "syntax error");
    else if (rc < 0)
        report(&l.report, 0, NULL, "cannot parse (error %d)", rc);
    validate(&l.report, l.c);
    note_exposed(l.f, l.c); /* before the password file fills redis.password */
    load_tokens(&l.report, l.c);
    load_password(&l.report, l.c);
    if (l.report.errors == 0) {
        result = l.c;
        l.c = NULL;
    }

done:
    free(l.buf);
    if (l.f != NULL)
        fclose(l.f);
    config_free(l.c);
    return result;
}

/* --- printing ------------------------------------------------------------ */

static const char config_header[] =
    "# rlockd.conf: configuration of rlockd, the distributed lock daemon (INI).\n"
    "#\n"
    "# Every key is listed with its meaning, and numbers and durations with\n"
    "# their range. A key that is left out keeps its built-in default;\n"
    "# `rlockd --dump-config` prints them all.\n"
    "# Unknown sections or keys, bad values and out-of-range numbers are errors\n"
    "# naming the file and line; check a file with `rlockd --test-config -c FILE`.\n"
    "#\n"
    "# Durations take a unit: ms, s, m or h (500ms, 10s, 1.5m, 1h); a bare\n"
    "# number means seconds. Lines starting with # or ; are comments. A line may\n"
    "# be at most 197 characters long.\n";

/* The value of key k in c as the file would write it (text may be used as the buffer). */
static const char *value_text(const struct config *c, const struct config_key *k, char *text,
                              size_t len)
{
    switch (k->type) {
    case CONFIG_STRING:
        return FIELD_VAL(c, k, char *);
    case CONFIG_UINT:
    case CONFIG_DURATION:
        format_number(k, FIELD_VAL(c, k, uint32_t), text, len);
        return text;
    case CONFIG_BOOL:
        return FIELD_VAL(c, k, int) ? "yes" : "no";
    case CONFIG_LOGLEVEL:
        return log_level_name(FIELD_VAL(c, k, int));
    }
    return "";
}

struct config *config_reload_merge(const struct config *old, const struct config *new,
                                   void (*tell)(void *arg, const char *line,
                                                enum config_change kind),
                                   void *arg)
{
    struct config *c = config_defaults();
    if (c == NULL)
        return NULL;
    char msg[512];
    for (size_t i = 0; i < KEY_COUNT; i++) {
        const struct config_key *k = &config_keys[i];
        char a[NUM_TEXT], b[NUM_TEXT], m[256];
        const char *was = value_text(old, k, a, sizeof a);
        const char *now = value_text(new, k, b, sizeof b);
        int changed = strcmp(was, now) != 0;
        const char *take = changed && k->reloadable ? now : was;
        if (changed) {
            if (k->secret)
                snprintf(msg, sizeof msg, "%s.%s changed%s", k->section, k->name,
                         k->reloadable ? "" : ": needs a restart; the running value stays");
            else
                snprintf(msg, sizeof msg, "%s.%s: %s -> %s%s", k->section, k->name,
                         was[0] ? was : "(empty)", now[0] ? now : "(empty)",
                         k->reloadable ? "" : ": needs a restart; the running value stays");
            tell(arg, msg, k->reloadable ? CONFIG_CHANGE_APPLIED : CONFIG_CHANGE_RESTART);
        }
        if (config_set(c, k, take, m, sizeof m) < 0) { /* the text came from a valid config */
            config_free(c);
            return NULL;
        }
    }
    /* Reloadable keys taken from one file and others kept from another must still agree. */
    char *buf = NULL;
    size_t blen = 0;
    FILE *errs = open_memstream(&buf, &blen);
    int ok = errs != NULL && config_validate(c, "reload", errs) == 0;
    if (errs != NULL)
        fclose(errs);
    if (!ok) {
        char *save = NULL;
        const char *line = buf != NULL ? strtok_r(buf, "\n", &save) : NULL;
        if (line == NULL)
            tell(arg, "the merged configuration is not valid", CONFIG_CHANGE_REFUSED);
        for (; line != NULL; line = strtok_r(NULL, "\n", &save))
            tell(arg, line, CONFIG_CHANGE_REFUSED);
        free(buf);
        config_free(c);
        return NULL;
    }
    free(buf);
    return c;
}

void config_dump(const struct config *c, FILE *out, int show_secrets)
{
    fputs(config_header, out);
    const char *section = "";
    for (size_t i = 0; i < KEY_COUNT; i++) {
        const struct config_key *k = &config_keys[i];
        if (strcmp(section, k->section) != 0) {
            section = k->section;
            fprintf(out, "\n[%s]\n", section);
        } else {
            fputc('\n', out);
        }
        fprintf(out, "# %s\n", k->help);
        char lo[NUM_TEXT], hi[NUM_TEXT], text[NUM_TEXT];
        if (k->type == CONFIG_UINT || k->type == CONFIG_DURATION) {
            format_number(k, k->min, lo, sizeof lo);
            format_number(k, k->max, hi, sizeof hi);
            fprintf(out, "# range: %s to %s\n", lo, hi);
        }
        const char *value = value_text(c, k, text, sizeof text);
        if (k->type == CONFIG_STRING && k->secret && !show_secrets && value[0] != '\0')
            value = "<hidden>";
        /*
         * The dump must load back as the same config. Read back, "key = ;x"
         * is an empty value and a comment, and a value that filled its line
         * as "key=value" would make "key = value" too long: those are
         * written without the blanks.
         */
        if (value[0] == '\0')
            fprintf(out, "%s =\n", k->name);
        else if (value[0] == ';' ||
                 strlen(k->name) + strlen(" = ") + strlen(value) > CONFIG_MAX_LINE)
            fprintf(out, "%s=%s\n", k->name, value);
        else
            fprintf(out, "%s = %s\n", k->name, value);
    }
}
