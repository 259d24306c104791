#!/usr/bin/env python3
"""Reads a `ringtrace export --format perfetto` file with Perfetto's own message
classes (the PyPI `perfetto` package's perfetto_trace_pb2, independent of the Rust
encoder) and checks it against `ringtrace decode --format json` of the same trace:
every event, in order, with its time, thread id, name and every field; and the sum of
the lost-event markers. decode's JSON writes `ts_ns` and integers past 2^53 - 1 as
decimal strings: they are compared as the integers they are.

    python3 scripts/check-perfetto.py TRACE.pftrace DECODED.jsonl
"""

import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

LOST = "ringtrace: events lost"


def same(decoded, annotation):
    """A decoded field against its debug annotation. decode's JSON writes 64-bit
    integers past 2^53 - 1 and 128-bit ones as decimal strings, the export as integers
    (64-bit) or text (128-bit): an integer and a decimal string of it are the same."""
    if isinstance(decoded, str) and isinstance(annotation, int) and not isinstance(annotation, bool):
        return decoded == str(annotation)
    if isinstance(decoded, int) and not isinstance(decoded, bool) and isinstance(annotation, str):
        return str(decoded) == annotation
    return decoded == annotation


def main():
    pftrace, decoded = sys.argv[1], sys.argv[2]
    trace = pb.Trace()
    with open(pftrace, "rb") as f:
        trace.ParseFromString(f.read())
    tracks, names, fields, strings, default_track = {}, {}, {}, {}, {}
    instants, lost = [], 0
    for p in trace.packet:
        seq = p.trusted_packet_sequence_id
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("thread"):
                tracks[d.uuid] = d.thread.tid
            continue
        if not p.HasField("track_event"):
            continue
        if p.sequence_flags & 1:  # SEQ_INCREMENTAL_STATE_CLEARED
            names[seq], fields[seq], strings[seq] = {}, {}, {}
        if p.trace_packet_defaults.track_event_defaults.HasField("track_uuid"):
            default_track[seq] = p.trace_packet_defaults.track_event_defaults.track_uuid
        for n in p.interned_data.event_names:
            names[seq][n.iid] = n.name
        for n in p.interned_data.debug_annotation_names:
            fields[seq][n.iid] = n.name
        for n in p.interned_data.debug_annotation_string_values:
            strings[seq][n.iid] = n.str.decode()
        e = p.track_event
        if e.type != pb.TrackEvent.TYPE_INSTANT:
            continue
        args = {}
        for a in e.debug_annotations:
            kind = a.WhichOneof("value")
            if kind == "string_value_iid":
                value = strings[seq][a.string_value_iid]
            else:
                value = getattr(a, kind)
            args[fields[seq][a.name_iid]] = value
        name = names[seq][e.name_iid]
        if name == LOST:
            lost += args["count"]
        else:
            track = e.track_uuid if e.HasField("track_uuid") else default_track[seq]
            instants.append((p.timestamp, tracks[track], name, args))
    events = []
    with open(decoded) as f:
        for line in f:
            o = json.loads(line)
            if "lost" in o:
                continue
            events.append(o)
    # A large trace is written in two halves whose packets interleave (each half's
    # sequences of their own): in time order, as decoded, with a stable sort.
    instants.sort(key=lambda i: i[0])
    assert len(instants) == len(events), f"{len(instants)} instants, {len(events)} events"
    for (ts, tid, name, args), o in zip(instants, events):
        assert ts == int(o["ts_ns"]), (ts, o)
        assert tid == o["tid"], (tid, o)
        assert name == o["fields"].get("message", o.get("name")), (name, o)
        for k, v in o["fields"].items():
            assert same(v, args[k]), (k, args[k], v)
        assert args["level"] == o["level"]
    print(f"perfetto check: {len(instants)} events and {lost} lost events, each as decoded")


if __name__ == "__main__":
    main()
