# SPDX-License-Identifier: BSD-3-Clause
"""The C API's man pages: one for every public function, each as the headers say.

    man_pages_check.py --headers HEADER... --scd-dir SRC/man --man-dir BUILD/man
                       [--cc CC --include DIR...]

Reads the functions the headers declare or define whose names start with
rlock_ (those ending in _ are a header's own helpers) and the pages the build
installs (BUILD/man/manifest.txt, written by man/CMakeLists.txt). Fails when a
function has no page of its name, neither its own nor a link to the page that
documents it; when that page's NAME section does not list it, or its SYNOPSIS
lacks the header's #include or the function's prototype as the header writes
it (white space aside); when a page or link of section 3 names no public
function; when `mandoc -T lint -W warning` reports anything on a generated page
(Debian's mandoc package); and, with --cc, when an EXAMPLES block of a page
does not compile (-fsyntax-only -Wall -Wextra -Werror). Prints what it checked.
"""
import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROTO = re.compile(r"(?!typedef\b)([A-Za-z_][\w\s*]*?[\s*])(rlock_\w+)\s*\((.*)\)", re.S)


def norm(code):
    """One declaration's text without the white space that does not matter."""
    code = re.sub(r"\s+", " ", code).strip()
    return re.sub(r" ?([*(),;\[\]]) ?", r"\1", code)


def header_functions(path):
    """{name: prototype} of the public functions the header declares or defines."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\\\n", " ", text)
    text = re.sub(r"#ifdef __cplusplus.*?#endif", " ", text, flags=re.S)
    text = re.sub(r"^[ \t]*#[^\n]*", " ", text, flags=re.M)
    found = {}
    depth = 0
    stmt = []
    for ch in text:
        if depth > 0:  # a struct's or a function's body
            depth += {"{": 1, "}": -1}.get(ch, 0)
            continue
        if ch not in ";{":
            stmt.append(ch)
            continue
        m = PROTO.fullmatch("".join(stmt).strip())
        stmt = []
        if ch == "{":
            depth = 1
        if m is None or m.group(2).endswith("_"):
            continue
        found[m.group(2)] = norm(m.group(0)) + ";"
    return found


def scd_sections(path):
    """{heading: text} of an scdoc page, and its title line."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    sections = {}
    heading = None
    for line in lines[1:]:
        if line.startswith("# "):
            heading = line[2:].strip()
            sections[heading] = []
        elif heading is not None:
            sections[heading].append(line)
    return lines[0].strip(), {h: "\n".join(body) for h, body in sections.items()}


def code_blocks(text):
    """The ``` blocks of an scdoc text, escapes undone."""
    blocks = re.findall(r"^```\n(.*?)^```$", text, flags=re.S | re.M)
    return [re.sub(r"\\(.)", r"\1", b) for b in blocks]


def listed_names(name_section):
    """The names before ' - ' in a NAME section."""
    par = " ".join(name_section.split())
    if " - " not in par:
        return []
    return [n.strip() for n in par.split(" - ", 1)[0].split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--headers", nargs="+", required=True)
    ap.add_argument("--scd-dir", required=True)
    ap.add_argument("--man-dir", required=True)
    ap.add_argument("--cc")
    ap.add_argument("--include", nargs="*", default=[])
    args = ap.parse_args()
    failures = []

    def fail(msg):
        failures.append(msg)
        print("FAIL:", msg)

    functions = {}  # name -> (header file name, prototype)
    for h in args.headers:
        found = header_functions(h)
        if not found:
            fail(f"{h}: no public function found (is the parser lost?)")
        for name, proto in found.items():
            functions[name] = (os.path.basename(h), proto)

    manifest = os.path.join(args.man_dir, "manifest.txt")
    if not os.path.exists(manifest):
        print(f"FAIL: {manifest} is missing: configure the build and build its man target")
        return 1
    with open(manifest, encoding="utf-8") as f:
        installed = [line.strip() for line in f if line.strip()]
    files = {}  # file name -> the page it is or links to
    for entry in installed:
        name = os.path.basename(entry)
        path = os.path.join(args.man_dir, name)
        if not os.path.exists(path):
            fail(f"{entry} is not built: build the man target")
            continue
        files[name] = os.path.basename(os.path.realpath(path))
    for name, page in sorted(files.items()):
        if page not in files or os.path.islink(os.path.join(args.man_dir, page)):
            fail(f"{name} links to {page}, which is not a page of the build")

    # Every function: its page, listing it, with the header's prototype.
    pages = {}
    for name, (header, proto) in sorted(functions.items()):
        page = files.get(f"{name}.3.gz")
        if page is None:
            fail(f"{name} ({header}) has no man page: no {name}.3 in man/CMakeLists.txt's pages "
                 "nor in the NAME section of one of them")
            continue
        scd = os.path.join(args.scd_dir, page[: -len(".gz")] + ".scd")
        if scd not in pages:
            pages[scd] = scd_sections(scd)
        _, sections = pages[scd]
        if name not in listed_names(sections.get("NAME", "")):
            fail(f"{scd}: the NAME section does not list {name}")
        synopsis = "\n".join(code_blocks(sections.get("SYNOPSIS", "")))
        if f"#include <{header}>" not in synopsis:
            fail(f"{scd}: the SYNOPSIS does not include <{header}> for {name}")
        code = "\n".join(l for l in synopsis.split("\n") if not l.lstrip().startswith("#"))
        decls = {d + ";" for d in norm(code).split(";")}
        if proto not in decls:
            fail(f"{scd}: the SYNOPSIS lacks {name} as {header} declares it:\n    {proto}")

    # Every page or link of section 3 is librlock's overview or a function's.
    for entry in installed:
        if entry.startswith("man3/") and entry != "man3/librlock.3.gz":
            name = os.path.basename(entry)[: -len(".3.gz")]
            if name not in functions:
                fail(f"{entry}: no public function {name} in {', '.join(args.headers)}")

    # mandoc's lint on every page built (a link is its page).
    mandoc = shutil.which("mandoc")
    linted = 0
    if mandoc is None:
        fail("mandoc not found (Debian package mandoc)")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for name in sorted(n for n, p in files.items() if n == p):
                roff = os.path.join(tmp, name[: -len(".gz")])
                with gzip.open(os.path.join(args.man_dir, name)) as src, open(roff, "wb") as dst:
                    dst.write(src.read())
                r = subprocess.run([mandoc, "-T", "lint", "-W", "warning", roff],
                                   capture_output=True, text=True)
                linted += 1
                if r.returncode != 0 or r.stdout or r.stderr:
                    fail(f"mandoc -T lint -W warning {name}:\n{r.stdout}{r.stderr}")

    # The examples compile against the headers.
    compiled = 0
    if args.cc:
        flags = ["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-x", "c", "-"]
        flags[:0] = [f"-I{d}" for d in args.include]
        for scd in sorted(pages):
            for block in code_blocks(pages[scd][1].get("EXAMPLES", "")):
                r = subprocess.run([args.cc] + flags, input=block, capture_output=True, text=True)
                compiled += 1
                if r.returncode != 0:
                    fail(f"{scd}: an example does not compile:\n{r.stderr}")

    print(f"{len(functions)} functions of {', '.join(map(os.path.basename, args.headers))}, "
          f"{len(installed)} man files, {len(pages)} API pages, {linted} pages linted, "
          f"{compiled} examples compiled")
    if failures:
        print(f"FAIL: {len(failures)} problem(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
