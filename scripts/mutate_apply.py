#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Read tests/mutations.txt and apply or revert one mutation in a tree.

The list is a sequence of blocks separated by blank lines:

    id: release-no-compare
    file: lua/release.lua
    why: release deletes the key without comparing the token
    find: if redis.call('GET', KEYS[1]) == ARGV[1] then
    replace: if true then

`find` must occur exactly once in `file`; `\\n` in find/replace stands for a
newline. Lines starting with '#' are comments. An optional `tests:` line names
the ctest tests (a regular expression) expected to catch it: they run first.

    mutate_apply.py --list FILE          id and why of every mutation
    mutate_apply.py --ids FILE           the ids, one per line
    mutate_apply.py --tests FILE ID      its tests: regular expression (may be empty)
    mutate_apply.py --apply FILE ID DIR  apply ID under DIR (exit 1 if stale)
    mutate_apply.py --revert FILE ID DIR undo it (restores the saved file)
"""
import os
import shutil
import sys

KEYS = ("id", "file", "why", "find", "replace")
OPTIONAL = ("tests",)


def parse(path):
    muts, cur = [], {}
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("#"):
                continue
            if not line.strip():
                if cur:
                    muts.append(cur)
                    cur = {}
                continue
            key, sep, value = line.partition(": ")
            if not sep or key not in KEYS + OPTIONAL:
                sys.exit(f"{path}:{n}: expected one of {', '.join(KEYS + OPTIONAL)}")
            cur[key] = value.replace("\\n", "\n")
    if cur:
        muts.append(cur)
    seen = set()
    for m in muts:
        missing = [k for k in KEYS if k not in m]
        if missing:
            sys.exit(f"{path}: mutation {m.get('id', '?')} lacks {', '.join(missing)}")
        if m["id"] in seen:
            sys.exit(f"{path}: mutation {m['id']} appears twice")
        seen.add(m["id"])
    return muts


def find(muts, ident):
    for m in muts:
        if m["id"] == ident:
            return m
    sys.exit(f"no mutation {ident}")


def main(argv):
    if len(argv) >= 3 and argv[1] in ("--list", "--ids"):
        for m in parse(argv[2]):
            print(m["id"] if argv[1] == "--ids" else f"{m['id']}: {m['why']} ({m['file']})")
        return 0
    if len(argv) == 4 and argv[1] == "--tests":
        print(find(parse(argv[2]), argv[3]).get("tests", ""))
        return 0
    if len(argv) == 5 and argv[1] in ("--apply", "--revert"):
        m = find(parse(argv[2]), argv[3])
        path = f"{argv[4]}/{m['file']}"
        saved = path + ".mutate-orig"
        if argv[1] == "--revert":
            os.replace(saved, path)
            os.utime(path, None)  # newer than the mutant's objects: the next build redoes them
            return 0
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text.count(m["find"]) != 1:
            print(f"{m['id']}: '{m['find'][:60]}' occurs {text.count(m['find'])} times in "
                  f"{m['file']}", file=sys.stderr)
            return 1
        shutil.copy2(path, saved)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(m["find"], m["replace"]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
