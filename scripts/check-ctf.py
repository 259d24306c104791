#!/usr/bin/env python3
"""Checks a `ringtrace export --format ctf` directory against `ringtrace decode --format
json` of the same trace, event by event, with two readers of the CTF:

* this project's own CTF 1.8 reader (scripts/ctfread.py), which parses the metadata's
  TSDL and decodes the stream files itself: each stream's events in their order
  against decode's events of that thread in its order (class TARGET:NAME of the
  callsite, the clock's value against `ts_ns` and the wall-clock time against `time`,
  to the nanosecond; each field's name, type and value), and the packets'
  `events_discarded` counts against decode's `lost` lines;
* babeltrace2 (EfficiOS's CTF reader, the outside one): each event's time, thread,
  class and field values against decode's.

A known babeltrace2 defect: babeltrace2 2.0.4 (the version Debian packages) prints an
empty string field as a value an earlier event of the same event class held in that
field, for some of the events after the first ones of the class: its event objects are
recycled, and reading an empty string leaves the old text in place. In a reproduction
(one event class, 7 events with non-empty strings then 293 with empty ones), 133 of the
293 empty strings printed as one of the 7 earlier values. This check accepts such a
disagreement only where decode has the empty string, babeltrace2's text is a value an
earlier event of that class held in that field, and this project's reader read the
empty string there; each is counted and reported. Any other disagreement fails.

    python3 scripts/check-ctf.py CTF_DIR DECODED.jsonl

Exit status 0 when both readers agree with decode; 1, with what differs, otherwise.
"""

import json
import math
import os
import re
import subprocess
import sys

# The reader beside this script, imported without leaving a __pycache__ in scripts/.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctfread  # noqa: E402

OWN = "this project's CTF reader (scripts/ctfread.py)"
LINE = re.compile(r"^\[(\d\d:\d\d:\d\d\.\d{9})\] \(\S+\) \S+ (.+?): \{ tid = (\d+) \}, \{ (.*) \}$")
U32_MAX = 2**32 - 1


class Mismatch(Exception):
    pass


