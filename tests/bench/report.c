/* SPDX-License-Identifier: BSD-3-Clause */
/* report.c — see report.h. */
#include "report.h"

#include <math.h>
#include <string.h>

static struct report_item *add(struct report *r, const char *key, int kind)
{
    /* A full report drops further items rather than corrupt memory; REPORT_MAX is ample. */
    if (r->n >= REPORT_MAX)
        return NULL;
    struct report_item *it = &r->item[r->n++];
    memset(it, 0, sizeof *it);
    snprintf(it->key, sizeof it->key, "%s", key);
    it->kind = kind;
    return it;
}

void report_u64(struct report *r, const char *key, uint64_t v)
{
    struct report_item *it = add(r, key, 0);
    if (it != NULL)
        it->u = v;
}

void report_real(struct report *r, const char *key, double v, int decimals)
{
    struct report_item *it = add(r, key, 1);
    if (it != NULL) {
        it->d = isfinite(v) ? v : 0.0; /* JSON has no NaN or infinity */
        it->decimals = decimals;
    }
}

void report_str(struct report *r, const char *key, const char *v)
{
    struct report_item *it = add(r, key, 2);
    if (it != NULL)
        snprintf(it->s, sizeof it->s, "%s", v != NULL ? v : "");
}

void report_u64_2(struct report *r, const char *prefix, const char *name, uint64_t v)
{
    char key[48];
    snprintf(key, sizeof key, "%s%s", prefix, name);
    report_u64(r, key, v);
}

static void print_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

void report_print(const struct report *r, FILE *out, int json)
{
    if (json)
        fputc('{', out);
    for (int i = 0; i < r->n; i++) {
        const struct report_item *it = &r->item[i];
        if (json) {
            fprintf(out, "%s\"%s\":", i ? "," : "", it->key);
            if (it->kind == 0)
                fprintf(out, "%llu", (unsigned long long)it->u);
            else if (it->kind == 1)
                fprintf(out, "%.*f", it->decimals, it->d);
            else
                print_json_string(out, it->s);
        } else {
            fprintf(out, "%-28s ", it->key);
            if (it->kind == 0)
                fprintf(out, "%llu\n", (unsigned long long)it->u);
            else if (it->kind == 1)
                fprintf(out, "%.*f\n", it->decimals, it->d);
            else
                fprintf(out, "%s\n", it->s);
        }
    }
    if (json)
        fputs("}\n", out);
}
