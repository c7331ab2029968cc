# SPDX-License-Identifier: BSD-3-Clause
"""The enumerated values of the schema and of librlock against the documents
that list them, and against the code that mirrors them.

    enum_doc_check.py SOURCE-DIR

Reads the enums of proto/rlock.proto (Status, LostReason, LockMode,
SessionState, Role) and the public enums of librlock's rlock.h (rlock_err,
rlock_lock_state, rlock_lost_reason, rlock_session_state, rlock_role), then
checks, naming the value and the file of each difference:

  code that mirrors an enum value by value:
    - rlock.h: RLOCK_ERR_X = STATUS_X for every Status but OK (the library
      casts a status into an rlock_err), RLOCK_OK = 0, and the library's own
      codes from 100 up; rlock_lost_reason, rlock_role, rlock_session_state
      as LostReason, Role, SessionState; "1..N mirror" where N is the last
      Status (rlock.h and docs/client.md say so in words);
    - the daemon's per-value metric counters (daemon/base/counters.h);
    - the Node.js client: STATUS_NAMES and LOST_REASONS (lib/errors.js) by
      number, the StatusCode and LostReason types (index.d.ts);

  documents that list an enum (a row per value, each value by its exact
  identifier, nothing else listed):
    - docs/protocol.md: Status in the table of section 5 (number, bare name)
      and LostReason in the table of 4.4 (number, name); every other enum
      (LockMode, SessionState, Role) where the fields of that type are
      described, each value with its number ("0 `ROLE_OPEN`" or
      "`MODE_SHARED` (1)");
    - docs/client.md: a table row for every value of each public enum of
      rlock.h (errors, lost reasons, handle states, listed sessions' states
      and roles); an enum of rlock.h with no table to check fails;
    - man/librlock.3.scd: an entry per rlock_err under ERRORS and per
      rlock_lost_reason under LOST LOCKS, and the handle states under LOCKS;
    - docs/operations.md: the labels of rlockd_acquires_total{result} (every
      Status) and rlockd_locks_lost_total{reason} (every LostReason but
      UNSPECIFIED, which the daemon does not export);
    - client/node/README.md: its Errors table (every StatusCode and
      ClientCode) and its table of lost reasons (every LostReason);
    - rlockctl's exit statuses, which map rlock_err values (ctl_exit_code):
      every status rlockctl uses is listed by its --help, man/rlockctl.1.scd
      and docs/rlockctl.md, and they list no other;

  and, in every document (docs/, man/, the READMEs), that a prefixed
  identifier (STATUS_, LOST_, MODE_, SESSION_STATE_, ROLE_, RLOCK_ERR_,
  RLOCK_LOST_, RLOCK_ROLE_, RLOCK_SESSION_) is a value of its enum, and in
  docs/client.md and librlock(3) that every rlock_* and RLOCK_* name is
  declared by the public headers. Prints what it compared; exits 1 on any
  difference.
"""
import os
import re
import sys

PROBLEMS = []
COUNTS = {"enums": 0, "values": 0, "checks": 0}


def problem(path, text):
    PROBLEMS.append("%s: %s" % (path, text))


