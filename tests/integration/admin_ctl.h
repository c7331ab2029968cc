/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * admin_ctl.h — the admin tests drive rlockctl as a real process and read
 * what it prints: its exit status, its stdout, and the JSON of
 * docs/rlockctl.md (a listing has one entry per line, "    {...}").
 */
#ifndef RLOCK_ITEST_ADMIN_CTL_H
#define RLOCK_ITEST_ADMIN_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/*
 * Run `rlockctl --server ADDR [--token-file token_file] ARGS...` (args ends
 * with NULL) against e and wait for it (at most 120 s, failing the test after
 * that). Its stdout goes to *out (malloc'd, NUL-terminated), its stderr to
 * DIR/rlockctl.err (appended; *err, if not NULL, gets what this run added).
 * Returns its exit status (128 + N if killed by signal N).
 */
int actl_run(struct h_env *e, const char *token_file, char **out, char **err, ...);
/* The same with the child started and its pid returned; finish with actl_finish. */
pid_t actl_start(struct h_env *e, const char *token_file, const char *const *args);
int actl_finish(struct h_env *e, pid_t pid, int timeout_ms, char **out, char **err);

/* The first entry line of a listing (its "    {"), or NULL; then the next after entry. */
const char *actl_first(const char *json);
const char *actl_next(const char *entry);
/* Entries of a listing. */
size_t actl_count(const char *json);
/* The string member key of the entry at line into buf: 1, or 0 when it has none. */
int actl_str(const char *line, const char *key, char *buf, size_t len);
/* The number member key of the entry at line: 1, or 0 when it has none. */
int actl_u64(const char *line, const char *key, uint64_t *v);
/* The value of a "name  value" line of a table of names (info, stats) into buf: 1 or 0. */
int actl_kv(const char *text, const char *name, char *buf, size_t len);

#endif
