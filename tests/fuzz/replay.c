/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replay.c — main() for a fuzz target built without libFuzzer: runs it once
 * on every file named on the command line, or in a directory named there.
 *
 * This is how the ordinary test suite (and its sanitizer build) replays each
 * committed corpus, regression inputs included, with no clang needed. Each
 * input gets a buffer of exactly its size, so a read past its end is caught
 * by AddressSanitizer as it would be under libFuzzer.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Run the target on the file at path. 0, or -1 if it cannot be read. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    struct stat st;
    uint8_t *data = NULL;
    int rc = -1;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0)
        goto done;
    size_t size = (size_t)st.st_size;
    data = malloc(size > 0 ? size : 1);
    if (data == NULL || fread(data, 1, size, f) != size)
        goto done;
    LLVMFuzzerTestOneInput(data, size);
    rc = 0;
done:
    if (rc != 0)
        fprintf(stderr, "%s: cannot read\n", path);
    free(data);
    fclose(f);
    return rc;
}

/* Run the target on every regular file in dir; adds to *count. 0 or -1. */
static int replay_dir(const char *dir, int *count)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (replay_file(path) != 0)
            rc = -1;
        (*count)++;
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    int count = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            rc |= replay_dir(argv[i], &count);
        } else {
            rc |= replay_file(argv[i]);
            count++;
        }
    }
    printf("%s: %d input%s replayed\n", argc > 0 ? argv[0] : "replay", count,
           count == 1 ? "" : "s");
    /* An empty corpus would pass without testing anything. */
    return rc == 0 && count > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
