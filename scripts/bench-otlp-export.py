#!/usr/bin/env python3
"""`ringtrace export --to otlp://` throughput into a running Jaeger: spans per second,
and the CPU each side spends per span, to tell which one is the limit. Stdlib only.

    python3 scripts/bench-otlp-export.py RINGTRACE TRACE JAEGER_DIR OTLP [ROUNDS]

RINGTRACE: the command (target/release/ringtrace); TRACE: a trace file to send (the
flight_recorder example's dump); JAEGER_DIR: the directory `scripts/jaeger.sh start`
was given (its `pid` file names the process whose CPU is read from /proc); OTLP:
otlp://HOST:PORT or otlp+http://HOST:PORT. Each round sends the trace under a service
name of its own (new ids, so Jaeger stores every span). The figures are the medians of
the rounds: wall spans/s; the command's CPU (user + system, from wait4) and Jaeger's
(from /proc/PID/stat, the round's difference) in ns per span; and each side's CPU per
wall second, in cores: the side near a whole core (or near the machine's) is the limit.
"""

import os
import re
import statistics
import subprocess
import sys
import time


def jaeger_cpu(pid):
    """Jaeger's user + system CPU so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ringtrace, trace, jaeger_dir, otlp = sys.argv[1:5]
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 7
    with open(os.path.join(jaeger_dir, "pid")) as f:
        pid = int(f.read().split()[0])
    rows = []
    for r in range(rounds):
        service = f"bench-otlp-{os.getpid()}-{r}-{time.time_ns()}"
        j0, t0 = jaeger_cpu(pid), time.monotonic()
        child = subprocess.Popen(
            [ringtrace, "export", trace, "--to", otlp, "--service", service, "--signals", "traces"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        err = child.stderr.read().decode()
        _, status, usage = os.wait4(child.pid, 0)
        wall, jcpu = time.monotonic() - t0, jaeger_cpu(pid) - j0
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"bench-otlp-export: the export failed: {err}")
        m = re.search(r"delivered (\d+) of (\d+) spans in (\d+) batches", err)
        spans = int(m.group(1))
        cpu = usage.ru_utime + usage.ru_stime
        rows.append((spans / wall, cpu * 1e9 / spans, jcpu * 1e9 / spans, cpu / wall, jcpu / wall, int(m.group(3))))
    med = [statistics.median(c) for c in zip(*rows)]
    print(
        f"otlp-export {otlp.split(':')[0]}: {rows[0][5]} batches a round, {rounds} rounds: "
        f"{med[0]:,.0f} spans/s wall; ringtrace {med[1]:,.0f} CPU ns/span ({med[3]:.2f} cores), "
        f"Jaeger {med[2]:,.0f} CPU ns/span ({med[4]:.2f} cores); "
        f"{1e9 / med[1]:,.0f} spans/s per core of ringtrace's"
    )


if __name__ == "__main__":
    main()
