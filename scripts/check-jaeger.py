#!/usr/bin/env python3
"""Sends `ringtrace export --format otlp-json` output to a running Jaeger (its OTLP/HTTP
receiver, JSON encoding), reads the traces back through Jaeger's HTTP query API and
compares them span by span with what was sent: trace and span ids, operation names,
services, parents, start times and durations (Jaeger keeps microseconds), every
attribute with its type, every span event with its fields. Stdlib only.

    python3 scripts/check-jaeger.py EXPORT.jsonl OTLP_HTTP_URL QUERY_URL
    python3 scripts/check-jaeger.py --no-post EXPORT.jsonl QUERY_URL

EXPORT.jsonl: the export's lines, each an ExportTraceServiceRequest (`resourceSpans`) or
an ExportLogsServiceRequest (`resourceLogs`). Every `resourceSpans` line is posted to
OTLP_HTTP_URL/v1/traces; log lines are not (Jaeger stores no logs). With --no-post
nothing is posted: the spans were delivered already (`ringtrace export --to otlp://...`)
and the check only reads them back (the OTLP_HTTP_URL, if given, is not used). The
spans of all lines are compared, each looked up under its resource's `service.name` (or
under --service NAME, for all of them), with Jaeger's copy of that service: the same
trace delivered again under another service name (the same trace and span ids) is one
trace in Jaeger that holds each span once per service.
"""

import argparse
import base64
import json
import sys
import time
import urllib.parse
import urllib.request

# How long Jaeger is given to make what it was sent queryable (its batch processor and
# storage are asynchronous to the receiver's answer).
READ_BACK_SECONDS = 60


def fail(message):
    sys.exit(f"jaeger check: {message}")


def post(url, body):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        if r.status != 200:
            fail(f"POST {url} answered {r.status}")
        answer = r.read()
    # An ExportTraceServiceResponse; a partial success names spans Jaeger refused.
    try:
        partial = json.loads(answer or b"{}").get("partialSuccess") or {}
    except ValueError:
        partial = {}
    if int(partial.get("rejectedSpans", 0) or 0):
        fail(f"POST {url}: Jaeger rejected {partial['rejectedSpans']} spans: {partial.get('errorMessage', '')}")


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
    fail(f"an attribute value of a kind this check does not know: {v}")


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


def read_export(path, service_override):
    """The export's lines: (the `resourceSpans` lines as bytes, {(trace, span): (service, span)},
    the number of log records)."""
    span_lines, spans, logs = [], {}, 0
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            doc = json.loads(line)
            if "resourceSpans" in doc:
                span_lines.append(line.rstrip(b"\n"))
                for rs in doc["resourceSpans"]:
                    attrs = tags(rs.get("resource", {}).get("attributes", []))
                    service = service_override or attrs.get("service.name", (None, None))[1]
                    if not service:
                        fail(f"{path}:{n}: a resource without service.name (give --service NAME)")
                    for ss in rs.get("scopeSpans", []):
                        for s in ss.get("spans", []):
                            key = (s["traceId"], s["spanId"])
                            if key in spans:
                                fail(f"{path}:{n}: span {s['spanId']} of trace {s['traceId']} exported twice")
                            spans[key] = (service, s)
            elif "resourceLogs" in doc:
                scopes = [sl for rl in doc["resourceLogs"] for sl in rl.get("scopeLogs", [])]
                logs += sum(len(sl.get("logRecords", [])) for sl in scopes)
            else:
                fail(f"{path}:{n}: neither resourceSpans nor resourceLogs: {sorted(doc)[:5]}")
    if not spans:
        fail(f"{path}: no spans to compare")
    return span_lines, spans, logs


