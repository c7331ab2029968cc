/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * confdoc.c — write rlockd.conf(5)'s scdoc source: the template with its
 * "@KEYS@" line replaced by every key of the config table (config_key_doc),
 * so the page lists exactly the keys, defaults, ranges and reload rules the
 * daemon has. Run at build time; never installed.
 *
 *     rlockd-confdoc TEMPLATE OUTPUT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define CONFDOC_MARKER "@KEYS@"
#define CONFDOC_WIDTH 72 /* text columns after the tab indent */

/* Text with scdoc's formatting characters escaped, so that help reads as written. */
static void put_escaped(FILE *out, const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '\\' || *s == '*' || *s == '_' || *s == '`')
            fputc('\\', out);
        fputc(*s, out);
    }
}

/* An indented paragraph, words wrapped at CONFDOC_WIDTH. */
static void put_paragraph(FILE *out, const char *text)
{
    size_t col = 0;
    const char *p = text;
    while (*p != '\0') {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        if (n == 0)
            break;
        if (col > 0 && col + 1 + n > CONFDOC_WIDTH) {
            fputc('\n', out);
            col = 0;
        }
        fputs(col == 0 ? "\t" : " ", out);
        if (col == 0 && (*p == '-' || *p == '.'))
            fputc('\\', out); /* not a list item */
        char word[256];
        snprintf(word, sizeof word, "%.*s", (int)n, p);
        put_escaped(out, word);
        col += n + (col > 0);
        p += n;
    }
    fputc('\n', out);
}

static void put_key(FILE *out, const struct config_key_doc *k)
{
    fprintf(out, "*%s.", k->section);
    put_escaped(out, k->name);
    fputs("* = ", out);
    if (k->default_text[0] != '\0') {
        fputc('_', out);
        put_escaped(out, k->default_text);
        fputc('_', out);
    } else {
        fputs("(empty)", out);
    }
    fputc('\n', out);

    char help[1024];
    size_t n = strlen(k->help);
    snprintf(help, sizeof help, "%s%s", k->help, n > 0 && k->help[n - 1] == '.' ? "" : ".");
    put_paragraph(out, help);
    fputs("\n", out);

    char facts[512];
    size_t len = 0;
    if (strcmp(k->type, "string") == 0) {
        if (strcmp(k->min, "0") == 0)
            len = (size_t)snprintf(facts, sizeof facts, "A string of at most %s bytes", k->max);
        else
            len = (size_t)snprintf(facts, sizeof facts, "A string of %s to %s bytes", k->min,
                                   k->max);
    } else if (k->min[0] != '\0') {
        len = (size_t)snprintf(facts, sizeof facts, "A %s from %s to %s", k->type, k->min,
                               k->max);
    } else {
        len = (size_t)snprintf(facts, sizeof facts, "A %s", k->type);
    }
    len += (size_t)snprintf(facts + len, sizeof facts - len, "; %s.",
                            k->reloadable ? "reloadable (SIGHUP applies a change)"
                                          : "needs a restart (a reload keeps the running value)");
    if (k->secret)
        snprintf(facts + len, sizeof facts - len,
                 " Secret: --dump-config shows it as <hidden>, and a reload names a change "
                 "without the value.");
    put_paragraph(out, facts);
    fputs("\n", out);
}

static int put_keys(FILE *out)
{
    struct config_key_doc k;
    const char *section = "";
    size_t i = 0;
    for (; config_key_doc(i, &k) == 0; i++) {
        if (strcmp(section, k.section) != 0) {
            section = k.section;
            fprintf(out, "## [%s]\n\n", section);
        }
        put_key(out, &k);
    }
    return i > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: rlockd-confdoc TEMPLATE OUTPUT\n");
        return 64;
    }
    FILE *in = fopen(argv[1], "r");
    if (in == NULL) {
        perror(argv[1]);
        return 1;
    }
    FILE *out = fopen(argv[2], "w");
    if (out == NULL) {
        perror(argv[2]);
        fclose(in);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    int markers = 0, rc = 0;
    while (getline(&line, &cap, in) >= 0) {
        if (strcmp(line, CONFDOC_MARKER "\n") == 0) {
            markers++;
            if (put_keys(out) != 0)
                rc = 1;
        } else {
            fputs(line, out);
        }
    }
    free(line);
    fclose(in);
    if (fclose(out) != 0 || markers != 1 || rc != 0) {
        fprintf(stderr, "rlockd-confdoc: %s: expected one %s line (found %d), or write failed\n",
                argv[1], CONFDOC_MARKER, markers);
        remove(argv[2]);
        return 1;
    }
    return 0;
}
