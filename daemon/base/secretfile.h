/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * secretfile.h — reading a file that holds secrets (auth tokens, the Redis
 * password), and the rules it must meet.
 *
 * The path may be a symbolic link (a Kubernetes Secret mount is one; so is a
 * file an operator links into place): what counts is the file it leads to,
 * which must be
 *   - a regular file, at most max bytes long;
 *   - owned by root or by the user rlockd runs as (systemd's credentials are
 *     owned by the service's user; any other owner could change the secret);
 *   - neither readable nor writable by other users, and not writable by its
 *     group (mode 0600, 0640, 0400 or 0440).
 * Problems are described without any of the file's content.
 *
 * systemd's credentials (LoadCredential=) are found through
 * $CREDENTIALS_DIRECTORY: secretfile_credential names one of them.
 */
#ifndef RLOCKD_SECRETFILE_H
#define RLOCKD_SECRETFILE_H

#include <stddef.h>

/*
 * Read the file at path into a new NUL-terminated buffer (*out, *len; free
 * with secretfile_free). 0, or -1 with the problem in err ("group-writable
 * (mode 0660); chmod g-w it", "cannot open: No such file or directory", ...).
 */
int secretfile_read(const char *path, size_t max, char **out, size_t *len, char *err,
                    size_t errlen) __attribute__((warn_unused_result));

/* Wipe and free what secretfile_read returned; accepts NULL. */
void secretfile_free(char *buf, size_t len);

/* The shipped unit loads /etc/rlockd/credentials/ as credential ID "secrets": each file
 * FILE of it becomes the credential secrets_FILE. */
#define SECRETFILE_UNIT_PREFIX "secrets_"

/*
 * The path of systemd credential name in $CREDENTIALS_DIRECTORY, into buf,
 * when that variable is set and such a file exists and is not empty: NAME
 * itself (a drop-in's LoadCredential=NAME:PATH), else rlockd_NAME (the
 * shipped unit's directory). 1 when found, else 0.
 */
int secretfile_credential(const char *name, char *buf, size_t len);

#endif
