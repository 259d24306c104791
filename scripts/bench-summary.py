#!/usr/bin/env python3
"""README's benchmark count ("Of N targets, M are met."), computed, not typed.

    python3 scripts/bench-summary.py           # rewrites README.md's marked sentence
    python3 scripts/bench-summary.py --check   # fails (1) if README.md says otherwise

The count is taken from the verdict tables of docs/benchmark.md: every Markdown table
whose header has a `target` and a `verdict` column, each of its rows one target, met
where its verdict is `met`. Those tables are the bench's own verdict output of its
full run (`ringtrace-bench`, 11 rounds), as recorded there; a target is counted once
per row. README.md holds the sentence between the markers
`<!-- bench-summary -->` and `<!-- /bench-summary -->`.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- bench-summary -->", "<!-- /bench-summary -->"


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def verdicts(text):
    """Every target row's verdict in the verdict tables of `text`, in order."""
    out, columns = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        row = cells(line)
        if columns is None:
            columns = row
            continue
        if set(row) <= {"---", ""} or all(re.fullmatch(r":?-+:?", c) for c in row):
            continue
        if "target" in columns and "verdict" in columns and len(row) == len(columns):
            out.append(row[columns.index("verdict")])
    return out


def sentence(found):
    met = sum(v == "met" for v in found)
    return f"Of {len(found)} targets, {met} are met."


def main(argv):
    with open(os.path.join(ROOT, "docs", "benchmark.md"), encoding="utf-8") as f:
        found = verdicts(f.read())
    if not found:
        print("bench-summary: docs/benchmark.md has no verdict table (columns `target` and `verdict`)", file=sys.stderr)
        return 1
    want = sentence(found)
    path = os.path.join(ROOT, "README.md")
    with open(path, encoding="utf-8") as f:
        readme = f.read()
    m = re.search(re.escape(BEGIN) + r"(.*?)" + re.escape(END), readme, re.S)
    if m is None:
        print(f"bench-summary: README.md has no {BEGIN} ... {END} sentence", file=sys.stderr)
        return 1
    if "--check" in argv[1:]:
        if m.group(1) != want:
            print(
                f"bench-summary: README.md says {m.group(1)!r}; docs/benchmark.md's verdict tables give {want!r} "
                "(python3 scripts/bench-summary.py rewrites it)",
                file=sys.stderr,
            )
            return 1
        print(f"bench-summary: README.md agrees with docs/benchmark.md: {want}")
        return 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(readme[: m.start(1)] + want + readme[m.end(1) :])
    print(f"bench-summary: README.md: {want}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
