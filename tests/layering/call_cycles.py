#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""call_cycles.py BUILD-DIR: the files of daemon/ that call each other in a circle.

Reads the object files of the daemon's layer libraries with nm: a file calls another
when it uses a symbol the other defines. Prints every circle (strongly connected set
of files) and fails when one spans two folders: what calls itself in a circle must
stay inside one layer (docs/architecture.md). Fails too when it finds no objects.
"""
import os
import subprocess
import sys


def source_dir(build):
    """The source tree the build directory was configured from (its CMakeCache.txt)."""
    with open(os.path.join(build, 'CMakeCache.txt'), encoding='utf-8') as f:
        for line in f:
            if line.startswith('CMAKE_HOME_DIRECTORY:INTERNAL='):
                return line.split('=', 1)[1].strip()
    return None


def objects(build):
    root = os.path.join(build, 'daemon', 'CMakeFiles')
    src = source_dir(build)
    found = {}
    for d in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if not d.startswith('rlockd_') or not d.endswith('.dir'):
            continue
        for top, _, files in os.walk(os.path.join(root, d)):
            for f in files:
                if f.endswith('.c.o'):
                    path = os.path.join(top, f)
                    rel = os.path.relpath(path, os.path.join(root, d))[:-2]  # lock/lock.c
                    if rel.startswith('__') or 'lua_scripts' in rel:
                        continue
                    # An object left by an older build of a file that moved or went away.
                    if src and not os.path.exists(os.path.join(src, 'daemon', rel)):
                        continue
                    found[rel] = path
    return found


def symbols(path, undefined):
    args = ['nm', '-u' if undefined else '--defined-only', path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if not parts:
            continue
        if undefined:
            syms.add(parts[-1])
        elif len(parts) == 3 and parts[1] in 'TDBR':
            syms.add(parts[2])
    return syms


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main():
    objs = objects(sys.argv[1])
    if len(objs) < 10:
        print(f'FAIL: only {len(objs)} object files of the daemon found under {sys.argv[1]}')
        return 1
    owner = {}
    for f, path in objs.items():
        for s in symbols(path, False):
            owner[s] = f
    edges = {f: set() for f in objs}
    for f, path in objs.items():
        for s in symbols(path, True):
            g = owner.get(s)
            if g is not None and g != f:
                edges[f].add(g)
    bad = 0
    for comp in sorted(sccs(list(objs), edges), key=len, reverse=True):
        if len(comp) < 2:
            continue
        folders = sorted({os.path.dirname(f) or '.' for f in comp})
        print(f'{len(comp)} files call each other in a circle, in {", ".join(folders)}: '
              f'{" ".join(comp)}')
        if len(folders) > 1:
            bad += 1
    if bad:
        print(f'FAIL: {bad} circle(s) cross a folder')
        return 1
    print('every circle of calls lies inside one folder')
    return 0


sys.exit(main())
