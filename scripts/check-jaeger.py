#!/usr/bin/env python3
"""Sends `ringtrace export --format otlp-json` output to a running Jaeger (its OTLP/HTTP
receiver, JSON encoding), reads the traces back through Jaeger's HTTP query API and
compares them span by span with what was sent: trace and span ids, operation names,
parents, start times and durations (Jaeger keeps microseconds), every attribute with
its type, every span event with its fields. Stdlib only.

    python3 scripts/check-jaeger.py EXPORT.jsonl OTLP_HTTP_URL QUERY_URL

EXPORT.jsonl: the export's lines (the first an ExportTraceServiceRequest). The service
name is read from the export's resource.
"""

import base64
import json
import sys
import time
import urllib.request


def post(url, body):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        if r.status != 200:
            sys.exit(f"jaeger check: POST {url} answered {r.status}")


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def otlp_value(v):
    """An OTLP/JSON AnyValue as Jaeger shows a tag: (type, value)."""
    if "stringValue" in v:
        return ("string", v["stringValue"])
    if "intValue" in v:
        return ("int64", int(v["intValue"]))
    if "doubleValue" in v:
        return ("float64", float(v["doubleValue"]))
    if "boolValue" in v:
        return ("bool", v["boolValue"])
    if "bytesValue" in v:
        # OTLP/JSON writes bytes in base64, as Jaeger's API does.
        return ("binary", v["bytesValue"])
    sys.exit(f"jaeger check: an attribute value of a kind this check does not know: {v}")


def tags(kvs):
    return {kv["key"]: otlp_value(kv["value"]) for kv in kvs}


def jaeger_tags(ts):
    out = {}
    for t in ts:
        value = t["value"]
        if t["type"] == "binary" and not isinstance(value, str):
            value = base64.b64encode(bytes(value)).decode()
        out[t["key"]] = (t["type"], value)
    return out


def main():
    export, otlp, query = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3].rstrip("/")
    with open(export) as f:
        first = f.readline()
    sent = json.loads(first)
    rs = sent["resourceSpans"][0]
    service = next(kv["value"]["stringValue"] for kv in rs["resource"]["attributes"] if kv["key"] == "service.name")
    spans = {s["spanId"]: s for ss in rs["scopeSpans"] for s in ss["spans"]}
    traces = {s["traceId"] for s in spans.values()}
    post(f"{otlp}/v1/traces", first.encode())

    deadline = time.monotonic() + 60
    got = {}
    while True:
        data = get(f"{query}/api/traces?service={service}&limit={len(traces) + 10}")["data"] or []
        got = {s["spanID"]: (t["traceID"], s) for t in data for s in t["spans"]}
        if len(got) >= len(spans) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if len(got) != len(spans):
        sys.exit(f"jaeger check: sent {len(spans)} spans of service {service}, Jaeger holds {len(got)}")

    events = 0
    for sid, s in spans.items():
        trace_id, j = got.get(sid, (None, None))
        if j is None:
            sys.exit(f"jaeger check: span {sid} ({s['name']}) not in Jaeger")
        problems = []
        if trace_id != s["traceId"]:
            problems.append(f"trace {trace_id} != {s['traceId']}")
        if j["operationName"] != s["name"]:
            problems.append(f"name {j['operationName']!r} != {s['name']!r}")
        parents = [r["spanID"] for r in j.get("references", []) if r["refType"] == "CHILD_OF"]
        want_parent = [s["parentSpanId"]] if s["parentSpanId"] else []
        if parents != want_parent:
            problems.append(f"parents {parents} != {want_parent}")
        start, end = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
        if j["startTime"] != start // 1000:
            problems.append(f"start {j['startTime']} != {start // 1000}")
        if abs(j["duration"] - (end - start) // 1000) > 1:
            problems.append(f"duration {j['duration']} != {(end - start) // 1000}")
        jt = jaeger_tags(j["tags"])
        for k, v in tags(s["attributes"]).items():
            if jt.get(k) != v:
                problems.append(f"attribute {k}: {jt.get(k)} != {v}")
        logs = sorted(j.get("logs", []), key=lambda l: l["timestamp"])
        evs = sorted(s.get("events", []), key=lambda e: int(e["timeUnixNano"]))
        if len(logs) != len(evs):
            problems.append(f"{len(logs)} logs != {len(evs)} events")
        for l, e in zip(logs, evs):
            lf = jaeger_tags(l["fields"])
            if lf.get("event") != ("string", e["name"]) or l["timestamp"] != int(e["timeUnixNano"]) // 1000:
                problems.append(f"event {e['name']!r} at {e['timeUnixNano']}: {lf.get('event')} at {l['timestamp']}")
            for k, v in tags(e.get("attributes", [])).items():
                if lf.get(k) != v:
                    problems.append(f"event {e['name']!r} field {k}: {lf.get(k)} != {v}")
            events += 1
        if problems:
            sys.exit(f"jaeger check: span {sid} ({s['name']}): " + "; ".join(problems[:5]))
    print(f"jaeger check: {len(spans)} spans in {len(traces)} traces and {events} span events, each as exported")


main()
