/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * www.h — the status page's static files (daemon/operator/www/), embedded
 * at build time by cmake/embed_www.cmake: NAME.html is served at /NAME, any
 * other file at /FILE.
 */
#ifndef RLOCKD_WWW_H
#define RLOCKD_WWW_H

#include <stddef.h>

struct www_file {
    const char *path; /* "/status", "/status.js", ... */
    const char *type; /* its Content-Type */
    const char *data;
    size_t len;
};

/* Every file, then one whose path is NULL. */
extern const struct www_file www_files[];

#endif
