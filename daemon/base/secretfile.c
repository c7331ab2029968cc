/* SPDX-License-Identifier: BSD-3-Clause */
/* secretfile.c — see secretfile.h. */
#include "secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* NULL when st may hold secrets, else why not (into err). */
static const char *check_stat(const struct stat *st, size_t max, char *err, size_t errlen)
{
    unsigned mode = (unsigned)(st->st_mode & 07777);
    if (!S_ISREG(st->st_mode))
        snprintf(err, errlen, "not a regular file");
    else if ((st->st_mode & (S_IROTH | S_IWOTH)) != 0)
        snprintf(err, errlen, "readable or writable by others (mode %04o); chmod o-rw it", mode);
    else if ((st->st_mode & S_IWGRP) != 0)
        snprintf(err, errlen, "writable by its group (mode %04o); chmod g-w it", mode);
    else if (st->st_uid != 0 && st->st_uid != geteuid())
        snprintf(err, errlen,
                 "owned by uid %u, neither root nor the user rlockd runs as (uid %u)",
                 (unsigned)st->st_uid, (unsigned)geteuid());
    else if ((unsigned long long)st->st_size > (unsigned long long)max)
        snprintf(err, errlen, "larger than %zu bytes", max);
    else
        return NULL;
    return err;
}

int secretfile_read(const char *path, size_t max, char **out, size_t *len, char *err,
                    size_t errlen)
{
    *out = NULL;
    *len = 0;
    /* A link is followed: the file it leads to is what is checked (fstat of the open file). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    char *buf = NULL;
    size_t got = 0;
    int rc = -1;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat: %s", strerror(errno));
    } else if (check_stat(&st, max, err, errlen) != NULL) {
        /* refused: err says why */
    } else if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
        snprintf(err, errlen, "out of memory");
    } else {
        ssize_t n = 0;
        while (got < (size_t)st.st_size) {
            n = read(fd, buf + got, (size_t)st.st_size - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (got != (size_t)st.st_size) {
            snprintf(err, errlen, "cannot read: %s",
                     n < 0 ? strerror(errno) : "the file shrank while it was read");
        } else {
            buf[got] = '\0';
            *out = buf;
            *len = got;
            buf = NULL;
            rc = 0;
        }
    }
    secretfile_free(buf, got);
    close(fd);
    return rc;
}

void secretfile_free(char *buf, size_t len)
{
    if (buf == NULL)
        return;
    volatile char *v = buf; /* the wipe is not optimised away */
    for (size_t i = 0; i < len; i++)
        v[i] = 0;
    free(buf);
}

/* 1 when DIR/PREFIXNAME names a non-empty file, its path in buf. */
static int credential_at(const char *dir, const char *prefix, const char *name, char *buf,
                         size_t len)
{
    int n = snprintf(buf, len, "%s/%s%s", dir, prefix, name);
    struct stat st;
    return n > 0 && (size_t)n < len && stat(buf, &st) == 0 && st.st_size > 0;
}

int secretfile_credential(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    if (dir == NULL || dir[0] != '/')
        return 0;
    /* LoadCredential=NAME:FILE, or the shipped unit's directory (ID secrets): secrets_NAME. */
    return credential_at(dir, "", name, buf, len) ||
           credential_at(dir, SECRETFILE_UNIT_PREFIX, name, buf, len);
}
