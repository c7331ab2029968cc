/* SPDX-License-Identifier: BSD-3-Clause */
/* rlockctl_out.c — see rlockctl_out.h. */
#include "rlockctl_out.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- JSON ----------------------------------------------------------------- */

void ctl_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

void ctl_json_open(struct ctl_json *j)
{
    j->members = 0;
    putchar('{');
}

void ctl_json_close(struct ctl_json *j)
{
    (void)j;
    putchar('}');
}

void ctl_json_key(struct ctl_json *j, const char *key)
{
    if (j->members++ > 0)
        fputs(", ", stdout);
    ctl_json_string(key);
    fputs(": ", stdout);
}

void ctl_json_num(struct ctl_json *j, const char *key, uint64_t v)
{
    ctl_json_key(j, key);
    printf("%" PRIu64, v);
}

void ctl_json_str(struct ctl_json *j, const char *key, const char *v)
{
    ctl_json_key(j, key);
    ctl_json_string(v);
}

void ctl_json_bool(struct ctl_json *j, const char *key, int v)
{
    ctl_json_key(j, key);
    fputs(v ? "true" : "false", stdout);
}

void ctl_print_fields(const struct ctl_field *f, size_t n, int json)
{
    int width = 0;
    for (size_t i = 0; i < n; i++) {
        int w = (int)strlen(f[i].name);
        width = w > width ? w : width;
    }
    if (json)
        printf("{\n");
    for (size_t i = 0; i < n; i++) {
        const struct ctl_field *r = &f[i];
        if (json)
            printf("  \"%s\": ", r->name);
        else
            printf("%-*s  ", width, r->name);
        if (r->kind == CTL_FIELD_NUM)
            printf("%" PRIu64, r->num);
        else if (r->kind == CTL_FIELD_BOOL)
            printf("%s", json ? (r->num ? "true" : "false") : (r->num ? "yes" : "no"));
        else if (json)
            ctl_json_string(r->str);
        else
            printf("%s", r->str);
        printf("%s\n", json && i + 1 < n ? "," : "");
    }
    if (json)
        printf("}\n");
}

/* --- tables ---------------------------------------------------------------- */

struct ctl_table {
    size_t ncols;
    const char *const *headers;
    const int *right;
    size_t *width;
    char **held;  /* rows held back, ncols cells each */
    size_t nheld;
    int printed;  /* the header is out: widths are fixed */
};

struct ctl_table *ctl_table_new(size_t ncols, const char *const *headers, const int *right)
{
    if (ncols == 0 || ncols > CTL_TABLE_MAX_COLS)
        return NULL;
    struct ctl_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ncols = ncols;
    t->headers = headers;
    t->right = right;
    t->width = calloc(ncols, sizeof *t->width);
    t->held = calloc(CTL_TABLE_HOLD * ncols, sizeof *t->held);
    if (t->width == NULL || t->held == NULL) {
        free(t->width);
        free(t->held);
        free(t);
        return NULL;
    }
    for (size_t i = 0; i < ncols; i++)
        t->width[i] = strlen(headers[i]);
    return t;
}

static void print_row(const struct ctl_table *t, const char *const *cells)
{
    for (size_t i = 0; i < t->ncols; i++) {
        int w = (int)t->width[i];
        const char *sep = i + 1 < t->ncols ? "  " : "\n";
        if (t->right[i])
            printf("%*s%s", w, cells[i], sep);
        else if (i + 1 < t->ncols)
            printf("%-*s%s", w, cells[i], sep);
        else
            printf("%s%s", cells[i], sep); /* no trailing blanks */
    }
}

/* Print the header and the rows held back; the widths are fixed from now on. */
static void table_flush(struct ctl_table *t)
{
    if (!t->printed)
        print_row(t, t->headers);
    t->printed = 1;
    for (size_t r = 0; r < t->nheld; r++) {
        char **cells = t->held + r * t->ncols;
        print_row(t, (const char *const *)cells);
        for (size_t i = 0; i < t->ncols; i++)
            free(cells[i]);
    }
    t->nheld = 0;
}

