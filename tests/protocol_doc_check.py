# SPDX-License-Identifier: BSD-3-Clause
"""docs/protocol.md against proto/rlock.proto: every message field documented.

    protocol_doc_check.py PROTO DOC

Reads every message of the schema (its fields by number and name, oneof
members included) and what the protocol document says of each: the rows of a
table (`| N | \\`field\\` |`) after a line naming it in bold (`**Name**`), or
after "Request:" under a heading that ends with its name, and the fields
written inline as "N \\`field\\`" after such a name, to the paragraph's end. Fails when a message with
fields is not described, or its description leaves a field out, lists one the
schema does not have, or under another number. Prints what it compared.
"""
import re
import sys


def schema_fields(path):
    messages = {}
    stack = []  # ('message', name) | ('oneof', name) | ('enum', name)
    field = re.compile(r"^\s*(?:repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")
    for raw in open(path, encoding="utf-8"):
        line = raw.split("//", 1)[0]
        m = re.match(r"^\s*(message|oneof|enum)\s+(\w+)\s*\{", line)
        if m:
            stack.append((m.group(1), m.group(2)))
            if m.group(1) == "message":
                messages.setdefault(m.group(2), {})
            if "}" in line[m.end():]:
                stack.pop()
            continue
        if stack and stack[-1][0] != "enum":
            f = field.match(line)
            if f:
                owner = next(n for k, n in reversed(stack) if k == "message")
                messages[owner][int(f.group(3))] = f.group(2)
        for _ in range(line.count("}")):
            if stack:
                stack.pop()
    return messages


PAIR = re.compile(r"(?<![\d.§])(\d+) `(\w+)`")
# A table row: "| N | `field` |", or "| N–M | `a`, `b`, ... |" for consecutive fields.
ROW = re.compile(r"^\|\s*(\d+)(?:[–-](\d+))?\s*\|\s*((?:`\w+`(?:,\s*)?)+)\s*\|")


def doc_tables(path, names):
    """The fields the document gives each message: rows of the first table after a
    line naming it in bold (`**Name**`) or after a heading that ends with its name
    ("Request:" under such a heading too), and "N `field`" pairs written inline after
    the bold name."""
    tables = {}
    heading = None   # the message a "### ... Name" heading names
    target = None    # the message the next table describes
    prose = None     # the message a paragraph names in bold: its lines may list fields
    in_table = False

    def take(name, text):
        for n, f in PAIR.findall(text):
            tables.setdefault(name, {})[int(n)] = f

    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if not line.strip() or line.startswith("|"):
            prose = None
        if line.startswith("#"):
            words = re.findall(r"\w+", line)
            heading = words[-1] if words and words[-1] in names else None
            target, in_table = heading, False
            continue
        named = [m for m in re.finditer(r"\*\*(\w+)\*\*", line) if m.group(1) in names]
        if prose is not None and not named:
            take(prose, line)
        if line.startswith("Request:") and heading is not None:
            take(heading, line[:named[0].start()] if named else line)
            target = heading
        for i, m in enumerate(named):
            end = named[i + 1].start() if i + 1 < len(named) else len(line)
            take(m.group(1), line[m.end():end])
            if not line.startswith("|"):  # a name inside a table's cell is not its heading
                target = prose = m.group(1)
        row = ROW.match(line)
        if row and target is not None:
            first = int(row.group(1))
            fields = re.findall(r"`(\w+)`", row.group(3))
            last = int(row.group(2)) if row.group(2) else first
            if last - first + 1 == len(fields):
                for k, f in enumerate(fields):
                    tables.setdefault(target, {})[first + k] = f
            in_table = True
        elif line.startswith("|"):
            in_table = True
        elif in_table:
            target, in_table = None, False  # the table after the name has ended
    return tables


def main():
    proto, doc = sys.argv[1:3]
    messages = schema_fields(proto)
    tables = doc_tables(doc, set(messages))
    problems = []
    for msg, fields in sorted(messages.items()):
        if not fields:
            continue
        table = tables.get(msg)
        if table is None:
            problems.append("%s: %d fields, no table in the document" % (msg, len(fields)))
            continue
        for n, f in sorted(fields.items()):
            if table.get(n) != f:
                problems.append("%s: field %d `%s` %s" % (
                    msg, n, f, "missing" if n not in table else "documented as `%s`" % table[n]))
        for n, f in sorted(table.items()):
            if n not in fields:
                problems.append("%s: the document has field %d `%s`, the schema does not" %
                                (msg, n, f))
    checked = sum(1 for f in messages.values() if f)
    if checked == 0:
        problems.append("no message with fields in %s: is it the schema (arguments: PROTO DOC)?" %
                        proto)
    print("protocol_doc_check: %d messages with fields, %d fields, %d tables" %
          (checked, sum(len(f) for f in messages.values()), len(tables)))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
