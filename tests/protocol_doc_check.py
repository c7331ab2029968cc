# SPDX-License-Identifier: BSD-3-Clause
"""docs/protocol.md against proto/rlock.proto: every message field documented.

    protocol_doc_check.py PROTO DOC

Reads every message of the schema (its fields by number and name, oneof
members included) and every field table of the protocol document (a line
`**Name**` followed by a table whose rows start `| N | \\`field\\` |`). Fails
when a message with fields has no table, when a table lists a field the
schema does not have (or under another number), or leaves one out. Prints
what it compared.
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


def doc_tables(path):
    tables = {}
    name = None
    row = re.compile(r"^\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|")
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        m = re.match(r"^\*\*(\w+)\*\*", line)
        if m:
            name = m.group(1)
            continue
        if line.startswith("#"):
            name = None
            continue
        if name is None:
            continue
        r = row.match(line)
        if r:
            tables.setdefault(name, {})[int(r.group(1))] = r.group(2)
        elif tables.get(name) and not line.startswith("|"):
            name = None  # the table after the heading has ended
    return tables


def main():
    proto, doc = sys.argv[1:3]
    messages = schema_fields(proto)
    tables = doc_tables(doc)
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
    for name in sorted(set(tables) - set(messages)):
        problems.append("%s: a table in the document, no such message in the schema" % name)
    checked = sum(1 for f in messages.values() if f)
    print("protocol_doc_check: %d messages with fields, %d fields, %d tables" %
          (checked, sum(len(f) for f in messages.values()), len(tables)))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
