#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The C examples of the docs build against the installed library and run.

Every ```c block of README.md and docs/*.md is an example; a C call written in
any other block (indented, or fenced as another language) fails the test, so
no example can escape it. The examples of one file become one program:

- a block that defines functions (a line at column 0 naming one, then "{") puts
  them at file scope, where the examples after it see them; each such function
  is marked, and must have run by the end;
- any other block is the body of a function of its own, run in document order
  against a live rlockd with, in scope, what the examples take as given: `c` (a
  connected client, a session of its own), `l`, `e`, `err`, `addr` and `opts`
  (where to connect, the daemon of this test); another session holds
  orders/listed throughout, for the listings to show;
- the application's own functions the examples call (write_with_fence, lead,
  transfer, ...) are defined here; an example that calls one must have called it
  when it returns: it reached its success path against the daemon.

The build tree is installed into a temporary prefix and each program is built
with `pkg-config rlock` from there (and libevent's, for rlock_event.h), warnings
as errors. A private redis-server and rlockd run on unix sockets.
  docs_examples_check.py BUILD_DIR SOURCE_DIR
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The application's functions the examples call, as the examples use them.
APP = {
    "write_with_fence": "uint64_t fence",
    "transfer": "uint64_t from_fence, uint64_t to_fence",
    "read_config": "uint64_t fence",
    "run_export": "void",
    "lead": "uint64_t term",
    "deduct_stock": "uint64_t fence",
}

PRELUDE = r"""
#define _GNU_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>
#include "rlock.h"
#include "rlock_event.h"

/* The examples connect to the daemon of this test. */
#undef RLOCK_DEFAULT_ADDRESS
#define RLOCK_DEFAULT_ADDRESS getenv("RLOCK_SERVER")

static unsigned app_calls;
static const char *called[64];
static unsigned ncalled;
static void mark_called(const char *fn)
{
    for (unsigned i = 0; i < ncalled; i++)
        if (strcmp(called[i], fn) == 0)
            return;
    if (ncalled < 64)
        called[ncalled++] = fn;
}
static void *app; /* the application's context */
static const char *token; /* no auth token */
static void lock_lost(struct rlock_client *c, const char *resource, const char *tok,
                      uint64_t fence, enum rlock_lost_reason reason, void *arg)
{
    (void)c, (void)tok, (void)arg;
    printf("lost %s fence %" PRIu64 ": %s\n", resource, fence, rlock_lost_reason_str(reason));
}
"""


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def blocks(path):
    """(line, language or None for indented, lines) of each code block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang, j = lines[i][3:].strip(), i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((i + 2, lang, lines[i + 1:j]))
            i = j + 1
        elif lines[i].startswith("    ") and (i == 0 or lines[i - 1].strip() == ""):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            out.append((i + 1, None, [l[4:] for l in lines[i:j]]))
            i = j
        else:
            i += 1
    return out


RESET = "@@line@@"
C_CALL = re.compile(r"\brlock_\w+\s*\(.*;\s*(/\*.*\*/)?\s*$", re.M)
FUNC_HEAD = re.compile(r"^(static\s+)?[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;]*\)\s*$")


def split(code):
    """A block's file-scope function definitions (marked) and its statements."""
    top, body, names, i = [], [], [], 0
    while i < len(code):
        m = FUNC_HEAD.match(code[i])
        if m and i + 1 < len(code) and code[i + 1] == "{":
            j = code.index("}", i + 1)
            names.append(m.group(2))
            top += code[i:i + 2] + ['    mark_called("%s");' % m.group(2)] + code[i + 2:j + 1]
            i = j + 1
        else:
            body.append("/* ... */" if code[i].strip() == "..." else code[i])
            i += 1
    return top, [l for l in body if l.strip()], names


def program(doc, examples):
    """The C program of one document's examples; the names of the functions it must run."""
    src, runs, must_run = [PRELUDE], [], []
    for fn, args in APP.items():
        params = [a.split()[-1] for a in args.split(", ") if a != "void"]
        src.append("static void %s(%s)\n{\n    app_calls++;\n    printf(\"%s(%s)\\n\"%s);\n}"
                   % (fn, args, fn, ", ".join(["%\" PRIu64 \""] * len(params)),
                      "".join(", " + p for p in params)))
    for n, (line, code) in enumerate(examples):
        top, body, names = split(code)
        must_run += names
        if top:
            src.append("#line %d \"%s\"\n%s\n%s" % (line, doc, "\n".join(top), RESET))
        if not body:
            continue
        calls_app = any(re.search(r"\b%s\s*\(" % fn, "\n".join(body)) for fn in APP)
        src.append(
            "static void example_%d(struct rlock_client *c)\n{\n"
            "    struct rlock_lock *l = NULL;\n    enum rlock_err e = RLOCK_OK;\n"
            "    char err[256] = \"\";\n    const char *addr = RLOCK_DEFAULT_ADDRESS;\n"
            "    struct rlock_options opts = {.client_name = \"docs-example\"};\n"
            "    (void)c, (void)l, (void)e, (void)err, (void)addr, (void)opts;\n"
            "    {\n#line %d \"%s\"\n%s\n    }\n}\n%s" % (n, line, doc, "\n".join(body), RESET))
        runs.append((n, line, calls_app))
    # Each example gets a session of its own, closed after it (releasing what it left held).
    # Another session holds a lock for the whole run, for the listings to show.
    main = ["int main(void)\n{\n    struct rlock_client *c, *holder;\n    struct rlock_lock *held;\n"
            "    char err[256];\n    (void)app, (void)token, (void)lock_lost;\n"
            "    if (rlock_connect(RLOCK_DEFAULT_ADDRESS, NULL, &holder, err, sizeof err) != RLOCK_OK ||\n"
            "        rlock_acquire(holder, \"orders/listed\", NULL, 5000, &held) != RLOCK_OK) {\n"
            "        fprintf(stderr, \"the holder: %s\\n\", rlock_last_error()->message);\n"
            "        return 2;\n    }"]
    for n, line, calls_app in runs:
        main.append("    {\n        unsigned before = app_calls;\n        (void)before;\n"
                    "        printf(\"example at line %d\\n\");\n        fflush(stdout);\n"
                    "        if (rlock_connect(RLOCK_DEFAULT_ADDRESS, NULL, &c, err, sizeof err) != RLOCK_OK) {\n"
                    "            fprintf(stderr, \"connect: %%s\\n\", err);\n            return 2;\n        }\n"
                    "        example_%d(c);\n        rlock_close(c);\n" % (line, n))
        if calls_app:
            main.append("        if (app_calls == before) {\n"
                        "            fprintf(stderr, \"the example at %s:%d never reached the "
                        "application's code\\n\");\n            return 1;\n        }" % (doc, line))
        main.append("    }")
    for name in must_run:
        main.append("    {\n        unsigned i = 0;\n"
                    "        while (i < ncalled && strcmp(called[i], \"%s\") != 0)\n            i++;\n"
                    "        if (i == ncalled) {\n            fprintf(stderr, \"%s of %s never ran\\n\");\n"
                    "            return 1;\n        }\n    }" % (name, name, doc))
    main.append("    rlock_lock_free(held);\n    rlock_close(holder);\n    printf(\"all examples ran\\n\");\n    return 0;\n}")
    return "\n\n".join(src + ["\n".join(main)]) + "\n"


def reset_lines(text, c_file):
    """Each RESET marker becomes a #line naming the generated file's own next line."""
    out = text.split("\n")
    for i, l in enumerate(out):
        if l == RESET:
            out[i] = '#line %d "%s"' % (i + 2, c_file)
    return "\n".join(out)


def wait_for(what, check, proc=None, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    fail(what)


def main():
    build, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    docs = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    per_doc = {}
    for path in docs:
        rel = os.path.relpath(path, src)
        for line, lang, code in blocks(path):
            if lang == "c":
                per_doc.setdefault(rel, []).append((line, code))
            elif C_CALL.search("\n".join(code)):
                fail("%s:%d: a C example outside a ```c block, which this test would not build"
                     % (rel, line))
    total = sum(len(v) for v in per_doc.values())
    if total < 10:
        fail("only %d C examples found in the docs: the extraction is broken" % total)

    tmp = tempfile.mkdtemp(prefix="rlock-docs-examples.")
    procs = []
    try:
        prefix = os.path.join(tmp, "usr")
        subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True,
                       stdout=subprocess.DEVNULL)
        libdir = os.path.dirname(glob.glob(os.path.join(prefix, "**", "librlock.so"), recursive=True)[0])
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "rlock", "libevent"], env=env,
                               check=True, capture_output=True, text=True).stdout.split()

        redis_sock, rlockd_sock = os.path.join(tmp, "redis.sock"), os.path.join(tmp, "rlockd.sock")
        procs.append(subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", redis_sock, "--save", "",
             "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL))
        wait_for("redis-server did not start", lambda: subprocess.run(
            ["redis-cli", "-s", redis_sock, "ping"], capture_output=True).stdout.strip() == b"PONG",
            procs[-1])
        conf = os.path.join(tmp, "rlockd.conf")
        with open(conf, "w") as f:
            f.write("[server]\nlisten = unix:%s\n[redis]\naddress = unix:%s\n[metrics]\nlisten =\n"
                    % (rlockd_sock, redis_sock))
        log = open(os.path.join(tmp, "rlockd.log"), "w")
        procs.append(subprocess.Popen([os.path.join(build, "bin", "rlockd"), "-c", conf],
                                      stdout=log, stderr=log))
        wait_for("rlockd did not start", lambda: os.path.exists(rlockd_sock), procs[-1])

        env["RLOCK_SERVER"] = "unix:" + rlockd_sock
        for doc, examples in sorted(per_doc.items()):
            name = re.sub(r"\W", "_", doc)
            c_file, exe = os.path.join(tmp, name + ".c"), os.path.join(tmp, name)
            with open(c_file, "w") as f:
                f.write(reset_lines(program(doc, examples), c_file))
            cc = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror",
                                 "-Wno-unused-function", "-o", exe, c_file] + flags +
                                ["-Wl,-rpath," + libdir], capture_output=True, text=True)
            if cc.returncode != 0:
                fail("the C examples of %s do not build against the installed librlock "
                     "(%s):\n%s" % (doc, c_file, cc.stderr))
            try:
                run = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                fail("the C examples of %s did not finish within 120 s" % doc)
            print(run.stdout, end="")
            if run.returncode != 0 or "all examples ran" not in run.stdout:
                fail("the C examples of %s failed against a live rlockd (exit %d):\n%s"
                     % (doc, run.returncode, run.stderr))
            print("%s: %d examples built and ran" % (doc, len(examples)))
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("docs examples: ok (%d examples)" % total)


if __name__ == "__main__":
    main()
