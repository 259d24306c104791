#!/usr/bin/env python3
"""Is a change slower? Two builds of ringtrace-bench, run in alternation.

    python3 scripts/bench-compare.py OLD_BIN NEW_BIN [--pairs N] [--filter NAME] [--full]

Each pair runs OLD then NEW (the order swaps every other pair), each with `--json`.
For every verdict target (the bench's own `verdict::TARGETS`, read back from its
table) the script takes each binary's median paired ratio in that run, then the
NEW/OLD quotient of those medians within the pair; the answer is the median of the
quotients over the pairs, with their range. It also reports ringtrace's own rows the
same way (NEW/OLD of median records/s, and of CPU ns per record where measured),
which moves less than a ratio to a noisy peer.

A quotient below 0.95 for a rate (above 1.05 for a time) is a change more than 5%
worse. Run it on an otherwise idle machine.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

VERDICT = re.compile(
    r"^\s*(?P<name>\S.*?)\s+(?P<target>(Mrec/s >=|ns/rec <=) \S+)\s+(?P<median>[0-9.]+)x?\s"
)


def run(binary, args, json_path):
    out = subprocess.run(
        [binary, *args, "--json", json_path], check=True, capture_output=True, text=True
    ).stdout
    verdicts = {}
    in_verdicts = False
    for line in out.splitlines():
        if "ringtrace row / peer row" in line:
            in_verdicts = True
            continue
        m = VERDICT.match(line) if in_verdicts else None
        if m:
            verdicts[m["name"].strip()] = (m["target"], float(m["median"]))
    rows = {}
    with open(json_path) as f:
        for line in f:
            r = json.loads(line)
            if r["impl"].startswith("ringtrace"):
                key = f'{r["bench"]}: {r["impl"]} {r["variant"]} p={r["producers"]}'
                rows.setdefault(key, []).append(r)
    own = {}
    for key, rs in rows.items():
        rate = statistics.median(r["mrec_per_s"] for r in rs)
        cpus = [r["cpu_ns_per_rec"] for r in rs if r.get("cpu_ns_per_rec") is not None]
        own[key] = (rate, statistics.median(cpus) if cpus else None)
    return verdicts, own


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--filter")
    p.add_argument("--full", action="store_true", help="full windows (default: --quick)")
    a = p.parse_args()
    args = [] if a.full else ["--quick"]
    if a.filter:
        args += ["--filter", a.filter]
    verdict_q, rate_q, cpu_q, targets = {}, {}, {}, {}
    tmp = tempfile.mkdtemp()
    for i in range(a.pairs):
        order = [("old", a.old), ("new", a.new)]
        if i % 2 == 1:
            order.reverse()
        got = {}
        for who, binary in order:
            print(f"pair {i + 1}/{a.pairs}: {who}", file=sys.stderr, flush=True)
            got[who] = run(binary, args, os.path.join(tmp, f"{who}-{i}.json"))
        (ov, oo), (nv, no) = got["old"], got["new"]
        for name in ov.keys() & nv.keys():
            targets[name] = ov[name][0]
            old, new = ov[name][1], nv[name][1]
            if old > 0:
                verdict_q.setdefault(name, []).append((old, new, new / old))
        for key in oo.keys() & no.keys():
            if oo[key][0] > 0:
                rate_q.setdefault(key, []).append(no[key][0] / oo[key][0])
            if oo[key][1] and no[key][1]:
                cpu_q.setdefault(key, []).append(no[key][1] / oo[key][1])

    print(f"{a.pairs} pairs, {'full' if a.full else 'quick'} mode; NEW/OLD, median over pairs [min-max]")
    print("\nverdict targets (each binary's median paired ratio):")
    w = max((len(n) for n in verdict_q), default=10)
    for name, qs in verdict_q.items():
        q = [x[2] for x in qs]
        olds = " ".join(f"{x[0]:.2f}" for x in qs)
        news = " ".join(f"{x[1]:.2f}" for x in qs)
        print(f"  {name:<{w}}  {targets[name]:<16} old {olds:<20} new {news:<20} "
              f"{statistics.median(q):.3f} [{min(q):.3f}-{max(q):.3f}]")
    print("\nringtrace's own rows (records/s; CPU ns per record):")
    w = max((len(n) for n in rate_q), default=10)
    for key in sorted(rate_q):
        q = rate_q[key]
        line = f"  {key:<{w}}  rate {statistics.median(q):.3f} [{min(q):.3f}-{max(q):.3f}]"
        if key in cpu_q:
            c = cpu_q[key]
            line += f"  cpu {statistics.median(c):.3f} [{min(c):.3f}-{max(c):.3f}]"
        print(line)


if __name__ == "__main__":
    main()