def fail(msg):
    print(f"ctf check: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def ident(name):
    """A field name as the export makes it a TSDL identifier."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "_" + out if out == "" or out[0].isdigit() else out


def expected_names(names):
    """The export's field names: identifiers, `_N` added to the Nth of names alike."""
    seen, out = {}, []
    for n in names:
        i = ident(n)
        seen[i] = seen.get(i, 0) + 1
        out.append(i if seen[i] == 1 else f"{i}_{seen[i]}")
    return out


def escaped(s):
    """A string as the export writes it into the stream (its escaping)."""
    return s.replace("\\", "\\\\").replace("\0", "\\0")


def same_value(want, got, ty):
    """decode's JSON value `want` against the value this reader read, of CTF type `ty`."""
    if isinstance(ty, ctfread.String):
        return isinstance(want, str) and got == want
    if isinstance(ty, ctfread.Float):
        if isinstance(want, str):
            special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
            if want not in special:
                return False
            want = special[want]
        if isinstance(want, bool) or not isinstance(want, (int, float)):
            return False
        return (math.isnan(want) and math.isnan(got)) or float(want) == got
    if isinstance(ty, ctfread.Int):
        if isinstance(want, bool):
            return ty.size == 8 and not ty.signed and got == int(want)
        if isinstance(want, str):
            # decode writes integers past 2^53 - 1 as decimal strings.
            return re.fullmatch(r"-?\d+", want) is not None and int(want) == got
        return isinstance(want, int) and want == got
    return False


def decoded(path):
    """decode's lines: ({tid: [event]}, {thread label: [("event", tid, o) | ("lost", n)]})."""
    by_tid, by_label = {}, {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            o = json.loads(line)
            label = o["thread"]
            if "lost" in o:
                by_label.setdefault(label, []).append(("lost", o["lost"]))
                continue
            assert o["ts_ns"].isdigit(), f"{path}:{n}: ts_ns {o['ts_ns']!r}"
            if "tid" in o:
                tid = o["tid"]
            else:
                # No thread: the export's stream is the lane's, numbered down from 2^32 - 1.
                m = re.fullmatch(r"lane-(\d+)", label)
                assert m, f"{path}:{n}: an event without a tid on thread {label!r}"
                tid = U32_MAX - int(m.group(1))
            o["_line"] = n
            by_tid.setdefault(tid, []).append(o)
            by_label.setdefault(label, []).append(("event", tid, o))
    return by_tid, by_label


def merged(seq):
    """Consecutive losses as one (a packet carries one count, however many were merged)."""
    out = []
    for kind, *rest in seq:
        if kind == "lost" and out and out[-1][0] == "lost":
            out[-1] = ("lost", out[-1][1] + rest[-1])
        else:
            out.append((kind, *rest))
    return out


SPAN_EVENTS = ("ringtrace:span_enter", "ringtrace:span_exit")


def with_spans(items):
    """The stream's items without its span entries and exits, each event given the spans
    it is in (`spans`: [(id, name)], outermost first) from the entries and exits before it."""
    stack, out, entered = [], [], set()
    for it in items:
        if isinstance(it, ctfread.Event) and it.name == SPAN_EVENTS[0]:
            stack.append((ctfread.field(it.fields, "id"), ctfread.field(it.fields, "name")))
            entered.add(stack[-1][0])
        elif isinstance(it, ctfread.Event) and it.name == SPAN_EVENTS[1]:
            sid = ctfread.field(it.fields, "id")
            # An exit whose entry the trace no longer holds leaves the stack as it is.
            at = [i for i, (s, _) in enumerate(stack) if s == sid]
            if at:
                del stack[at[-1]]
        else:
            if isinstance(it, ctfread.Event):
                it.spans = list(stack)
                it.entered = set(entered)
            out.append(it)
    return out


def check_event(ev, o, where):
    """One event this reader read against decode's line `o`."""
    name = f'{o["target"]}:{o["name"]}' if "name" in o else None
    if name is not None and ev.name != name:
        raise Mismatch(f"{where}: class {ev.name!r}, decode line {o['_line']} has {name!r}")
    if name is None and not re.fullmatch(r"callsite\d+", ev.name or ""):
        raise Mismatch(f"{where}: class {ev.name!r} for an event without a callsite (decode line {o['_line']})")
    if ev.cycles != int(o["ts_ns"]):
        raise Mismatch(f"{where} ({ev.name}): clock value {ev.cycles}, decode line {o['_line']} has ts_ns {o['ts_ns']}")
    if ctfread.rfc3339(ev.wall_ns) != o["time"]:
        raise Mismatch(f"{where} ({ev.name}): time {ctfread.rfc3339(ev.wall_ns)}, decode line {o['_line']} has {o['time']}")
    spans = [(int(s["id"]), s["name"]) for s in o["spans"]]
    # A flight recorder overwrites its oldest records first: the records that entered an
    # event's outermost spans may be gone while the event is kept (decode names them from
    # the event's own record). Those spans, never entered earlier in this stream, are
    # missing here; the spans this stream did enter must be exactly the rest.
    k = len(spans) - len(ev.spans)
    lost = spans[:k] if k >= 0 else []
    # `?`: a span whose `new span` record the trace no longer holds (its name unknown).
    if (
        k < 0
        or [i for i, _ in ev.spans] != [i for i, _ in spans[k:]]
        or any(i in ev.entered for i, _ in lost)
        or any(g not in ("?", w) for (_, g), (_, w) in zip(ev.spans, spans[k:]))
    ):
        raise Mismatch(f"{where} ({ev.name}): in spans {ev.spans} (span_enter and span_exit), decode line {o['_line']} has {spans}")
    want = list(o["fields"].items())
    if len(want) != len(ev.fields):
        raise Mismatch(f"{where} ({ev.name}): {len(ev.fields)} fields {[n for n, _, _ in ev.fields]}, decode line {o['_line']} has {len(want)}: {o['fields']}")
    for (wname, wval), xname, (gname, gval, gty) in zip(want, expected_names([n for n, _ in want]), ev.fields):
        if gname != xname:
            raise Mismatch(f"{where} ({ev.name}): field {gname!r}, decode line {o['_line']} has {wname!r} (exported as {xname!r})")
        if not same_value(wval, gval, gty):
            raise Mismatch(f"{where} ({ev.name}) field {gname}: read {gval!r} ({type(gty).__name__}), decode line {o['_line']} has {wval!r}")


def check_own(ctf, streams, by_tid, by_label):
    """Every stream against decode; returns the counts of what was read: events, their
    strings, the empty ones, events discarded."""
    stats = {"events": 0, "strings": 0, "empty": 0, "lost": 0}
    label_of = {}
    for label, seq in by_label.items():
        for item in seq:
            if item[0] == "event":
                label_of.setdefault(item[1], set()).add(label)
    tids_of = {}
    for tid, labels in label_of.items():
        for label in labels:
            tids_of.setdefault(label, set()).add(tid)
    seen_tids = set()
    pooled_own, pooled_decode = 0, 0
    for name, (tid, items) in streams.items():
        where = f"{OWN}: {os.path.join(ctf, name)}"
        if tid is None:
            raise Mismatch(f"{where}: no tid in its packet context")
        if tid in seen_tids:
            raise Mismatch(f"{where}: a second stream of tid {tid}")
        seen_tids.add(tid)
        items = with_spans(items)
        events = [it for it in items if isinstance(it, ctfread.Event)]
        labels = label_of.get(tid, set())
        whole = len(labels) == 1 and len(tids_of[next(iter(labels))]) == 1
        if whole:
            # The thread's events and losses, interleaved as decode has them.
            want = merged(by_label[next(iter(labels))])
            got = merged([("lost", it.count) if isinstance(it, ctfread.Lost) else ("event", it) for it in items])
        else:
            # A thread label shared by several tids (or none): events alone, losses pooled.
            want = [("event", tid, o) for o in by_tid.get(tid, [])]
            got = [("event", it) for it in events]
            pooled_own += sum(it.count for it in items if isinstance(it, ctfread.Lost))
        if len(got) != len(want):
            raise Mismatch(f"{where}: {len(events)} events and {len(got) - len(events)} loss counts, decode has {len(want)} entries for tid {tid}")
        for i, (g, w) in enumerate(zip(got, want)):
            at = f"{where}, entry {i}"
            if g[0] != w[0]:
                raise Mismatch(f"{at}: {g[0]}, decode has {w[0]} ({w[-1] if w[0] == 'lost' else 'line ' + str(w[2]['_line'])})")
            if g[0] == "lost":
                if g[1] != w[1]:
                    raise Mismatch(f"{at}: {g[1]} events discarded, decode has {w[1]} lost")
                stats["lost"] += g[1]
                continue
            check_event(g[1], w[2], at)
            stats["events"] += 1
            for _, v, ty in g[1].fields:
                if isinstance(ty, ctfread.String):
                    stats["strings"] += 1
                    stats["empty"] += v == ""
    missing = set(by_tid) - seen_tids
    if missing:
        raise Mismatch(f"{OWN}: {ctf} has no stream for tid(s) {sorted(missing)}, which decode has events of")
    for label, seq in by_label.items():
        if not (label in tids_of and len(tids_of[label]) == 1 and len(label_of[next(iter(tids_of[label]))]) == 1):
            pooled_decode += sum(item[1] for item in seq if item[0] == "lost")
    if pooled_own != pooled_decode:
        raise Mismatch(f"{OWN}: {pooled_own} events discarded in streams of shared thread names, decode has {pooled_decode} lost")
    stats["lost"] += pooled_own
    return stats


def bt_fields(text):
    """Tokenizes babeltrace2's `name = value, ...` (strings quoted, with escapes):
    [(name, text, was it quoted)]."""
    out, i = [], 0
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
            out.append((name, "".join(s), True))
            i = j + 1
        else:
            j = text.find(", ", i)
            j = len(text) if j < 0 else j
            out.append((name, text[i:j], False))
            i = j
        if text.startswith(", ", i):
            i += 2
    return out


def bt_same(value, ty, text, quoted, escaped_strings):
    """This reader's value (already checked against decode) against babeltrace2's text."""
    if isinstance(ty, ctfread.String):
        return quoted and text == (escaped(value) if escaped_strings else value)
    if quoted:
        return False
    if isinstance(ty, ctfread.Int):
        return re.fullmatch(r"-?\d+", text) is not None and int(text) == value
    try:
        got = float(text)
    except ValueError:
        return False
    if math.isnan(value) or math.isinf(value):
        return (math.isnan(value) and math.isnan(got)) or got == value
    # babeltrace2 prints doubles rounded.
    return abs(got - value) <= 1e-6 * max(1.0, abs(value))


def check_babeltrace(ctf, meta, streams):
    """babeltrace2's reading against this reader's (itself checked against decode)."""
    try:
        run = subprocess.run(["babeltrace2", "--clock-gmt", ctf], capture_output=True, text=True)
    except FileNotFoundError:
        fail("babeltrace2 is not installed (Debian: apt-get install babeltrace2)")
    if run.returncode != 0:
        fail(f"babeltrace2 {ctf} exited with {run.returncode}: {run.stderr.strip()}")
    got = []
    for line in run.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            raise Mismatch(f"babeltrace2 printed a line this check cannot read: {line}")
        time, name, tid, body = m.groups()
        if name not in SPAN_EVENTS:
            got.append((time, int(tid), name, bt_fields(body)))
    own = []
    for tid, items in streams.values():
        for it in items:
            if isinstance(it, ctfread.Event) and it.name not in SPAN_EVENTS:
                own.append((ctfread.rfc3339(it.wall_ns)[11:29], tid, it.name, it))
    if len(got) != len(own):
        raise Mismatch(f"babeltrace2 read {len(got)} events, {OWN} {len(own)} (as decode)")
    key = lambda e: (e[0], e[1], e[2])  # noqa: E731
    # Values each class held in each string field so far, in babeltrace2's order.
    earlier = {}
    defect = 0
    for n, (g, w) in enumerate(zip(sorted(got, key=key), sorted(own, key=key))):
        ev = w[3]
        if g[:3] != w[:3]:
            raise Mismatch(f"babeltrace2's event {n} is {g[:3]}, decode's {w[:3]}")
        if [f[0] for f in g[3]] != [f[0] for f in ev.fields]:
            raise Mismatch(f"babeltrace2's event {n} ({ev.name}) has fields {[f[0] for f in g[3]]}, decode {[f[0] for f in ev.fields]}")
        for i, ((fname, text, quoted), (_, value, ty)) in enumerate(zip(g[3], ev.fields)):
            held = earlier.setdefault((ev.id, i), set())
            if not bt_same(value, ty, text, quoted, meta.escaped_strings):
                known = isinstance(ty, ctfread.String) and value == "" and quoted and text != "" and text in held
                if not known:
                    raise Mismatch(f"babeltrace2's event {n} ({ev.name} at {g[0]}, tid {g[1]}) field {fname}: {text!r}, decode has {value!r}")
                # babeltrace2 2.0.4's recycled string (see the module's docs); this
                # project's reader read the empty string there, as decode has it.
                defect += 1
            if isinstance(ty, ctfread.String):
                held.add(escaped(value) if meta.escaped_strings else value)
    return len(got), defect


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().split("\n\n")[-2], file=sys.stderr)
        sys.exit(2)
    ctf, jsonl = sys.argv[1], sys.argv[2]
    by_tid, by_label = decoded(jsonl)
    try:
        meta, streams = ctfread.read(ctf)
    except (ctfread.CtfError, OSError) as e:
        fail(f"{OWN}: {e}")
    try:
        s = check_own(ctf, streams, by_tid, by_label)
        print(
            f"ctf check: {OWN} read {s['events']} events ({s['strings']} strings, {s['empty']} empty) "
            f"and {s['lost']} events discarded, each as decoded"
        )
        n, defect = check_babeltrace(ctf, meta, streams)
    except Mismatch as e:
        fail(str(e))
    note = ""
    if defect:
        note = (
            f"; {defect} empty strings it printed as an earlier event's value (babeltrace2 2.0.4's "
            f"recycled strings) were read empty by {OWN}, as decoded"
        )
    print(f"ctf check: babeltrace2 read {n} events, each as decoded{note}")


if __name__ == "__main__":
    main()
