/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz.h — what every fuzz target in this directory provides, and the check
 * they use for properties beyond "no crash".
 *
 * A target is one LLVMFuzzerTestOneInput: built with libFuzzer in the fuzz
 * build (cmake -DRLOCK_FUZZ=ON, ./scripts/fuzz), and with replay.c in every
 * other build, where ctest runs it once over its committed corpus.
 */
#ifndef RLOCK_FUZZ_H
#define RLOCK_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Run the code under test on one input. Returns 0 (libFuzzer's convention). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property that must hold for every input; a violation is a finding (abort). */
#define FUZZ_CHECK(cond)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond);    \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

#endif
