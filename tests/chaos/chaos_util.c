/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * chaos_util.c — what every part of rlock-chaos uses: the shared mapping,
 * the clock, a seeded generator and the line-per-write history files.
 */
#include "chaos.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct chaos_shm *chaos_shm_map(const char *dir, int create)
{
    char path[512];
    snprintf(path, sizeof path, "%s/chaos.shm", dir);
    int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0600);
    if (fd == -1) {
        fprintf(stderr, "chaos: open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    if (create && ftruncate(fd, (off_t)sizeof(struct chaos_shm)) != 0) {
        fprintf(stderr, "chaos: ftruncate %s: %s\n", path, strerror(errno));
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, sizeof(struct chaos_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        fprintf(stderr, "chaos: mmap %s: %s\n", path, strerror(errno));
        return NULL;
    }
    struct chaos_shm *m = p;
    if (create) {
        /* A fresh file reads as zeros, which is every field's initial value but these. */
        m->magic = CHAOS_SHM_MAGIC;
        m->sem_res = -1;
        m->elect_res = -1;
        for (int i = 0; i < CHAOS_MAX_WORKERS; i++)
            atomic_store(&m->slots[i].inside, -1);
    } else if (m->magic != CHAOS_SHM_MAGIC) {
        fprintf(stderr, "chaos: %s is not a chaos mapping\n", path);
        munmap(p, sizeof(struct chaos_shm));
        return NULL;
    }
    return m;
}

int64_t chaos_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void chaos_sleep_ms(int ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

void chaos_rng_seed(struct chaos_rng *r, uint64_t seed)
{
    /* splitmix64 of the seed: nearby seeds give unrelated streams, and never 0. */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    r->s = (z ^ (z >> 31)) | 1;
}

uint64_t chaos_rng_next(struct chaos_rng *r)
{
    uint64_t x = r->s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r->s = x;
    return x;
}

uint32_t chaos_rng_range(struct chaos_rng *r, uint32_t lo, uint32_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (uint32_t)(chaos_rng_next(r) % ((uint64_t)hi - lo + 1));
}

int chaos_log_open(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd == -1)
        fprintf(stderr, "chaos: open %s: %s\n", path, strerror(errno));
    return fd;
}

void chaos_vlog(int fd, const char *fmt, va_list ap)
{
    if (fd < 0)
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "%lld ", (long long)chaos_now_us());
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    if (m < 0)
        return;
    n += m;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* One write per line: O_APPEND keeps concurrent writers' lines whole. */
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
}

void chaos_log(int fd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    chaos_vlog(fd, fmt, ap);
    va_end(ap);
}

const char *chaos_res_name(const struct chaos_shm *m, int i, char *buf, size_t len)
{
    if (i == m->sem_res)
        snprintf(buf, len, "chaos/sem");
    else if (i == m->elect_res)
        snprintf(buf, len, "chaos/leader");
    else
        snprintf(buf, len, "chaos/r%d", i);
    return buf;
}