def read_back(query, spans):
    """Jaeger's copies of the spans of the sent traces, {(trace, span): {service: jaeger
    span}}: each service queried over the spans' time range until every sent span is
    there under its service, or the time is up."""
    by_service = {}
    for service, s in spans.values():
        by_service.setdefault(service, set()).add(s["traceId"])
    starts = [int(s["startTimeUnixNano"]) for _, s in spans.values()]
    ends = [int(s["endTimeUnixNano"]) for _, s in spans.values()]
    # Microseconds, a second of margin either side.
    window = {"start": min(starts) // 1000 - 1_000_000, "end": max(ends) // 1000 + 1_000_000}
    deadline = time.monotonic() + READ_BACK_SECONDS
    while True:
        got = {}
        for service, traces in sorted(by_service.items()):
            # Traces of other runs may share the service: ask for plenty, keep ours.
            params = dict(window, service=service, limit=len(traces) + 1000)
            data = get(f"{query}/api/traces?{urllib.parse.urlencode(params)}")["data"] or []
            for t in data:
                if t["traceID"] not in traces:
                    continue
                processes = t.get("processes", {})
                for j in t["spans"]:
                    name = processes.get(j.get("processID"), {}).get("serviceName")
                    got.setdefault((t["traceID"], j["spanID"]), {})[name] = j
        if all(service in got.get(k, {}) for k, (service, _) in spans.items()) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def compare(key, s, j):
    problems = []
    if j["operationName"] != s["name"]:
        problems.append(f"name {j['operationName']!r} != {s['name']!r}")
    parents = [r["spanID"] for r in j.get("references", []) if r["refType"] == "CHILD_OF"]
    want_parent = [s["parentSpanId"]] if s.get("parentSpanId") else []
    if parents != want_parent:
        problems.append(f"parents {parents} != {want_parent}")
    start, end = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
    if j["startTime"] != start // 1000:
        problems.append(f"start {j['startTime']} != {start // 1000}")
    if abs(j["duration"] - (end - start) // 1000) > 1:
        problems.append(f"duration {j['duration']} != {(end - start) // 1000}")
    jt = jaeger_tags(j["tags"])
    for k, v in tags(s.get("attributes", [])).items():
        if jt.get(k) != v:
            problems.append(f"attribute {k}: {jt.get(k)} != {v}")
    logs = sorted(j.get("logs") or [], key=lambda l: l["timestamp"])
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
    if problems:
        fail(f"span {key[1]} ({s['name']}) of trace {key[0]}: " + "; ".join(problems[:5]))
    return len(evs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export", help="the otlp-json export, a request a line")
    ap.add_argument("urls", nargs="+", metavar="URL", help="OTLP_HTTP_URL QUERY_URL (with --no-post: QUERY_URL)")
    ap.add_argument("--no-post", action="store_true", help="send nothing: the spans are in Jaeger already")
    ap.add_argument("--service", metavar="NAME", help="look every span up under this service (and expect it)")
    args = ap.parse_args()
    if args.no_post and len(args.urls) == 1:
        otlp, query = None, args.urls[0]
    elif len(args.urls) == 2:
        otlp, query = args.urls
    else:
        ap.error("give OTLP_HTTP_URL QUERY_URL, or --no-post and QUERY_URL")
    query = query.rstrip("/")

    span_lines, spans, logs = read_export(args.export, args.service)
    if not args.no_post:
        for line in span_lines:
            post(f"{otlp.rstrip('/')}/v1/traces", line)

    got = read_back(query, spans)
    missing = [k for k, (service, _) in spans.items() if service not in got.get(k, {})]
    if missing:
        k = missing[0]
        services = sorted({spans[m][0] for m in missing})
        held = ", ".join(sorted(str(n) for n in got.get(k, {}))) or "no service"
        fail(
            f"sent {len(spans)} spans, {len(missing)} not in Jaeger under their service after "
            f"{READ_BACK_SECONDS} s (services {', '.join(services)}; first: span {k[1]} of trace {k[0]}, "
            f"held under {held})"
        )

    extra = [k for k in got if k not in spans]
    if extra:
        k = extra[0]
        fail(f"Jaeger holds {len(extra)} spans in the exported traces that the export has not (first {k[1]} of {k[0]})")

    events = 0
    for key, (service, s) in spans.items():
        events += compare(key, s, got[key][service])
    traces = {t for t, _ in spans}
    services = sorted({service for service, _ in spans.values()})
    how = "read back" if args.no_post else f"posted in {len(span_lines)} requests"
    print(
        f"jaeger check: {len(spans)} spans compared ({how}) in {len(traces)} traces of "
        f"{len(services)} services ({', '.join(services)}), {events} span events, each as exported; "
        f"{logs} log records not sent (Jaeger stores no logs)"
    )


main()
