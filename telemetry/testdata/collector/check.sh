#!/bin/bash
# check.sh: export a traced run to a real OpenTelemetry collector (Jaeger)
# and check the trace it stored, through Jaeger's query API.
#
#   telemetry/testdata/collector/check.sh JAEGER [SKEIN]
#
# JAEGER is a Jaeger v2 binary (OTLP/HTTP on :4318, the query API on
# :16686), e.g. built with the Go module proxy:
#   go install github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0
# (when `go install` refuses the module's replace directives, build it
# from a scratch module that requires it). SKEIN is a skein binary
# (default: built from this tree). The check runs trip.star (a workflow
# whose agent stage calls a tool, spawns a sub-agent and has a tool
# fail; mock provider) twice, plain and gzip, each under its own
# OTEL_SERVICE_NAME, then fetches GET /api/traces?service=... and
# checks that each service holds exactly one trace whose span tree is
# the work's, with the GenAI attributes and the session id; it prints
# the tree. A manual check (not part of .ci/run: Jaeger is a large
# build), documented in docs/tracing.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
jaeger=${1:?usage: check.sh JAEGER [SKEIN]}
skein=${2:-}
work=$(mktemp -d)
jp=
trap '[ -n "$jp" ] && kill $jp && wait $jp 2>/dev/null; rm -rf "$work"' EXIT
if [ -z "$skein" ]; then
	(cd "$here/../../.." && go build -o "$work/skein" ./cmd/skein)
	skein=$work/skein
fi
"$jaeger" > "$work/jaeger.log" 2>&1 &
jp=$!
for _ in $(seq 1 120); do
	curl -sf -o /dev/null http://127.0.0.1:16686/api/services && break
	sleep 0.5
done
run=$$
for mode in plain gzip; do
	comp=none
	[ $mode = gzip ] && comp=gzip
	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_EXPORTER_OTLP_COMPRESSION=$comp \
		OTEL_SERVICE_NAME=skein-check-$mode-$run "$skein" run --store memory "$here/trip.star"
done
sleep 2 # Jaeger's in-memory store is written asynchronously
for mode in plain gzip; do
	curl -sf "http://127.0.0.1:16686/api/traces?service=skein-check-$mode-$run&limit=20" > "$work/$mode.json"
done
python3 - "$work/plain.json" "$work/gzip.json" <<'PY'
import json, sys

WANT = """invoke_workflow trip
  stage plan
    invoke_agent
      chat
      execute_tool lookup
      execute_tool delegate
        invoke_agent
          chat
      execute_tool broken
      chat"""

ok = True
def check(cond, what):
    global ok
    if not cond:
        ok = False
        print("FAIL:", what)

for path in sys.argv[1:]:
    data = json.load(open(path))["data"]
    check(len(data) == 1, f"{path}: {len(data)} traces, want 1")
    if not data:
        continue
    t = data[0]
    spans = {s["spanID"]: s for s in t["spans"]}
    kids, roots = {}, []
    for s in t["spans"]:
        parents = [r["spanID"] for r in s.get("references", []) if r["refType"] == "CHILD_OF"]
        (kids.setdefault(parents[0], []) if parents and parents[0] in spans else roots).append(s)
    tags = lambda s: {x["key"]: x["value"] for x in s["tags"]}
    lines = []
    def walk(s, d):
        lines.append("  " * d + s["operationName"])
        for c in sorted(kids.get(s["spanID"], []), key=lambda x: x["startTime"]):
            walk(c, d + 1)
    for r in roots:
        walk(r, 0)
    tree = "\n".join(lines)
    print(f"{path.rsplit('/', 1)[-1]}: trace {t['traceID']}, {len(t['spans'])} spans, service {t['processes'][t['spans'][0]['processID']]['serviceName']}")
    for line in lines:
        print("   ", line)
    check(len(roots) == 1 and tree == WANT, f"span tree:\n{tree}\nwant:\n{WANT}")
    by = {}
    for s in t["spans"]:
        by.setdefault(s["operationName"], []).append(tags(s))
    agents = by.get("invoke_agent", [])
    check(sorted(a.get("gen_ai.conversation.id", "") != "" for a in agents) == [True, True], "invoke_agent spans carry gen_ai.conversation.id")
    check(any(a.get("gen_ai.conversation.id") == "plan-session" for a in agents), "the stage's loop has session plan-session")
    check(all(a.get("gen_ai.operation.name") == "invoke_agent" and a.get("gen_ai.provider.name") == "mock" for a in agents), "invoke_agent attributes")
    stage = by.get("stage plan", [{}])[0]
    check(stage.get("gen_ai.conversation.id") == "plan-session" and stage.get("skein.workflow.stage_kind") == "agent", f"stage attributes {stage}")
    wf = by.get("invoke_workflow trip", [{}])[0]
    check(wf.get("gen_ai.operation.name") == "invoke_workflow" and wf.get("skein.workflow.run_id", "") != "", f"workflow attributes {wf}")
    chats = by.get("chat", [])
    check(len(chats) == 3, f"{len(chats)} chat spans")
    for c in chats:
        check(c.get("gen_ai.operation.name") == "chat" and c.get("gen_ai.provider.name") == "mock" and
              "gen_ai.usage.input_tokens" in c and
              "gen_ai.usage.output_tokens" in c and c.get("span.kind") == "client", f"chat attributes {c}")
    first = [c for c in chats if c.get("gen_ai.usage.input_tokens") == 11]
    check(len(first) == 1 and first[0].get("gen_ai.usage.output_tokens") == 7, "the first reply's tokens (11 in, 7 out)")
    check(any(c.get("gen_ai.response.model") == "child-model" for c in chats), "the sub-agent's reply model")
    for name in ("lookup", "delegate", "broken"):
        tool = by.get("execute_tool " + name, [{}])[0]
        check(tool.get("gen_ai.tool.name") == name and tool.get("gen_ai.tool.type") == "function" and
              tool.get("gen_ai.tool.call.id", "") != "", f"execute_tool {name} attributes {tool}")
    broken = by.get("execute_tool broken", [{}])[0]
    check(broken.get("error") is True and broken.get("otel.status_code") == "ERROR" and
          broken.get("error.type", "") != "", f"the failing tool's span is an error: {broken}")
    check(all(s["processID"] == t["spans"][0]["processID"] for s in t["spans"]), "one process (resource)")
    print("   ", "attributes: workflow", {k: wf[k] for k in wf if k.startswith(("gen_ai", "skein"))})
    print("   ", "attributes: first chat", {k: first[0][k] for k in first[0] if k.startswith("gen_ai")} if first else None)
    print("   ", "attributes: broken tool", {k: broken[k] for k in broken if k in ("error", "error.type", "otel.status_code", "otel.status_description", "gen_ai.tool.name")})
print("OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
