#!/usr/bin/env python3
"""The slowest event traces of one hook, from what otlp_receiver.py kept.

Prints how many `hook.event` traces the hook has, their p50, p99 and maximum (from the
watch's receipt to the end of the run that handled the event), then the COUNT slowest
as trees of spans, each with its start after the root and its duration. Patches of one
run that were sent together show overlapping starts.

Usage: slowest_traces.py FILE HOOK [COUNT]
"""
import collections
import json
import sys

path, hook = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 3
HIDDEN = ("code.", "thread.", "target", "busy_ns", "idle_ns", "hook")

spans = {}
for line in open(path, "rb"):
    try:
        doc = json.loads(line)
    except ValueError:
        continue
    for resource in doc.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                attrs = {}
                for attr in span.get("attributes", []):
                    value = attr["value"]
                    attrs[attr["key"]] = next(iter(value.values())) if value else None
                spans[span["spanId"]] = {
                    "trace": span["traceId"],
                    "parent": span.get("parentSpanId", ""),
                    "name": span["name"],
                    "start": int(span["startTimeUnixNano"]),
                    "end": int(span["endTimeUnixNano"]),
                    "attrs": attrs,
                }

by_trace = collections.defaultdict(list)
for span_id, span in spans.items():
    by_trace[span["trace"]].append((span_id, span))
roots = sorted(
    (
        (span["end"] - span["start"], trace, span)
        for trace, members in by_trace.items()
        for _, span in members
        if span["name"] == "hook.event"
        and span["attrs"].get("hook") == hook
        and not span["parent"]
    ),
    key=lambda root: root[0],
    reverse=True,
)
durations = sorted(root[0] for root in roots)


def percentile(share):
    return durations[min(len(durations) - 1, int(share * len(durations)))] / 1e6


if not durations:
    sys.exit(f"no hook.event trace of {hook} in {path}")
print(
    f"{len(spans)} spans; {len(roots)} hook.event traces of {hook}: "
    f"p50 {percentile(0.5):.1f} ms, p99 {percentile(0.99):.1f} ms, "
    f"max {durations[-1] / 1e6:.1f} ms"
)
for duration, trace, root in roots[:count]:
    shown = {k: v for k, v in root["attrs"].items() if not k.startswith(HIDDEN)}
    print(f"\ntrace {trace}: {duration / 1e6:.1f} ms {shown}")
    children = collections.defaultdict(list)
    for span_id, span in by_trace[trace]:
        children[span["parent"]].append((span_id, span))

    def show(parent, depth):
        for span_id, span in sorted(children[parent], key=lambda c: c[1]["start"]):
            attrs = {
                k: v
                for k, v in span["attrs"].items()
                if not k.startswith(HIDDEN) and span["name"] != "hook.event"
            }
            offset = (span["start"] - root["start"]) / 1e6
            length = (span["end"] - span["start"]) / 1e6
            print(f"{'  ' * depth}{span['name']:<16} +{offset:7.1f} ms {length:7.1f} ms {attrs}")
            show(span_id, depth + 1)

    show("", 0)
