#!/usr/bin/env python3
"""Reads a `ringtrace export --format ctf` directory with babeltrace2 (EfficiOS's CTF
reader) and checks it against `ringtrace decode --format json` of the same trace: the
same number of events, each with the same time (to the nanosecond), thread, event class
(TARGET:NAME of its callsite) and field values.

    python3 scripts/check-ctf.py CTF_DIR DECODED.jsonl
"""

import json
import re
import subprocess
import sys

LINE = re.compile(r"^\[(\d\d:\d\d:\d\d\.\d{9})\] \(\S+\) \S+ (.+?): \{ tid = (\d+) \}, \{ (.*) \}$")


def fields(text):
    """Tokenizes babeltrace2's `name = value, ...` (strings quoted, with escapes)."""
    out, i = {}, 0
    while i < len(text):
        eq = text.index(" = ", i)
        name = text[i:eq]
        i = eq + 3
        if text[i] == '"':
            j, s = i + 1, []
            while text[j] != '"':
                if text[j] == "\\":
                    j += 1
                s.append(text[j])
                j += 1
            out[name] = "".join(s)
            i = j + 1
        else:
            j = text.find(", ", i)
            j = len(text) if j < 0 else j
            out[name] = text[i:j]
            i = j
        if text.startswith(", ", i):
            i += 2
    return out


def same(expected, got):
    """A decoded field (JSON) against babeltrace2's text of it. decode's JSON writes
    64-bit integers past 2^53 - 1 and 128-bit ones as decimal strings; babeltrace2
    prints integers bare and strings quoted (the quotes gone here): either way the
    same digits."""
    if isinstance(expected, bool):
        return got == str(int(expected))
    if isinstance(expected, int):
        return int(got) == expected
    if isinstance(expected, float):
        return abs(float(got) - expected) <= 1e-6 * max(1.0, abs(expected))
    return got == expected


def main():
    ctf, decoded = sys.argv[1], sys.argv[2]
    out = subprocess.run(["babeltrace2", "--clock-gmt", ctf], check=True, capture_output=True, text=True).stdout
    got = []
    for line in out.splitlines():
        m = LINE.match(line)
        assert m, f"babeltrace2 printed a line this check cannot read: {line}"
        time, name, tid, body = m.groups()
        if not name.startswith("ringtrace:"):
            got.append((time, int(tid), name, fields(body)))
    want = []
    with open(decoded) as f:
        for line in f:
            o = json.loads(line)
            if "lost" in o:
                continue
            # `time` is the wall-clock time; `ts_ns` (a decimal string) the clock's.
            assert o["ts_ns"].isdigit(), o
            want.append((o["time"][11:29], o["tid"], f'{o["target"]}:{o["name"]}', o["fields"]))
    assert len(got) == len(want), f"babeltrace2 read {len(got)} events, decode {len(want)}"
    key = lambda e: (e[0], e[1], e[2])
    for g, w in zip(sorted(got, key=key), sorted(want, key=key)):
        assert g[:3] == w[:3], (g, w)
        assert len(g[3]) == len(w[3]), (g, w)
        for (k, v), (gk, gv) in zip(w[3].items(), g[3].items()):
            assert same(v, gv), (k, v, gk, gv)
    print(f"ctf check: babeltrace2 read {len(got)} events, each as decoded")


if __name__ == "__main__":
    main()