def read(src, rel):
    try:
        with open(os.path.join(src, rel), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        problem(rel, "cannot be read (%s)" % e.strerror)
        return None


# --- the enums --------------------------------------------------------------


class Enum:
    def __init__(self, name, where, values):
        self.name = name
        self.where = where
        self.values = values  # [(identifier, number)] in source order

    def ids(self):
        return [v for v, _ in self.values]

    def number(self, ident):
        return dict(self.values).get(ident)

    def bare(self, prefix):
        """Identifier without prefix -> (identifier, number)."""
        return {v[len(prefix):]: (v, n) for v, n in self.values if v.startswith(prefix)}


def proto_enums(text, rel):
    enums = {}
    body = re.sub(r"//[^\n]*", "", text)
    for m in re.finditer(r"\benum\s+(\w+)\s*\{([^}]*)\}", body):
        values = [(v, int(n)) for v, n in re.findall(r"(\w+)\s*=\s*(-?\d+)\s*;", m.group(2))]
        enums[m.group(1)] = Enum(m.group(1), rel, values)
    return enums


def header_enums(text, rel):
    enums = {}
    body = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    for m in re.finditer(r"\benum\s+(\w+)\s*\{([^}]*)\}\s*;", body):
        values, nxt = [], 0
        for item in m.group(2).split(","):
            item = item.strip()
            if not item:
                continue
            e = re.fullmatch(r"(\w+)(?:\s*=\s*(-?\d+)[uU]?)?", item)
            if e is None:
                problem(rel, "enum %s: cannot read the entry '%s'" % (m.group(1), item))
                continue
            nxt = int(e.group(2)) if e.group(2) is not None else nxt
            values.append((e.group(1), nxt))
            nxt += 1
        enums[m.group(1)] = Enum(m.group(1), rel, values)
    return enums


def c_identifiers(text):
    body = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    return set(re.findall(r"\b(?:rlock|RLOCK)_\w+", body))


# --- documents --------------------------------------------------------------


def sections(text):
    """[(level, title, [lines])] of a Markdown or scdoc text, fenced code left out of
    the headings (its lines stay in the section)."""
    out = [(0, "", [])]
    fenced = False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^(#+)\s+(.*?)\s*$", line)
        if m:
            out.append((len(m.group(1)), m.group(2), []))
        else:
            out[-1][2].append(line)
    return out


def section(text, title_re, rel, what):
    """The lines of the first section whose title matches title_re, with its
    subsections."""
    secs = sections(text)
    for i, (level, title, lines) in enumerate(secs):
        if re.search(title_re, title):
            body = list(lines)
            for lvl, t, ls in secs[i + 1:]:
                if lvl <= level:
                    break
                body.append("#" * lvl + " " + t)
                body.extend(ls)
            return body
    problem(rel, "no section titled like /%s/ (%s)" % (title_re, what))
    return None


def cells(line):
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|"):
        inner = inner[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


def tables(lines):
    """The tables of lines: [(header cells, [(row cells, line)])], code blocks skipped."""
    out, cur, fenced = [], None, False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("|"):
            if cur is None:
                cur = (cells(line), [])
                out.append(cur)
            elif not re.fullmatch(r"\|?[\s:|-]+\|?", line.strip()):
                cur[1].append((cells(line), line))
        else:
            cur = None
    return out


def table(lines, header_re, rel, what):
    for head, rows in tables(lines or []):
        if re.search(header_re, " | ".join(head)):
            return rows
    if lines is not None:
        problem(rel, "no table with a header like /%s/ (%s)" % (header_re, what))
    return None


def ticked(cell):
    return re.findall(r"`'?([A-Za-z_][\w]*)'?`", cell)


def compare(rel, where, want, got, describe, of, unit="row"):
    """want: {key: anything} of the values that need a row (describe(key, want[key])
    names one); got: the keys the document lists. Reports each value without a row
    and each row of no value (of: what the values are)."""
    COUNTS["checks"] += 1
    for k in want:
        if k not in got:
            problem(rel, "%s has no %s in %s" % (describe(k, want[k]), unit, where))
    for k in sorted(got):
        if k not in want:
            problem(rel, "%s has a %s for `%s`, which is not %s" % (where, unit, k, of))


# --- the checks -------------------------------------------------------------


def check_mirrors(src, pe, he):
    status, lost = pe.get("Status"), pe.get("LostReason")
    err = he.get("rlock_err")
    h = "client/librlock/include/rlock.h"
    if status and err:
        bare = status.bare("STATUS_")
        mine = err.bare("RLOCK_ERR_")
        COUNTS["checks"] += 1
        for name, (ident, n) in bare.items():
            if name == "OK":
                if err.number("RLOCK_OK") != n:
                    problem(h, "enum rlock_err: RLOCK_OK must be %d, as STATUS_OK" % n)
                continue
            if name not in mine:
                problem(h, "enum rlock_err has no RLOCK_ERR_%s for %s (%d)" % (name, ident, n))
            elif mine[name][1] != n:
                problem(h, "enum rlock_err: RLOCK_ERR_%s is %d, %s is %d" %
                        (name, mine[name][1], ident, n))
        top = max(n for _, n in status.values)
        for name, (ident, n) in mine.items():
            if name not in bare and n <= top:
                problem(h, "enum rlock_err: %s = %d is no Status, but Status values go up to "
                        "%d (the library's own codes are 100 and up)" % (ident, n, top))
            if name not in bare and n < 100:
                problem(h, "enum rlock_err: %s = %d: the library's own codes start at 100" %
                        (ident, n))
        for rel in (h, "docs/client.md"):
            text = read(src, rel)
            for m in re.finditer(r"\b1\.\.(\d+)\s+mirror", text or ""):
                COUNTS["checks"] += 1
                if int(m.group(1)) != top:
                    problem(rel, "says \"1..%s mirror\" the daemon's status codes: they go up "
                            "to %d (%s)" % (m.group(1), top,
                                            [v for v, k in status.values if k == top][0]))
    for proto, cname, pprefix, cprefix in (
            ("LostReason", "rlock_lost_reason", "LOST_", "RLOCK_LOST_"),
            ("Role", "rlock_role", "ROLE_", "RLOCK_ROLE_"),
            ("SessionState", "rlock_session_state", "SESSION_STATE_", "RLOCK_SESSION_")):
        p, c = pe.get(proto), he.get(cname)
        if p is None or c is None:
            problem(h if c is None else "proto/rlock.proto",
                    "no enum %s" % (cname if c is None else proto))
            continue
        COUNTS["checks"] += 1
        want = {k: n for k, (_, n) in p.bare(pprefix).items()}
        got = {k: n for k, (_, n) in c.bare(cprefix).items()}
        for k, n in want.items():
            if got.get(k) != n:
                problem(h, "enum %s: %s%s %s (%s%s is %d)" % (
                    cname, cprefix, k, "missing" if k not in got else "is %d" % got[k],
                    pprefix, k, n))
        for k, n in got.items():
            if k not in want:
                problem(h, "enum %s: %s%s = %d is no value of %s" % (cname, cprefix, k, n, proto))

    counters = read(src, "daemon/base/counters.h")
    for macro, enum in (("METRIC_STATUSES", status), ("METRIC_REASONS", lost)):
        m = re.search(r"#define\s+%s\s+(\d+)" % macro, counters or "")
        if counters is not None and enum is not None:
            COUNTS["checks"] += 1
            want = max(n for _, n in enum.values) + 1
            if m is None or int(m.group(1)) != want:
                problem("daemon/base/counters.h", "%s is %s; %s values go 0..%d, so %d" % (
                    macro, m.group(1) if m else "not defined", enum.name, want - 1, want))

    # The Node.js client.
    js = read(src, "client/node/lib/errors.js")
    dts = read(src, "client/node/index.d.ts")
    for array, enum, prefix, lower in (("STATUS_NAMES", status, "STATUS_", False),
                                       ("LOST_REASONS", lost, "LOST_", True)):
        if js is None or enum is None:
            continue
        COUNTS["checks"] += 1
        m = re.search(r"\b%s\s*=\s*Object\.freeze\(\[(.*?)\]\)" % array, js, re.S)
        if m is None:
            problem("client/node/lib/errors.js", "no %s array" % array)
            continue
        got = re.findall(r"'(\w+)'", m.group(1))
        want = [None] * (max(n for _, n in enum.values) + 1)
        for v, n in enum.values:
            want[n] = v[len(prefix):].lower() if lower else v[len(prefix):]
        for n, name in enumerate(want):
            if name is not None and (n >= len(got) or got[n] != name):
                problem("client/node/lib/errors.js", "%s[%d] should be '%s' (%s%s = %d), is %s" % (
                    array, n, name, prefix, name.upper(), n,
                    "'%s'" % got[n] if n < len(got) else "missing"))
        for n in range(len(want), len(got)):
            problem("client/node/lib/errors.js", "%s[%d] '%s' is no value of %s" %
                    (array, n, got[n], enum.name))
    if dts is not None:
        for typ, want in (
                ("StatusCode", {v[7:] for v, n in (status.values if status else [])
                                if v != "STATUS_OK"}),
                ("LostReason", {v[5:].lower() for v, _ in (lost.values if lost else [])})):
            COUNTS["checks"] += 1
            m = re.search(r"\bexport\s+type\s+%s\s*=(.*?);" % typ, dts, re.S)
            if m is None:
                problem("client/node/index.d.ts", "no type %s" % typ)
                continue
            got = set(re.findall(r"'(\w+)'", m.group(1)))
            for k in sorted(want - got):
                problem("client/node/index.d.ts", "type %s lacks '%s'" % (typ, k))
            for k in sorted(got - want):
                problem("client/node/index.d.ts", "type %s has '%s', which is no value" % (typ, k))


def numbered_rows(rel, rows, enum, prefix, where, describe):
    """A table of "| N | `NAME` |" rows (NAME without prefix) against enum's values."""
    if not enum or rows is None:
        return
    got = {}
    for c, _ in rows:
        names = ticked(c[1]) if len(c) > 1 else []
        if re.fullmatch(r"\d+", c[0]) and len(names) == 1:
            got[prefix + names[0]] = int(c[0])
    want = dict(enum.values)
    compare(rel, where, want, got, describe, "a value of " + enum.name)
    for k, n in got.items():
        if k in want and want[k] != n:
            problem(rel, "%s gives `%s` the number %d; %s is %d"
                    % (where, k[len(prefix):], n, k, want[k]))


def check_protocol(src, pe):
    rel = "docs/protocol.md"
    text = read(src, rel)
    if text is None:
        return
    status, lost = pe.get("Status"), pe.get("LostReason")
    # Status: "| N | `NAME` |" under "## 5. Status codes", NAME without STATUS_.
    rows = table(section(text, r"^\d+\.\s+Status codes$", rel, "the Status values"),
                 r"^#\s*\|\s*name\b", rel, "the Status values")
    numbered_rows(rel, rows, status, "STATUS_", "the table of section 5 (Status codes)",
                  lambda k, n: "Status %s (%d, written `%s`)" % (k, n, k[7:]))
    # LostReason: "| N | `LOST_X` |" in the table headed "value | LostReason".
    rows = table(section(text, r"^4\.4\s", rel, "the LostReason values"),
                 r"\bLostReason\b", rel, "the LostReason values")
    numbered_rows(rel, rows, lost, "", "the LostReason table of section 4.4",
                  lambda k, n: "LostReason %s (%d)" % (k, n))
    # The other enums (LockMode, SessionState, Role, and any new one): each value with
    # its number where the fields of that type are described.
    for name in sorted(set(pe) - {"Status", "LostReason"}):
        enum = pe[name]
        COUNTS["checks"] += 1
        prefix = os.path.commonprefix(enum.ids())
        prefix = prefix[:prefix.rfind("_") + 1]
        pairs = [(m.group(2), int(m.group(1))) for m in
                 re.finditer(r"(?<![\w.§])(\d+) `(%s\w+)`" % prefix, text)]
        pairs += [(m.group(1), int(m.group(2))) for m in
                  re.finditer(r"`(%s\w+)` \((\d+)\)" % prefix, text)]
        values = dict(enum.values)
        for ident, n in enum.values:
            if (ident, n) not in pairs:
                problem(rel, "%s %s (%d) is never given with its number (\"%d `%s`\" or "
                        "\"`%s` (%d)\")" % (name, ident, n, n, ident, ident, n))
        for ident, n in pairs:
            if values.get(ident, n) != n:
                problem(rel, "gives %s the number %d; it is %d" % (ident, n, values[ident]))


def check_client_md(src, he):
    rel = "docs/client.md"
    text = read(src, rel)
    if text is None:
        return
    # (section title, header of its table, enums whose every value has a row)
    specs = (
        (r"^Errors$", r"^result\b", ["rlock_err"]),
        (r"^Lost locks$", r"^reason\b", ["rlock_lost_reason"]),
        (r"^Locks and handles$", r"^state\b", ["rlock_lock_state"]),
        (r"^Operators' requests$", r"^state or role\b", ["rlock_session_state", "rlock_role"]),
        (r"^The most contended resources$", r"^order\b", ["rlock_top_order"]),
    )
    for title, header, names in specs:
        enums = [he[n] for n in names if n in he]
        for n in names:
            if n not in he:
                problem("client/librlock/include/rlock.h", "no enum %s" % n)
        what = "the values of enum " + ", ".join(names)
        rows = table(section(text, title, rel, what), header, rel, what)
        if rows is None:
            continue
        got = set()
        for c, _ in rows:
            got.update(ticked(c[0]))
        want = {}
        for e in enums:
            want.update({v: (e.name, n) for v, n in e.values})
        compare(rel, "the table under \"%s\"" % title.strip("^$"), want, got,
                lambda k, en: "%s %s (%d)" % (en[0], k, en[1]),
                "a value of enum " + " or ".join(names))
    covered = {n for _, _, ns in specs for n in ns}
    for name in sorted(set(he) - covered):
        problem(rel, "enum %s of rlock.h: no table of its values is checked (add one, and "
                "its spec in tests/enum_doc_check.py)" % name)


def man_terms(lines):
    """The identifiers of an scdoc list's terms: lines like "*A*" or "*A*, *B*"
    followed by an indented description."""
    got = set()
    for i, line in enumerate(lines):
        if re.match(r"^\*\w+\*(?:,\s*\*\w+\*)*\s*$", line) and i + 1 < len(lines) and \
                lines[i + 1].startswith("\t"):
            got.update(re.findall(r"\*(\w+)\*", line))
    return got


def check_man(src, he):
    rel = "man/librlock.3.scd"
    text = read(src, rel)
    if text is None:
        return
    for title, name in ((r"^ERRORS$", "rlock_err"), (r"^LOST LOCKS$", "rlock_lost_reason")):
        enum = he.get(name)
        lines = section(text, title, rel, "the values of enum " + name)
        if enum is None or lines is None:
            continue
        compare(rel, "section %s" % title.strip("^$"), {v: n for v, n in enum.values},
                man_terms(lines), lambda k, n: "%s %s (%d)" % (name, k, n),
                "a value of enum " + name, unit="entry")
    enum = he.get("rlock_lock_state")
    lines = section(text, r"^LOCKS$", rel, "the lock states")
    if enum is not None and lines is not None:
        COUNTS["checks"] += 1
        named = set(re.findall(r"\*(RLOCK_\w+)\*", "\n".join(lines)))
        for v, n in enum.values:
            if v not in named:
                problem(rel, "rlock_lock_state %s (%d) is not named (*%s*) in section LOCKS" %
                        (v, n, v))


def check_operations(src, pe):
    rel = "docs/operations.md"
    text = read(src, rel)
    if text is None:
        return
    for metric, enum, prefix, skip in (
            ("rlockd_acquires_total{result}", pe.get("Status"), "STATUS_", ()),
            ("rlockd_locks_lost_total{reason}", pe.get("LostReason"), "LOST_",
             ("LOST_UNSPECIFIED",))):
        if enum is None:
            continue
        row = None
        for head, rows in tables(text.split("\n")):
            for c, _ in rows:
                if c and c[0] == "`%s`" % metric:
                    row = c
        if row is None:
            problem(rel, "no row for the metric `%s`" % metric)
            continue
        labels = set(ticked(" | ".join(row[2:])))
        want = {v[len(prefix):].lower(): (v, n) for v, n in enum.values if v not in skip}
        compare(rel, "the row of `%s`" % metric, want, labels,
                lambda k, vn: "the label `%s` (%s = %d)" % (k, vn[0], vn[1]),
                "a label the daemon exports (%s, lowercased%s)" % (
                    enum.name, ", but " + ", ".join(skip) if skip else ""), unit="mention")


def check_node_readme(src, pe):
    rel = "client/node/README.md"
    text = read(src, rel)
    dts = read(src, "client/node/index.d.ts")
    if text is None or dts is None:
        return
    codes = set()
    for typ in ("StatusCode", "ClientCode"):
        m = re.search(r"\bexport\s+type\s+%s\s*=(.*?);" % typ, dts, re.S)
        codes.update(re.findall(r"'(\w+)'", m.group(1)) if m else [])
    rows = table(section(text, r"^Errors$", rel, "the error codes"), r"^code\b", rel,
                 "the error codes")
    if rows is not None:
        got = set()
        for c, _ in rows:
            got.update(ticked(c[0]))
        compare(rel, "the table under \"Errors\"", {k: k for k in codes}, got,
                lambda k, _: "the code `%s` (index.d.ts)" % k,
                "a StatusCode or ClientCode of index.d.ts")
    lost = pe.get("LostReason")
    rows = table(section(text, r"^Losing a lock", rel, "the lost reasons"),
                 r"signal\.reason\.code", rel, "the lost reasons")
    if rows is not None and lost is not None:
        got = set()
        for c, _ in rows:
            m = re.search(r"`lostReason`\s*`'(\w+)'`", c[0])
            if m:
                got.add(m.group(1))
        want = {v[5:].lower(): (v, n) for v, n in lost.values}
        compare(rel, "the table under \"Losing a lock\"", want, got,
                lambda k, vn: "lostReason '%s' (%s = %d)" % (k, vn[0], vn[1]),
                "a LostReason")


# sysexits.h, fixed since 4.3BSD.
SYSEXITS = {"EX_OK": 0, "EX_USAGE": 64, "EX_DATAERR": 65, "EX_NOINPUT": 66, "EX_NOUSER": 67,
            "EX_NOHOST": 68, "EX_UNAVAILABLE": 69, "EX_SOFTWARE": 70, "EX_OSERR": 71,
            "EX_OSFILE": 72, "EX_CANTCREAT": 73, "EX_IOERR": 74, "EX_TEMPFAIL": 75,
            "EX_PROTOCOL": 76, "EX_NOPERM": 77, "EX_CONFIG": 78}


def check_rlockctl(src, he):
    err = he.get("rlock_err")
    ctl = {}
    for f in sorted(os.listdir(os.path.join(src, "client/rlockctl"))):
        if f.endswith(".c") or f.endswith(".h"):
            ctl["client/rlockctl/" + f] = read(src, "client/rlockctl/" + f) or ""
    defines = {}
    for text in ctl.values():
        for name, value in re.findall(r"#define\s+(CTL_EX_\w+)\s+(\w+)", text):
            defines[name] = int(value) if value.isdigit() else SYSEXITS.get(value)
    used = {}  # status -> what uses it
    for f, text in ctl.items():
        code = re.sub(r"#define\s+CTL_EX\w*\s+\w+", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))
        for name in re.findall(r"\b((?:CTL_)?EX_[A-Z_]+)\b", code):
            n = defines.get(name, SYSEXITS.get(name))
            if n is None:
                problem(f, "exit status %s: unknown value" % name)
                continue
            used.setdefault(n, set())
    # Which rlock_err values come to which status.
    c = ctl.get("client/rlockctl/rlockctl.c", "")
    m = re.search(r"\nint ctl_exit_code\(enum rlock_err e\)\n\{(.*?)\n\}", c, re.S)
    if m is None:
        problem("client/rlockctl/rlockctl.c", "no ctl_exit_code(enum rlock_err e)")
    else:
        pending, mapped = [], set()
        for tok in re.finditer(r"case\s+(RLOCK_\w+)\s*:|default\s*:|return\s+(\w+)\s*;",
                               m.group(1)):
            if tok.group(1):
                pending.append(tok.group(1))
            elif tok.group(0).startswith("default"):
                pending.append("*")
            else:
                n = defines.get(tok.group(2), SYSEXITS.get(tok.group(2)))
                for e in pending:
                    names = [v for v in err.ids() if v not in mapped] if e == "*" and err else [e]
                    for v in names:
                        mapped.add(v)
                        used.setdefault(n, set()).add(v)
                pending = []
    COUNTS["checks"] += 1

    def why(n):
        errs = sorted(used.get(n, ()), key=lambda v: err.number(v) if err else 0)
        return " (%s)" % ", ".join(errs) if errs else ""

    helps = {int(x) for x in re.findall(r'X\("(\d+)"', c)}
    rel_man, rel_md = "man/rlockctl.1.scd", "docs/rlockctl.md"
    man = read(src, rel_man)
    lines = section(man or "", r"^EXIT STATUS$", rel_man, "rlockctl's exit statuses")
    in_man = {int(x) for x in man_terms(lines or []) if x.isdigit()}
    md = read(src, rel_md)
    rows = table(section(md or "", r"^Exit status$", rel_md, "rlockctl's exit statuses"),
                 r"^code\b", rel_md, "rlockctl's exit statuses") or []
    in_md = set()
    for cl, _ in rows:
        in_md.update(int(x) for x in re.findall(r"\d+", cl[0]))
    for rel, where, got in (
            ("client/rlockctl/rlockctl.c", "CTL_EXIT_CODES (--help)", helps),
            (rel_man, "section EXIT STATUS", in_man),
            (rel_md, "the table under \"Exit status\"", in_md)):
        for n in sorted(used):
            if n not in got:
                problem(rel, "exit status %d%s is not listed in %s" % (n, why(n), where))
        for n in sorted(got - set(used)):
            problem(rel, "%s lists exit status %d, which rlockctl never uses" % (where, n))


STALE = (  # identifier prefix, (source, enum), names that are no enum value
    (r"STATUS_", ("proto", "Status"), {"STATUS_NAMES"}),
    (r"LOST_", ("proto", "LostReason"), {"LOST_REASONS"}),
    (r"MODE_", ("proto", "LockMode"), set()),
    (r"SESSION_STATE_", ("proto", "SessionState"), set()),
    (r"ROLE_", ("proto", "Role"), set()),
    (r"RLOCK_ERR_", ("header", "rlock_err"), set()),
    (r"RLOCK_LOST_", ("header", "rlock_lost_reason"), set()),
    (r"RLOCK_ROLE_", ("header", "rlock_role"), set()),
    (r"RLOCK_SESSION_", ("header", "rlock_session_state"), set()),
)
# Names in docs/client.md and librlock(3) that are not C: rlockctl's environment
# variable, the CMake target.
NOT_C = {"RLOCK_SERVER", "rlock_static"}


def check_names(src, pe, he, public):
    docs = sorted("docs/" + f for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md"))
    docs += sorted("man/" + f for f in os.listdir(os.path.join(src, "man"))
                   if f.endswith(".scd") or f.endswith(".scd.in"))
    docs += ["README.md", "client/node/README.md"]
    for rel in docs:
        text = read(src, rel)
        if text is None:
            continue
        COUNTS["checks"] += 1
        for prefix, (kind, name), other in STALE:
            enum = (pe if kind == "proto" else he).get(name)
            if enum is None:
                continue
            for m in re.finditer(r"\b%s[A-Z0-9_]*[A-Z0-9]\b" % prefix, text):
                ident = m.group(0)
                if ident not in enum.ids() and ident not in other:
                    line = text.count("\n", 0, m.start()) + 1
                    problem(rel, "line %d: %s is no value of %s" % (line, ident, name))
    for rel in ("docs/client.md", "man/librlock.3.scd"):
        text = read(src, rel)
        COUNTS["checks"] += 1
        for m in re.finditer(r"\b(?:rlock|RLOCK)_\w+(?!\w|\.h\b)", text or ""):
            ident = m.group(0)
            if ident not in public and ident not in NOT_C:
                line = text.count("\n", 0, m.start()) + 1
                problem(rel, "line %d: %s is not declared in rlock.h or rlock_event.h" %
                        (line, ident))


def main():
    if len(sys.argv) != 2:
        print("usage: enum_doc_check.py SOURCE-DIR", file=sys.stderr)
        return 2
    src = sys.argv[1]
    proto = read(src, "proto/rlock.proto")
    header = read(src, "client/librlock/include/rlock.h")
    event = read(src, "client/librlock/include/rlock_event.h")
    if proto is None or header is None:
        for p in PROBLEMS:
            print("  " + p)
        return 1
    pe = proto_enums(proto, "proto/rlock.proto")
    he = header_enums(header, "client/librlock/include/rlock.h")
    for name in ("Status", "LostReason"):
        if name not in pe:
            problem("proto/rlock.proto", "no enum %s: is this the schema?" % name)
    for name in ("rlock_err", "rlock_lost_reason", "rlock_lock_state"):
        if name not in he:
            problem("client/librlock/include/rlock.h", "no enum %s" % name)
    COUNTS["enums"] = len(pe) + len(he)
    COUNTS["values"] = sum(len(e.values) for e in list(pe.values()) + list(he.values()))
    public = c_identifiers(header) | c_identifiers(event or "")

    check_mirrors(src, pe, he)
    check_protocol(src, pe)
    check_client_md(src, he)
    check_man(src, he)
    check_operations(src, pe)
    check_node_readme(src, pe)
    check_rlockctl(src, he)
    check_names(src, pe, he, public)

    print("enum_doc_check: %d enums (%s), %d values, %d comparisons" % (
        COUNTS["enums"], ", ".join(sorted(pe) + sorted(he)), COUNTS["values"], COUNTS["checks"]))
    for p in PROBLEMS:
        print("  " + p)
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