/* 1 for the code points that change how a line looks without being controls: bidi
 * embeddings, overrides and isolates, zero-width characters, line and paragraph separators,
 * and the C1 controls. */
static int looks_deceptive(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff;
}

/* The length of the UTF-8 sequence at p (its code point in *cp), or 0 when it is not one. */
static size_t utf8_at(const unsigned char *p, uint32_t *cp)
{
    size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (n == 0 || p[0] >= 0xf5)
        return 0;
    uint32_t v = p[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3f);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < least[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

/*
 * A copy of s safe to show on a terminal: controls and bytes that are not UTF-8 as \xNN,
 * deceptive code points as \u{XXXX} (a client's name could otherwise reverse or hide what
 * follows it on the line). NULL when out of memory.
 */
static char *safe_dup(const char *s)
{
    size_t len = strlen(s);
    char *out = malloc(len * 4 + 1), *o = out; /* \xNN is the longest per byte */
    if (out == NULL)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t cp = 0;
        size_t n = *p >= 0x80 ? utf8_at(p, &cp) : 1;
        if (*p < 0x20 || *p == 0x7f || n == 0) {
            o += sprintf(o, "\\x%02x", *p);
            p++;
        } else if (n > 1 && looks_deceptive(cp)) {
            o += sprintf(o, "\\u{%04x}", (unsigned)cp); /* at most 8 bytes for 2 or more */
            p += n;
        } else {
            memcpy(o, p, n);
            o += n;
            p += n;
        }
    }
    *o = '\0';
    return out;
}

int ctl_table_row(struct ctl_table *t, const char *const *raw)
{
    char *safe[CTL_TABLE_MAX_COLS] = {0};
    size_t ncols = t->ncols; /* at most CTL_TABLE_MAX_COLS (ctl_table_new) */
    for (size_t i = 0; i < ncols; i++) {
        if ((safe[i] = safe_dup(raw[i])) == NULL) {
            while (i-- > 0)
                free(safe[i]);
            return -1;
        }
    }
    const char *const *cells = (const char *const *)safe;
    if (t->printed) {
        print_row(t, cells);
        for (size_t i = 0; i < ncols; i++)
            free(safe[i]);
        return 0;
    }
    char **row = t->held + t->nheld * t->ncols;
    for (size_t i = 0; i < t->ncols; i++) {
        row[i] = safe[i]; /* the table keeps them */
        size_t w = strlen(cells[i]);
        t->width[i] = w > t->width[i] ? w : t->width[i];
    }
    if (++t->nheld == CTL_TABLE_HOLD)
        table_flush(t);
    return 0;
}

void ctl_table_end(struct ctl_table *t)
{
    if (t == NULL)
        return;
    table_flush(t);
    ctl_table_free(t);
}

void ctl_table_free(struct ctl_table *t)
{
    if (t == NULL)
        return;
    for (size_t r = 0; r < t->nheld * t->ncols; r++)
        free(t->held[r]);
    free(t->width);
    free(t->held);
    free(t);
}

/* --- times ---------------------------------------------------------------- */

void ctl_fmt_time(uint64_t ms, char *buf, size_t len)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char when[32] = "?";
    if (gmtime_r(&secs, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03uZ", when, (unsigned)(ms % 1000));
}

void ctl_fmt_duration(uint64_t ms, char *buf, size_t len)
{
    uint64_t s = ms / 1000;
    if (ms < 1000)
        snprintf(buf, len, "%" PRIu64 "ms", ms);
    else if (s < 60)
        snprintf(buf, len, "%" PRIu64 ".%" PRIu64 "s", s, ms % 1000 / 100);
    else if (s < 3600)
        snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s % 3600 / 60);
    else
        snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s % 86400 / 3600);
}
