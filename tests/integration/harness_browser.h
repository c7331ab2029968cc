/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness_browser.h — a real headless Chromium for a test, through
 * browser.py (chromedriver, W3C WebDriver): open a page, evaluate JavaScript
 * in it, wait for a condition, type, click, take a screenshot.
 *
 * browser.py leads a process group of its own with chromedriver and every
 * Chromium process in it; h_browser_stop ends the group, and so does the test
 * process's death (browser.py gets SIGTERM by PR_SET_PDEATHSIG and kills it).
 * Every call fails the running test when the browser does not answer within
 * H_BROWSER_DEADLINE_MS or says "err".
 */
#ifndef RLOCK_ITEST_HARNESS_BROWSER_H
#define RLOCK_ITEST_HARNESS_BROWSER_H

#include <sys/types.h>

#include "harness.h"

/* The longest a command may take (a page load, a JavaScript call), until excepted. */
#define H_BROWSER_DEADLINE_MS 60000

struct h_browser {
    pid_t pid;      /* browser.py, leader of its process group */
    int to, from;   /* its stdin and stdout */
    char buf[8192]; /* its latest answer line, "ok " or "err " taken off */
    size_t have;    /* bytes read ahead past that line */
    char ahead[8192];
};

/* Start browser.py (its files in e's dir) and wait until the browser is ready. */
void h_browser_start(struct h_browser *b, struct h_env *e);
/* Send one command line (printf format, no newline) and return its answer's value (valid
 * until the next call); fails the test on "err". */
const char *h_browser(struct h_browser *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same, returning -1 (the reason in b->buf) instead of failing on "err"; 0 on "ok". */
int h_browser_try(struct h_browser *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Quit the browser and reap browser.py; its whole process group is gone after. */
void h_browser_stop(struct h_browser *b);

#endif
