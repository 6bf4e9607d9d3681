package tests

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// requestsScript prints, for each call the TypeScript SDK might be given,
// the JSON protocol's request (JSON.stringify of {requested: {call}}) and
// the protobuf the SDK sends instead (pb.ts encodeRequested, base64), one
// JSON line each; a call encodeRequested refuses prints its error.
const requestsScript = `
import { encodeRequested } from %q;
const long = "x".repeat(300);
const cycle = { a: 1 }; cycle.self = cycle;
const cases = [
  { call_id: "c1", tool: "demo__echo", arguments: {} },
  { call_id: "c2", tool: "fs__write", arguments: { path: "/tmp/a\"b\\c\n\u0001é", n: 1.5, neg: -3, zero: 0, negzero: -0, big: 1e21, tiny: 5e-324,
      ok: true, no: false, nil: null, empty: "", emptyObj: {}, emptyList: [], "": "empty key", "ключ": "значение 🚀", long },
    reason: "because", thread_id: "t-1", revision: 300 },
  { call_id: "c3", tool: "demo__echo", arguments: { list: ["x", 2, null, undefined, () => 1, Symbol("s"), NaN, Infinity, [[]], { z: [1, { y: "w" }] }],
      skipped: undefined, fn: () => 1, nan: NaN, inf: -Infinity, when: new Date(Date.UTC(2026, 10, 29, 9, 30, 1, 250)),
      boxed: [new Number(4), new String("s"), new Boolean(false)], custom: { toJSON: (k) => "custom " + k } } },
  { call_id: "c4", tool: "demo__echo", arguments: { deep: { a: { b: { c: { d: { e: [ { f: "g" } ] } } } } } }, revision: 1 },
  { call_id: "c5", tool: "demo__echo", arguments: { big: 10n } },
  { call_id: "c6", tool: "demo__echo", arguments: cycle },
  { call_id: "c7", tool: "demo__echo", arguments: {}, revision: 1.5 },
  { call_id: "c8", tool: "demo__echo", arguments: { text: "a\ud800b" } },
  { call_id: "c9", tool: "demo__echo", arguments: { ["k\udc00"]: 1 } },
];
for (const call of cases) {
  let line;
  try {
    const pb = Buffer.from(encodeRequested(call)).toString("base64");
    const { call_id, tool, arguments: args, reason, thread_id, revision } = call;
    const json = JSON.stringify({ requested: { call: { call_id, tool, arguments: args, ...(reason ? { reason } : {}),
      ...(thread_id ? { thread_id } : {}), ...(revision ? { revision } : {}) } } });
    line = { id: call.call_id, json, pb };
  } catch (err) {
    line = { id: call.call_id, error: err.message };
  }
  console.log(JSON.stringify(line));
}
`

// TestTheTypeScriptSDKsProtobufRequestMeansItsJSONRequest: the TypeScript
// SDK requests over NATS in protobuf, and what it sends must mean what the
// JSON protocol's request of the same call means (JSON.stringify's
// reading of the arguments: toJSON, undefined and functions left out or
// null, non-finite numbers null), as airlock reads each (proto.Unmarshal,
// protojson). What JSON.stringify cannot write (a BigInt, a cycle), a
// revision that is not a uint32 and a lone surrogate (protojson refuses
// the JSON request; UTF-8 would turn it into U+FFFD) are refused before
// anything is sent.
func TestTheTypeScriptSDKsProtobufRequestMeansItsJSONRequest(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	node := builtTypeScriptSDK(t, dir)
	lines := runNodeScript(t, node, requestsScript, filepath.Join(dir, "dist", "src", "pb.js"))
	refused := map[string]string{"c5": "BigInt", "c6": "circular", "c7": "revision 1.5 is not a whole number",
		"c8": "lone UTF-16 surrogate", "c9": "lone UTF-16 surrogate"}
	if len(lines) != 9 {
		t.Fatalf("the script printed %d cases, want 9: %v", len(lines), lines)
	}
	for _, l := range lines {
		var c struct{ ID, JSON, PB, Error string }
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if want, ok := refused[c.ID]; ok {
			if !strings.Contains(c.Error, want) {
				t.Errorf("call %s: encodeRequested gave %q, want a refusal saying %q", c.ID, c.Error, want)
			}
			continue
		}
		if c.Error != "" {
			t.Errorf("call %s: encodeRequested refused it: %s", c.ID, c.Error)
			continue
		}
		fromJSON := &airlockv1.Event{}
		if err := protojson.Unmarshal([]byte(c.JSON), fromJSON); err != nil {
			t.Fatalf("call %s: protojson refuses the JSON request %s: %v", c.ID, c.JSON, err)
		}
		raw, _ := base64.StdEncoding.DecodeString(c.PB)
		fromPB := &airlockv1.Event{}
		if err := proto.Unmarshal(raw, fromPB); err != nil {
			t.Fatalf("call %s: the protobuf request does not decode: %v", c.ID, err)
		}
		if !proto.Equal(fromJSON, fromPB) {
			t.Errorf("call %s: the protobuf request means\n%v\nthe JSON request\n%v", c.ID, fromPB, fromJSON)
		}
		if fromPB.GetRequested().GetCall().GetArguments() == nil {
			t.Errorf("call %s: no arguments in %v", c.ID, fromPB)
		}
	}
}

