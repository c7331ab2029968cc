/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_config.c — bytes as the configuration file, through config_load
 * exactly as rlockd reads one (a path, opened and read by the loader).
 *
 * Properties besides "no crash, no leak": a file that loads dumps (with its
 * secrets) to a text that loads again, and dumps identically — what
 * `rlockd --dump-config` prints is always a valid config meaning the same.
 *
 * Each input lives in a memfd reached through /proc/self/fd, so nothing is
 * written to the file system and nothing outlives the input.
 */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"

/* A memfd holding len bytes of data, and its path; -1 on failure. */
static int memfd_with(const void *data, size_t len, char *path, size_t pathlen)
{
    int fd = memfd_create("rlockd.conf", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

/* c dumped with its secrets, as a malloc'd string of *len bytes. */
static char *dump_text(const struct config *c, size_t *len)
{
    char *buf = NULL;
    FILE *mem = open_memstream(&buf, len);
    FUZZ_CHECK(mem != NULL);
    config_dump(c, mem, 1);
    FUZZ_CHECK(fclose(mem) == 0);
    return buf;
}

/* Load text (the dump of a loaded config); it must load and dump to itself. */
static void check_dump_reloads(const char *text, size_t len, FILE *sink)
{
    char path[64];
    int fd = memfd_with(text, len, path, sizeof path);
    FUZZ_CHECK(fd >= 0);
    struct config *again = config_load(path, stderr);
    if (again == NULL)
        fprintf(stderr, "the dump that did not load:\n%.*s", (int)len, text);
    FUZZ_CHECK(again != NULL);
    size_t len2;
    char *text2 = dump_text(again, &len2);
    FUZZ_CHECK(len2 == len && memcmp(text, text2, len) == 0);
    config_dump(again, sink, 0); /* and the form that hides secrets */
    free(text2);
    config_free(again);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = memfd_with(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    /* Problems are reported through a real stream, so their formatting runs too. */
    FILE *sink = fopen("/dev/null", "w");
    FUZZ_CHECK(sink != NULL);
    struct config *c = config_load(path, sink);
    if (c != NULL) {
        size_t len;
        char *text = dump_text(c, &len);
        check_dump_reloads(text, len, sink);
        free(text);
        config_free(c);
    }
    fclose(sink);
    close(fd);
    return 0;
}
