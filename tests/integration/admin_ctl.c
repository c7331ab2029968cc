/* SPDX-License-Identifier: BSD-3-Clause */
/* admin_ctl.c — see admin_ctl.h. */
#include "admin_ctl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ACTL_MAX_ARGS 24
#define ACTL_RUN_MS 120000

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

pid_t actl_start(struct h_env *e, const char *token_file, const char *const *args)
{
    char bin[512], out[320], err[320];
    h_bin("rlockctl", bin, sizeof bin);
    h_env_path(e, "rlockctl.out", out, sizeof out);
    h_env_path(e, "rlockctl.err", err, sizeof err);
    unlink(out);
    char *argv[ACTL_MAX_ARGS + 6];
    int n = 0;
    argv[n++] = bin;
    argv[n++] = "--server";
    argv[n++] = e->rlockd_addr;
    if (token_file != NULL) {
        argv[n++] = "--token-file";
        argv[n++] = (char *)token_file;
    }
    for (int i = 0; args[i] != NULL; i++) {
        ck_assert_int_lt(i, ACTL_MAX_ARGS);
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    pid_t pid = h_spawn_io(argv, out, err);
    ck_assert_int_gt(pid, 0);
    return pid;
}

int actl_finish(struct h_env *e, pid_t pid, int timeout_ms, char **out, char **err)
{
    char outp[320], errp[320];
    h_env_path(e, "rlockctl.out", outp, sizeof outp);
    h_env_path(e, "rlockctl.err", errp, sizeof errp);
    int status = 0;
    if (h_wait_exit(pid, timeout_ms, &status) != 0) {
        h_stop_pid(pid, SIGKILL, 1000, "rlockctl", NULL);
        ck_abort_msg("rlockctl still running after %d ms", timeout_ms);
    }
    char *text = h_read_file(outp);
    *out = text != NULL ? text : strdup("");
    if (err != NULL) {
        char *all = h_read_file(errp);
        *err = strdup(all != NULL ? all : "");
        free(all);
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int actl_run(struct h_env *e, const char *token_file, char **out, char **err, ...)
{
    const char *args[ACTL_MAX_ARGS + 1];
    va_list ap;
    va_start(ap, err);
    int n = 0;
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL) {
        ck_assert_int_lt(n, ACTL_MAX_ARGS);
        args[n++] = a;
    }
    va_end(ap);
    args[n] = NULL;
    char errp[320];
    long before = file_size(h_env_path(e, "rlockctl.err", errp, sizeof errp));
    pid_t pid = actl_start(e, token_file, args);
    int rc = actl_finish(e, pid, ACTL_RUN_MS, out, err);
    if (err != NULL) {
        /* Only what this run wrote. */
        size_t len = strlen(*err);
        size_t from = before > 0 && (size_t)before <= len ? (size_t)before : 0;
        memmove(*err, *err + from, len - from + 1);
    }
    return rc;
}

const char *actl_first(const char *json)
{
    if (strncmp(json, "    {", 5) == 0)
        return json;
    const char *p = strstr(json, "\n    {");
    return p != NULL ? p + 1 : NULL;
}

const char *actl_next(const char *entry)
{
    const char *nl = strchr(entry, '\n');
    if (nl == NULL || strncmp(nl + 1, "    {", 5) != 0)
        return NULL;
    return nl + 1;
}

size_t actl_count(const char *json)
{
    size_t n = 0;
    for (const char *p = actl_first(json); p != NULL; p = actl_next(p))
        n++;
    return n;
}

/* Where the value of member key starts in the entry at line (which ends at its newline). */
static const char *member(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *end = strchr(line, '\n');
    const char *p = strstr(line, pat);
    if (p == NULL || (end != NULL && p > end))
        return NULL;
    return p + strlen(pat);
}

int actl_str(const char *line, const char *key, char *buf, size_t len)
{
    const char *p = member(line, key);
    if (p == NULL || *p != '"')
        return 0;
    p++;
    size_t n = 0;
    while (p[n] != '"' && p[n] != '\0' && p[n] != '\n')
        n++;
    if (n >= len)
        return 0;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 1;
}

int actl_u64(const char *line, const char *key, uint64_t *v)
{
    const char *p = member(line, key);
    if (p == NULL || *p < '0' || *p > '9')
        return 0;
    *v = strtoull(p, NULL, 10);
    return 1;
}

int actl_kv(const char *text, const char *name, char *buf, size_t len)
{
    size_t n = strlen(name);
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t linelen = nl != NULL ? (size_t)(nl - line) : strlen(line);
        if (linelen > n && strncmp(line, name, n) == 0 && line[n] == ' ') {
            const char *v = line + n;
            while (*v == ' ')
                v++;
            size_t vlen = linelen - (size_t)(v - line);
            if (vlen >= len)
                return 0;
            memcpy(buf, v, vlen);
            buf[vlen] = '\0';
            return 1;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return 0;
}