// eventsScript reads lines {pb, json} (an end event in protobuf and in
// protojson, base64 and text) and prints, for each, whether pb.ts
// decodeEvent of the protobuf gives what JSON.parse of the protojson gives
// of every field the client reads (outcomeOf, eventOf, recorded: listed
// here, not taken from pb.ts, so a field its schema lost is caught), and
// both objects.
const eventsScript = `
import { decodeEvent } from %q;
import { createInterface } from "node:readline";
import { isDeepStrictEqual } from "node:util";
const reason = { reason: true };
const read = {
  agent_id: true, call_id: true, revision: true, actor: { id: true },
  requested: {}, denied: { decision: { reason: true } }, rejected: reason, changes_requested: { feedback: true },
  expired: {}, canceled: reason, invalid: reason, completed: { result_json: true, truncated: true },
  failed: { reason: true, outcome: true, message: true, result_json: true, truncated: true },
};
function project(v, fields) {
  const out = {};
  for (const [name, sub] of Object.entries(fields)) {
    if (v?.[name] === undefined) continue;
    out[name] = sub === true ? v[name] : project(v[name], sub);
  }
  return out;
}
for await (const line of createInterface({ input: process.stdin })) {
  const { pb, json } = JSON.parse(line);
  const mine = project(decodeEvent(Buffer.from(pb, "base64")), read);
  const theirs = project(JSON.parse(json), read);
  console.log(JSON.stringify({ same: isDeepStrictEqual(mine, theirs), mine, theirs }));
}
`

// TestTheTypeScriptSDKReadsProtobufEventsAsItReadsProtojson: every end
// event the client reads, with every field set (and fields it does not
// read, which it must skip), decodes from protobuf (pb.ts decodeEvent) to
// what JSON.parse gives of its protojson, for each field the client reads.
func TestTheTypeScriptSDKReadsProtobufEventsAsItReadsProtojson(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	node := builtTypeScriptSDK(t, dir)
	args, _ := structpb.NewStruct(map[string]any{"path": "/a", "n": 2.5, "list": []any{"x", true}})
	now := timestamppb.New(time.Date(2026, 11, 29, 9, 30, 1, 250_000_000, time.UTC))
	call := &airlockv1.ToolCall{CallId: "call_1", AgentId: "bot", Tool: "demo__echo", Arguments: args, Revision: 300, CreatedAt: now}
	decision := &airlockv1.Decision{Action: airlockv1.Action_ACTION_DENY, Reason: "secrets stay put — ключ", RuleId: "deny-secrets", Risk: airlockv1.Risk_RISK_HIGH,
		Timeout: durationpb.New(time.Hour), Approvers: []string{"alice"}, DecidedAt: now}
	long := strings.Repeat(`{"k":"ü"}`, 40)
	events := []*airlockv1.Event{
		{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: call, ReceivedAt: now}}},
		{Body: &airlockv1.Event_Denied{Denied: &airlockv1.Denied{Call: call, Decision: decision}}},
		{Body: &airlockv1.Event_Rejected{Rejected: &airlockv1.Rejected{Reason: "not today 🚫"}}},
		{Body: &airlockv1.Event_ChangesRequested{ChangesRequested: &airlockv1.ChangesRequested{Feedback: "use /tmp"}}},
		{Body: &airlockv1.Event_Expired{Expired: &airlockv1.Expired{Deadline: now}}},
		{Body: &airlockv1.Event_Canceled{Canceled: &airlockv1.Canceled{Reason: "withdrawn"}}},
		{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: long, Truncated: true, Latency: durationpb.New(3 * time.Millisecond), Attempt: 2, Claim: "cl"}}},
		{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{}}},
		{Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "r", Outcome: "indeterminate", Message: "m", Latency: durationpb.New(time.Second), ResultJson: `{"error":1}`, Truncated: true, AgentRan: true}}},
		{Body: &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: "bad", RawExcerpt: "\x00raw"}}},
	}
	var in bytes.Buffer
	for i, ev := range events {
		ev.EventId, ev.AgentId, ev.CallId, ev.Revision, ev.Time, ev.ThreadId, ev.Seal = "evt_1", "bot", "call_1", uint32(1+200*i), now, "t", "seal"
		ev.Actor = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"}
		pb, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(map[string]string{"pb": base64.StdEncoding.EncodeToString(pb), "json": string(js)})
		in.Write(append(line, '\n'))
	}
	lines := runNodeScriptWithInput(t, node, eventsScript, filepath.Join(dir, "dist", "src", "pb.js"), in.Bytes())
	if len(lines) != len(events) {
		t.Fatalf("the script printed %d events, want %d: %v", len(lines), len(events), lines)
	}
	for i, l := range lines {
		var r struct {
			Same        bool
			Mine, Their map[string]any
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if !r.Same {
			t.Errorf("event %d (%T) reads differently from protobuf: %s", i, events[i].GetBody(), l)
		}
	}
}

// runNodeScript runs script (a module whose %q is module's file URL) on
// node and returns its output lines.
func runNodeScript(t *testing.T, node, script, module string) []string {
	return runNodeScriptWithInput(t, node, script, module, nil)
}

func runNodeScriptWithInput(t *testing.T, node, script, module string, input []byte) []string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "script.mjs")
	if err := os.WriteFile(file, []byte(strings.Replace(script, "%q", `"file://`+module+`"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, file)
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", file, err, stderr.Bytes())
	}
	var lines []string
	for s := bufio.NewScanner(bytes.NewReader(out)); s.Scan(); {
		lines = append(lines, s.Text())
	}
	return lines
}
