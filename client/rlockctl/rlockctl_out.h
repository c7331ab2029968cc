/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl_out.h — how rlockctl prints: aligned tables and name/value lists
 * for people, JSON for scripts (docs/rlockctl.md gives the schemas), times
 * and durations. Everything goes to stdout.
 */
#ifndef RLOCKCTL_OUT_H
#define RLOCKCTL_OUT_H

#include <stddef.h>
#include <stdint.h>

/* s as a JSON string, quotes included. */
void ctl_json_string(const char *s);

/* One member after another of a JSON object printed on one line. */
struct ctl_json {
    int members; /* printed so far */
};
void ctl_json_open(struct ctl_json *j);  /* "{" */
void ctl_json_close(struct ctl_json *j); /* "}" */
void ctl_json_num(struct ctl_json *j, const char *key, uint64_t v);
void ctl_json_str(struct ctl_json *j, const char *key, const char *v);
void ctl_json_bool(struct ctl_json *j, const char *key, int v);
/* The key of a member whose value the caller prints itself (an object, an array, null). */
void ctl_json_key(struct ctl_json *j, const char *key);

/* A named value; lists of them print as "name  value" lines or as one JSON object. */
enum ctl_field_kind { CTL_FIELD_NUM, CTL_FIELD_BOOL, CTL_FIELD_STR };
struct ctl_field {
    const char *name;
    enum ctl_field_kind kind;
    uint64_t num;
    const char *str;
};
void ctl_print_fields(const struct ctl_field *f, size_t n, int json);

/*
 * A table for people: a header line, then rows with every column padded to
 * the widest cell (numbers aligned right). Rows are held back until
 * CTL_TABLE_HOLD of them (or the end) fix the widths; a later, wider cell
 * only shifts its own line. So a listing of any length prints in bounded
 * memory, and its first screen is aligned.
 */
#define CTL_TABLE_HOLD 1000
#define CTL_TABLE_MAX_COLS 16
struct ctl_table;
/* A table of ncols columns; right[i] aligns column i right. NULL when out of memory. */
struct ctl_table *ctl_table_new(size_t ncols, const char *const *headers, const int *right);
/* Add a row of ncols cells (copied; controls, bytes that are not UTF-8 and code points that
 * reorder or hide text shown escaped, as \xNN and \u{XXXX}). 0, or -1 when out of memory. */
int ctl_table_row(struct ctl_table *t, const char *const *cells);
/* Print what is held back (the header even with no row) and free t. */
void ctl_table_end(struct ctl_table *t);
/* Free the table without printing what it holds (nothing was listed: no header either). */
void ctl_table_free(struct ctl_table *t);

/* "2025-03-01T10:00:00.123Z" for ms since the epoch. */
void ctl_fmt_time(uint64_t ms, char *buf, size_t len);
/* A duration for people: "950ms", "12.3s", "5m03s", "2h05m", "3d04h". */
void ctl_fmt_duration(uint64_t ms, char *buf, size_t len);

#endif
