package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestGatewayRejoin: a call that waits for a person longer than an MCP
// client waits is answered "waiting for approval"; the same call repeated
// in the same session returns its outcome once, and runs the tool once.
//
// It runs beside other tests: most of its minute is spent waiting for the
// clients' own timeouts to pass.
func TestGatewayRejoin(t *testing.T) {
	t.Parallel()
	g := startGatewayEnv(t)
	user, password := adminLogin(t, g.dev)
	console := signInAt(t, g.baseURL, user, password)

	t.Run("the_typescript_sdk_at_its_defaults_is_answered_waiting_then_gets_the_outcome_once", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "ts-sdk.txt")
		args, _ := json.Marshal(map[string]any{"path": path, "content": "written once"})
		ts := startTSClient(t, g, "plain", "fs__write_file", string(args))
		started := time.Now()
		ts.call()
		rec := g.pendingFor(t, "plainbot", "write_file", path)
		callPage := fmt.Sprintf("/calls/plainbot/%s", rec.GetCall().GetCallId())
		testenv.Eventually(t, 20*time.Second, "the call page to say the client waits", func() bool {
			_, body := console.page(callPage)
			return strings.Contains(body, "client is waiting for the outcome")
		})
		first := ts.result()
		if first.Error != "" || !first.IsError || first.Meta["airlock/status"] != "pending" ||
			!strings.Contains(first.Text, "NOT run yet") || !strings.Contains(first.Text, "call fs__write_file again with exactly the same arguments") ||
			!strings.Contains(first.Text, callPage) {
			t.Fatalf("the client waiting for approval was answered %+v, want the pending answer", first)
		}
		if first.MS >= 60_000 {
			t.Fatalf("the pending answer came after %d ms, after the SDK's 60 s timeout", first.MS)
		}
		_, body := console.page(callPage)
		if !strings.Contains(body, "client stopped waiting at") {
			t.Errorf("after the pending answer the call page does not say the client stopped waiting")
		}
		// The person decides after the client's own timeout would have
		// passed.
		<-time.After(time.Until(started.Add(61 * time.Second)))
		g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine")
		testenv.Eventually(t, 30*time.Second, "the approved write to run", func() bool {
			b, err := os.ReadFile(path)
			return err == nil && string(b) == "written once"
		})
		// Were the tool run again, it would write this back.
		writeFile(t, path, "changed after the run")
		ts.call()
		second := ts.result()
		if second.Error != "" || second.IsError || !strings.Contains(second.Text, "Successfully wrote") {
			t.Fatalf("the repeated call was answered %+v, want the tool's result", second)
		}
		if got := readFileString(t, path); got != "changed after the run" {
			t.Fatalf("the tool ran again: the file holds %q", got)
		}
		// Delivered once: a third identical call is a new call.
		ts.call()
		third := g.pendingWhereNot(t, "plainbot", path, rec.GetCall().GetCallId())
		g.decide(t, third, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "done already")
		if res := ts.result(); !res.IsError || !strings.Contains(res.Text, "alice rejected") {
			t.Fatalf("the third call was answered %+v, want its own rejection", res)
		}
		if got := readFileString(t, path); got != "changed after the run" {
			t.Fatalf("a rejected call ran: the file holds %q", got)
		}
	})

	t.Run("the_inspector_is_answered_waiting_for_approval_before_it_gives_up", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "inspector.txt")
		out := jsonOf(t, g.inspector(t, "plain", "--method", "tools/call", "--tool-name", "fs__write_file",
			"--tool-arg", "path="+path, "--tool-arg", "content=from the inspector"))
		meta, _ := out["_meta"].(map[string]any)
		if out["isError"] != true || meta["airlock/status"] != "pending" {
			t.Fatalf("the inspector was answered %v, want the pending answer", out)
		}
		rec := g.pendingFor(t, "plainbot", "write_file", path)
		g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "not needed")
	})

	t.Run("a_repeated_call_rejoins_its_sessions_call_and_no_other_session_or_endpoint_can", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "rejoined.txt")
		args := map[string]any{"path": path, "content": "rejoined"}
		a := g.connect(t, "patient", clientOpts{version: "2025-11-25"})
		id := pendingCall(t, a, args)
		// Another session of the same endpoint, once no client waits for
		// the call (its session was answered "pending"), rejoins it; another
		// endpoint (another agent) with the same tool and arguments cannot.
		for _, other := range []struct {
			endpoint string
			rejoins  bool
		}{{"patient", true}, {"leaving", false}} {
			res := callTool(t, g.connect(t, other.endpoint, clientOpts{version: "2025-11-25"}), "fs__write_file", args)
			if got, _ := res.Meta["airlock/call_id"].(string); (got == id) != other.rejoins || res.Meta["airlock/status"] != "pending" {
				t.Fatalf("a call of endpoint %s in another session was answered %v %q; rejoining call %s: %v, want %v", other.endpoint, res.Meta, text(res), id, got == id, other.rejoins)
			}
		}
		// Other arguments in the same session: a new call too.
		other := callTool(t, a, "fs__write_file", map[string]any{"path": path, "content": "other"})
		if got, _ := other.Meta["airlock/call_id"].(string); got == id {
			t.Fatal("a call with other arguments rejoined the first call")
		}
		// Still undecided: the repeat says again that it waits.
		again := callTool(t, a, "fs__write_file", args)
		if got, _ := again.Meta["airlock/call_id"].(string); got != id || again.Meta["airlock/status"] != "pending" {
			t.Fatalf("the undecided repeat was answered %v %q, want call %s still pending", again.Meta, text(again), id)
		}
		rec := pendingWhere(t, g.api, "patientbot", "write_file", "call "+id, func(r *airlockv1.ApprovalRecord) bool {
			return r.GetCall().GetCallId() == id
		})
		g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine")
		res := callTool(t, a, "fs__write_file", args)
		if res.IsError || !strings.Contains(text(res), "Successfully wrote") || readFileString(t, path) != "rejoined" {
			t.Fatalf("the repeat after the approval was answered isError=%v %q", res.IsError, text(res))
		}
		// Its own calls only: the subtests beside it share the endpoint
		// (rejecting every pending call once rejected another's mid-test).
		g.rejectAllPending(t, "patientbot", path)
	})

	t.Run("a_call_whose_replica_died_is_rejoined_from_a_new_session_and_runs_once", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "replica-died.txt")
		args := map[string]any{"path": path, "content": "written once"}
		// The call waits for a person in a session of a replica of its own
		// (a stdio gateway), which then dies: its lease is renewed no more.
		old, replica := g.stdioGateway(t, "plain")
		_ = callAsync(old, "fs__write_file", args) // its answer dies with the replica
		rec := g.pendingFor(t, "plainbot", "write_file", path)
		id := rec.GetCall().GetCallId()
		g.waitForEntry(t, "a.", id) // offered to the endpoint's other sessions
		if err := replica.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// A new session that rejoins the call and then gives up (a client
		// timeout) withdraws nothing: it only followed another's call.
		leases := g.leaseWrites(t, "plainbot", id)
		impatientWaits := make(chan struct{}, 1)
		impatient := g.connect(t, "plain", clientOpts{version: "2025-11-25", progress: waitingFor("impatient", impatientWaits)})
		// It follows a call waiting for approval: call id's, or a new one
		// (checked below).
		waitingCall(t, impatient, "impatient", impatientWaits, args)()
		g.stillPendingAfterGivingUp(t, leases, "plainbot", id, "a session that rejoined the call and gave up")
		// Its client starts a new session elsewhere and repeats the call:
		// it rejoins the call once the lease has run out.
		freshWaits := make(chan struct{}, 1)
		fresh := g.connect(t, "plain", clientOpts{version: "2025-11-25", progress: waitingFor("fresh", freshWaits)})
		repeat := callAsyncToken(fresh, "fresh", "fs__write_file", args)
		<-freshWaits // it follows a call waiting for approval: call id's, unless it made a new one
		if calls := g.requestedOn(t, "plainbot", path); len(calls) != 1 {
			t.Fatalf("the repeat from a new session made calls %v, want only %s", calls, id)
		}
		g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine")
		var res *mcp.CallToolResult
		select {
		case res = <-repeat:
		case <-time.After(60 * time.Second):
			t.Fatal("the repeat from a new session got no answer within 60s")
		}
		if res.IsError || !strings.Contains(text(res), "Successfully wrote") || res.Meta["airlock/call_id"] != nil && res.Meta["airlock/call_id"] != id {
			t.Fatalf("the repeat from a new session was answered isError=%v %v %q, want call %s's result", res.IsError, res.Meta, text(res), id)
		}
		if got := readFileString(t, path); got != "written once" {
			t.Fatalf("the file holds %q", got)
		}
		if calls := g.requestedOn(t, "plainbot", path); len(calls) != 1 {
			t.Fatalf("calls %v were made, want only %s", calls, id)
		}
	})

	t.Run("a_call_a_client_still_waits_for_is_not_taken_by_another_session", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "still-waited.txt")
		args := map[string]any{"path": path, "content": "twice asked"}
		first := callAsync(g.connect(t, "plain", clientOpts{version: "2025-11-25"}), "fs__write_file", args)
		rec := g.pendingFor(t, "plainbot", "write_file", path)
		g.waitForEntry(t, "a.", rec.GetCall().GetCallId())
		second := callAsync(g.connect(t, "plain", clientOpts{version: "2025-11-25"}), "fs__write_file", args)
		other := g.pendingWhereNot(t, "plainbot", path, rec.GetCall().GetCallId())
		for _, r := range []*airlockv1.ApprovalRecord{rec, other} {
			g.decide(t, r, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "not needed")
		}
		for i, done := range []<-chan *mcp.CallToolResult{first, second} {
			select {
			case res := <-done:
				if !res.IsError || !strings.Contains(text(res), "alice rejected") {
					t.Fatalf("call %d was answered %v %q, want its rejection", i+1, res.Meta, text(res))
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("call %d got no answer within 60s", i+1)
			}
		}
	})

	t.Run("a_call_one_session_still_waits_for_is_not_adopted_when_another_stops_waiting", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "waited-in-two-sessions.txt")
		args := map[string]any{"path": path, "content": "waited in two sessions"}
		aWaits := make(chan struct{}, 1)
		a := g.connect(t, "patient", clientOpts{version: "2025-11-25", progress: func(r *mcp.ProgressNotificationClientRequest) {
			if r.Params.ProgressToken == "a-again" && strings.Contains(r.Params.Message, "waiting for approval") {
				select {
				case aWaits <- struct{}{}:
				default:
				}
			}
		}})
		id := pendingCall(t, a, args)
		// Session B adopts the call (A's request was answered "pending"),
		// then A calls again in its session: two requests wait for it.
		bWaits := make(chan struct{}, 1)
		b := g.connect(t, "patient", clientOpts{version: "2025-11-25", progress: waitingFor("b", bWaits)})
		bHangUp := waitingCall(t, b, "b", bWaits, args)
		aAgain := make(chan *mcp.CallToolResult, 1)
		go func() {
			params := &mcp.CallToolParams{Name: "fs__write_file", Arguments: args}
			params.SetProgressToken("a-again")
			res, _ := a.CallTool(context.Background(), params)
			aAgain <- res
		}()
		select {
		case <-aWaits:
		case <-time.After(20 * time.Second):
			t.Fatal("session A's repeat was not told within 20s that the call waits for approval")
		}
		// B gives up. Until its stop is recorded, the lease must never say
		// that no client waits: A still does.
		leases := g.leaseWrites(t, "patientbot", id)
		bHangUp()
	leases:
		for {
			select {
			case e := <-leases:
				switch p, live := liveLeases(t, e); {
				case !p.Waiting(e.Created()):
					t.Fatalf("with session A's request still waiting, the call's lease said no client waits (%+v): another session may adopt it", p)
				case live == 1:
					break leases // B's stop is recorded, A's lease runs on
				}
			case <-time.After(20 * time.Second):
				t.Fatal("session B's stop was not recorded within 20s")
			}
		}
		// A new session's identical call is a new call: A waits for it.
		c := callAsync(g.connect(t, "patient", clientOpts{version: "2025-11-25"}), "fs__write_file", args)
		select {
		case res := <-c:
			if got, _ := res.Meta["airlock/call_id"].(string); got == id || res.Meta["airlock/status"] != "pending" {
				t.Fatalf("a new session's identical call, with session A's request waiting for call %s, was answered %v %q, want a new call pending", id, res.Meta, text(res))
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the new session's call got no answer within 60s")
		}
		<-aAgain
		g.rejectAllPending(t, "patientbot", path)
	})

	t.Run("an_outcome_returned_to_one_session_is_not_returned_to_another", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "returned-once.txt")
		args := map[string]any{"path": path, "content": "returned once"}
		a := g.connect(t, "patient", clientOpts{version: "2025-11-25"})
		id := pendingCall(t, a, args)
		// Session B adopts the call and, once it ran, gets its outcome.
		b := g.connect(t, "patient", clientOpts{version: "2025-11-25"})
		if res := callTool(t, b, "fs__write_file", args); res.Meta["airlock/call_id"] != id || res.Meta["airlock/status"] != "pending" {
			t.Fatalf("session B's identical call was answered %v %q, want call %s pending", res.Meta, text(res), id)
		}
		rec := pendingWhere(t, g.api, "patientbot", "write_file", "call "+id, func(r *airlockv1.ApprovalRecord) bool {
			return r.GetCall().GetCallId() == id
		})
		g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine")
		testenv.Eventually(t, 30*time.Second, "the approved write to run", func() bool {
			got, err := os.ReadFile(path)
			return err == nil && string(got) == "returned once"
		})
		writeFile(t, path, "changed after the run") // were the tool run again, it would write this back
		if res := callTool(t, b, "fs__write_file", args); res.IsError || !strings.Contains(text(res), "Successfully wrote") {
			t.Fatalf("session B's repeat after the approval was answered isError=%v %v %q, want the tool's result", res.IsError, res.Meta, text(res))
		}
		// Session A's repeat is a new call: the outcome went to B.
		again := callTool(t, a, "fs__write_file", args)
		if got, _ := again.Meta["airlock/call_id"].(string); got == id || again.Meta["airlock/status"] != "pending" {
			t.Fatalf("session A's repeat, after call %s's outcome went to session B, was answered %v %q, want a new call pending", id, again.Meta, text(again))
		}
		if got := readFileString(t, path); got != "changed after the run" {
			t.Fatalf("the tool ran again: the file holds %q", got)
		}
		g.rejectAllPending(t, "patientbot", path)
	})

	t.Run("a_call_waiting_for_a_person_is_offered_once", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "offered-once.txt")
		id := pendingCall(t, g.connect(t, "patient", clientOpts{version: "2025-11-25"}), map[string]any{"path": path, "content": "offered once"})
		if n := g.writesNaming(t, "a.", id); n != 1 {
			t.Fatalf("call %s, answered \"pending\" once, was offered in %d writes, want 1", id, n)
		}
		g.rejectAllPending(t, "patientbot", path)
	})

	t.Run("a_call_nobody_waits_for_is_canceled_after_abandon_after", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "abandoned.txt")
		cs := g.connect(t, "leaving", clientOpts{version: "2025-11-25"})
		res := callTool(t, cs, "fs__write_file", map[string]any{"path": path, "content": "nobody waits"})
		id, _ := res.Meta["airlock/call_id"].(string)
		if res.Meta["airlock/status"] != "pending" || id == "" {
			t.Fatalf("answered %v %q, want the pending answer", res.Meta, text(res))
		}
		testenv.Eventually(t, 30*time.Second, "the call nobody waits for to be canceled", func() bool {
			r, err := g.api.Get(context.Background(), "leaver", id, 0)
			return err == nil && r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_CANCELED
		})
		again := callTool(t, cs, "fs__write_file", map[string]any{"path": path, "content": "nobody waits"})
		if !again.IsError || again.Meta["airlock/status"] != "canceled" || !strings.Contains(text(again), "abandon_after") {
			t.Fatalf("the repeat of the canceled call was answered %v %q, want that it was canceled and why", again.Meta, text(again))
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatal("the abandoned call ran")
		}
	})
}

// waitForEntry waits until the client-waits bucket holds an entry under
// prefix ("r.": a session's rejoin entry, "a.": an offer) naming call.
func (g *gatewayEnv) waitForEntry(t *testing.T, prefix, call string) {
	t.Helper()
	g.waitForEntries(t, prefix, call, 1)
}

// leaseWrites is every write of the lease that says whether a client of
// agent waits for call, the stored one first.
func (g *gatewayEnv) leaseWrites(t *testing.T, agent, call string) <-chan jetstream.KeyValueEntry {
	t.Helper()
	kv := g.clientWaits
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := kv.Watch(ctx, "c."+agent+"."+call, jetstream.IgnoreDeletes())
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan jetstream.KeyValueEntry, 64)
	go func() {
		defer func() { _ = w.Stop() }()
		for e := range w.Updates() {
			if e != nil {
				out <- e
			}
		}
	}()
	return out
}

// writesNaming counts the writes of client-waits keys under prefix that
// named call, as the bucket's history keeps them.
func (g *gatewayEnv) writesNaming(t *testing.T, prefix, call string) int {
	t.Helper()
	kv := g.clientWaits
	keys, err := bus.Keys(context.Background(), kv, prefix+">")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		history, err := bus.History(context.Background(), kv, k)
		if err != nil {
			continue // deleted meanwhile
		}
		for _, e := range history {
			if e.Operation() == jetstream.KeyValuePut && strings.Contains(string(e.Value()), `"`+call+`"`) {
				n++
			}
		}
	}
	return n
}

// pendingCall calls write_file with args in cs and wants the answer that
// the call waits for approval; it returns the call's id.
func pendingCall(t *testing.T, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	res := callTool(t, cs, "fs__write_file", args)
	id, _ := res.Meta["airlock/call_id"].(string)
	if !res.IsError || res.Meta["airlock/status"] != "pending" || id == "" {
		t.Fatalf("answered isError=%v %v %q, want the pending answer", res.IsError, res.Meta, text(res))
	}
	return id
}

// rejectAllPending rejects agent's write_file calls on path still pending.
func (g *gatewayEnv) rejectAllPending(t *testing.T, agent, path string) {
	t.Helper()
	list, err := g.api.List(context.Background(), &airlockv1.ListRequest{AgentId: agent, Tool: "write_file",
		States: []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.GetRecords() {
		if r.GetCall().GetArguments().AsMap()["path"] == path {
			g.decide(t, r, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "cleanup")
		}
	}
}

// waitForEntries waits until the client-waits bucket holds n entries
// under prefix naming call.
func (g *gatewayEnv) waitForEntries(t *testing.T, prefix, call string, n int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d entries %s… naming call %s", n, prefix, call), func() bool {
		return g.entriesNaming(t, prefix, call) >= n
	})
}

// entriesNaming counts the client-waits bucket's entries under prefix
// naming call.
func (g *gatewayEnv) entriesNaming(t *testing.T, prefix, call string) int {
	t.Helper()
	kv := g.clientWaits
	keys, err := bus.Keys(context.Background(), kv, prefix+">")
	if err != nil {
		return 0
	}
	found := 0
	for _, k := range keys {
		if e, err := kv.Get(context.Background(), k); err == nil && strings.Contains(string(e.Value()), `"`+call+`"`) {
			found++
		}
	}
	return found
}

// requestedOn is the ids of the write_file calls agent requested on path.
func (g *gatewayEnv) requestedOn(t *testing.T, agent, path string) []string {
	t.Helper()
	var ids []string
	for _, c := range g.requested(t, agent) {
		if c.GetTool() == "write_file" && c.GetArguments().AsMap()["path"] == path {
			ids = append(ids, c.GetCallId())
		}
	}
	return ids
}

// pendingWhereNot waits for a pending write_file call of agent on path
// other than call.
func (g *gatewayEnv) pendingWhereNot(t *testing.T, agent, path, call string) *airlockv1.ApprovalRecord {
	t.Helper()
	return pendingWhere(t, g.api, agent, "write_file", "on "+path+" other than "+call, func(r *airlockv1.ApprovalRecord) bool {
		return r.GetCall().GetArguments().AsMap()["path"] == path && r.GetCall().GetCallId() != call
	})
}

// tsClient is tests/node/rejoin-client.mjs: the TypeScript MCP SDK at its
// default options, calling one tool with the same arguments in one session.
type tsClient struct {
	t       *testing.T
	stdin   interface{ Write([]byte) (int, error) }
	results chan tsResult
}

type tsResult struct {
	IsError bool           `json:"isError"`
	Text    string         `json:"text"`
	Meta    map[string]any `json:"meta"`
	Error   string         `json:"error"`
	MS      int64          `json:"ms"`
}

func startTSClient(t *testing.T, g *gatewayEnv, endpoint, tool, args string) *tsClient {
	t.Helper()
	nodeBin(t, "mcp-inspector-cli") // the test packages are installed
	script, err := filepath.Abs(filepath.Join("node", "rejoin-client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script, g.url(endpoint), g.tokens[endpoint], tool, args)
	cmd.Dir = filepath.Dir(script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the TypeScript SDK client: %v", err)
	}
	c := &tsClient{t: t, stdin: stdin, results: make(chan tsResult, 4)}
	connected := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), `{"connected"`) {
				close(connected)
				continue
			}
			var r tsResult
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = tsResult{Error: "unreadable output: " + sc.Text()}
			}
			c.results <- r
		}
		close(c.results)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
		if t.Failed() {
			testenv.LogTail(t, "TypeScript SDK client stderr", stderr.String())
		}
	})
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatalf("the TypeScript SDK client did not connect within 30s:\n%s", stderr.String())
	}
	return c
}

// call asks the client to call its tool once more.
func (c *tsClient) call() {
	c.t.Helper()
	if _, err := c.stdin.Write([]byte("call\n")); err != nil {
		c.t.Fatal(err)
	}
}

// result is the answer to the oldest call not yet read.
func (c *tsClient) result() tsResult {
	c.t.Helper()
	select {
	case r, ok := <-c.results:
		if !ok {
			c.t.Fatal("the TypeScript SDK client exited")
		}
		return r
	case <-time.After(90 * time.Second):
		c.t.Fatal("the TypeScript SDK client answered nothing within 90s")
	}
	return tsResult{}
}

// TestGatewayRejoinFaults: what a session that follows another session's
// call (adopt) must never get, and what it must not leave behind.
func TestGatewayRejoinFaults(t *testing.T) {
	t.Parallel()
	g := startGatewayEnv(t)

	t.Run("a_call_its_client_withdraws_is_not_adopted_by_another_session", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "withdrawn.txt")
		args := map[string]any{"path": path, "content": "withdrawn"}
		a := g.connect(t, "plain", clientOpts{version: "2025-11-25"})
		actx, giveUp := context.WithCancel(context.Background())
		defer giveUp()
		aDone := make(chan struct{})
		go func() {
			_, _ = a.CallTool(actx, &mcp.CallToolParams{Name: "fs__write_file", Arguments: args})
			close(aDone)
		}()
		rec := g.pendingFor(t, "plainbot", "write_file", path)
		id := rec.GetCall().GetCallId()
		g.waitForEntry(t, "a.", id)
		// Session B's identical call waits to see whether A's client still
		// waits (it watches the call's lease); then A's client gives up.
		b := callAsync(g.connect(t, "plain", clientOpts{version: "2025-11-25"}), "fs__write_file", args)
		g.waitForLeaseWatch(t, "plainbot", id)
		giveUp()
		<-aDone
		// B's call is a new call, not A's being withdrawn.
		other := g.pendingWhereNot(t, "plainbot", path, id)
		g.decide(t, other, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "not needed")
		select {
		case res := <-b:
			if got, _ := res.Meta["airlock/call_id"].(string); got == id || !strings.Contains(text(res), "alice rejected") {
				t.Fatalf("session B's identical call, made as A's client withdrew call %s, was answered %v %q, want its own new call's rejection", id, res.Meta, text(res))
			}
		case <-time.After(60 * time.Second):
			t.Fatal("session B's call got no answer within 60s")
		}
	})

	t.Run("a_repeat_of_the_calls_own_session_giving_up_does_not_withdraw_it_from_an_adopter", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "own-repeat.txt")
		args := map[string]any{"path": path, "content": "own repeat"}
		aWaits := make(chan struct{}, 1)
		a := g.connect(t, "patient", clientOpts{version: "2025-11-25", progress: waitingFor("a", aWaits)})
		id := pendingCall(t, a, args)
		// Session B adopts the call: it is B's too.
		b := g.connect(t, "patient", clientOpts{version: "2025-11-25"})
		if res := callTool(t, b, "fs__write_file", args); res.Meta["airlock/call_id"] != id || res.Meta["airlock/status"] != "pending" {
			t.Fatalf("session B's identical call was answered %v %q, want call %s pending", res.Meta, text(res), id)
		}
		// Session A repeats the call, waits for it, and gives up.
		leases := g.leaseWrites(t, "patientbot", id)
		hangUp := waitingCall(t, a, "a", aWaits, args)
		waitLiveLeases(t, leases, 1)
		hangUp()
		g.stillPendingAfterGivingUp(t, leases, "patientbot", id, "session A's repeat giving up (session B adopted the call)")
		g.rejectAllPending(t, "patientbot", path)
		if res := callTool(t, b, "fs__write_file", args); res.Meta["airlock/call_id"] != id || !strings.Contains(text(res), "alice rejected") {
			t.Fatalf("session B's repeat was answered %v %q, want call %s's rejection", res.Meta, text(res), id)
		}
	})

	t.Run("a_request_id_sent_again_does_not_return_an_outcome_another_session_got", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "request-id-again.txt")
		args := map[string]any{"path": path, "content": "request id again"}
		a := g.raw(t, "patient", `{}`)
		// call sends the call as JSON-RPC request rpcID; it returns the
		// result, its call id and its status.
		call := func(rpcID int) (res map[string]any, id, status string) {
			t.Helper()
			raw, _ := json.Marshal(args)
			m := next(t, messages(a.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fs__write_file","arguments":%s}}`, rpcID, raw))),
				"the call's result", func(m rpcMsg) bool { return m.Result != nil })
			if err := json.Unmarshal(m.Result, &res); err != nil {
				t.Fatal(err)
			}
			meta, _ := res["_meta"].(map[string]any)
			id, _ = meta["airlock/call_id"].(string)
			status, _ = meta["airlock/status"].(string)
			return res, id, status
		}
		first, id, status := call(1)
		if status != "pending" || id == "" {
			t.Fatalf("the first call was answered %v, want the pending answer", first)
		}
		// Session B adopts the call and gets its outcome.
		b := g.connect(t, "patient", clientOpts{version: "2025-11-25"})
		if res := callTool(t, b, "fs__write_file", args); res.Meta["airlock/call_id"] != id {
			t.Fatalf("session B's identical call was answered %v %q, want call %s", res.Meta, text(res), id)
		}
		rec := pendingWhere(t, g.api, "patientbot", "write_file", "call "+id, func(r *airlockv1.ApprovalRecord) bool { return r.GetCall().GetCallId() == id })
		g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine")
		testenv.Eventually(t, 30*time.Second, "the approved write to run", func() bool {
			got, err := os.ReadFile(path)
			return err == nil && string(got) == "request id again"
		})
		writeFile(t, path, "changed after the run") // were the tool run again, it would write this back
		if res := callTool(t, b, "fs__write_file", args); res.IsError || !strings.Contains(text(res), "Successfully wrote") {
			t.Fatalf("session B's repeat was answered %v %q, want the tool's result", res.Meta, text(res))
		}
		// Session A sends its first request's JSON-RPC id again: a new call,
		// never the outcome B got.
		again, newID, status := call(1)
		if newID == id || status != "pending" {
			t.Fatalf("session A's request id 1 sent again, after call %s's outcome went to session B, was answered %v, want a new call pending", id, again)
		}
		// That call is rejected and its outcome returned to A (which ends
		// A's rejoin entry); the id sent once more is never B's outcome.
		g.rejectAllPending(t, "patientbot", path)
		if res, got, _ := call(2); got != newID || !strings.Contains(fmt.Sprint(res), "alice rejected") {
			t.Fatalf("session A's repeat was answered %v, want call %s's rejection", res, newID)
		}
		if res, got, _ := call(1); got == id || strings.Contains(fmt.Sprint(res), "Successfully wrote") {
			t.Fatalf("session A's request id 1 sent once more, after call %s's outcome went to session B, was answered %v: B's outcome", id, res)
		}
		if got := readFileString(t, path); got != "changed after the run" {
			t.Fatalf("the tool ran again: the file holds %q", got)
		}
		g.rejectAllPending(t, "patientbot", path)
	})

	t.Run("sessions_claiming_an_outcome_at_once_get_it_in_one_session_only", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "claimed-at-once.txt")
		args := map[string]any{"path": path, "content": "claimed at once"}
		// Session A's call is adopted by B, then by C: each was answered
		// "pending", so each session's repeat follows the call.
		sessions := []*mcp.ClientSession{g.connect(t, "patient", clientOpts{version: "2025-11-25"})}
		id := pendingCall(t, sessions[0], args)
		for range 2 {
			cs := g.connect(t, "patient", clientOpts{version: "2025-11-25"})
			if got := pendingCall(t, cs, args); got != id {
				t.Fatalf("another session's identical call made call %s, want it to adopt call %s", got, id)
			}
			sessions = append(sessions, cs)
		}
		g.rejectAllPending(t, "patientbot", path)
		// All three repeat at once: the outcome is claimed by one; the
		// others' repeats are new calls.
		var answers []<-chan *mcp.CallToolResult
		for _, cs := range sessions {
			answers = append(answers, callAsync(cs, "fs__write_file", args))
		}
		got := 0
		for i, done := range answers {
			select {
			case res := <-done:
				callID, _ := res.Meta["airlock/call_id"].(string)
				switch {
				case callID == id && strings.Contains(text(res), "alice rejected"):
					got++
				case callID == id || res.Meta["airlock/status"] != "pending":
					t.Fatalf("session %d's repeat was answered %v %q, want call %s's rejection or a new call pending", i+1, res.Meta, text(res), id)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("session %d's repeat got no answer within 60s", i+1)
			}
		}
		if got != 1 {
			t.Fatalf("call %s's outcome was returned to %d of the 3 sessions that claimed it at once, want 1", id, got)
		}
		g.rejectAllPending(t, "patientbot", path)
	})

	t.Run("a_session_that_adopts_a_call_and_gives_up_leaves_no_rejoin_entry", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(g.files, "adopt-and-leave.txt")
		args := map[string]any{"path": path, "content": "adopt and leave"}
		id := pendingCall(t, g.connect(t, "patient", clientOpts{version: "2025-11-25"}), args)
		leases := g.leaseWrites(t, "patientbot", id)
		for range 3 {
			waits := make(chan struct{}, 1)
			b := g.connect(t, "patient", clientOpts{version: "2025-11-25", progress: waitingFor("b", waits)})
			hangUp := waitingCall(t, b, "b", waits, args)
			waitLiveLeases(t, leases, 1)
			hangUp()
			waitLiveLeases(t, leases, 0)
		}
		if n := g.entriesNaming(t, "r.", id); n != 1 {
			t.Fatalf("after 3 sessions adopted call %s and gave up before any answer, %d rejoin entries name it, want 1 (its own session's)", id, n)
		}
		g.rejectAllPending(t, "patientbot", path)
	})
}

// waitForLeaseWatch waits until something watches the lease that says
// whether a client of agent waits for call (a session deciding whether to
// adopt the call).
func (g *gatewayEnv) waitForLeaseWatch(t *testing.T, agent, call string) {
	t.Helper()
	bucket := g.clientWaits.Bucket()
	stream, err := g.admin.Stream(context.Background(), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	want := "$KV." + bucket + ".c." + agent + "." + call
	testenv.Eventually(t, 30*time.Second, "a watch of call "+call+"'s lease", func() bool {
		cs := stream.ListConsumers(context.Background())
		found := false
		for c := range cs.Info() {
			if c.Config.FilterSubject == want || slices.Contains(c.Config.FilterSubjects, want) {
				found = true
			}
		}
		return found
	})
}

// waitLiveLeases waits for the lease write after which n requests wait.
func waitLiveLeases(t *testing.T, leases <-chan jetstream.KeyValueEntry, n int) {
	t.Helper()
	for {
		select {
		case e := <-leases:
			if _, live := liveLeases(t, e); live == n {
				return
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no lease write with %d requests waiting within 20s", n)
		}
	}
}

// stillPendingAfterGivingUp waits for the lease write by which the
// request that followed agent's call, and whose client gave up (who),
// ended its lease, then wants the call still pending. That write is the
// gateway's answer to the give-up: a request withdrawing the call deletes
// its presence first instead (clientwait's Release), so that no write
// comes, and the wait fails.
func (g *gatewayEnv) stillPendingAfterGivingUp(t *testing.T, leases <-chan jetstream.KeyValueEntry, agent, call, who string) {
	t.Helper()
	state := func() airlockv1.ApprovalState {
		r, err := g.api.Get(context.Background(), agent, call, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r.GetState()
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-leases:
			if _, live := liveLeases(t, e); live > 0 {
				continue
			}
			if s := state(); s != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
				t.Fatalf("%s left call %s %s, want it pending", who, call, s)
			}
			return
		case <-deadline:
			t.Fatalf("%s ended no lease on call %s within 20s, which is %s: was the call withdrawn (its presence deleted)? want it pending, followed by another session", who, call, state())
		}
	}
}

// liveLeases is the lease write e and how many requests' leases ran as it
// was written.
func liveLeases(t *testing.T, e jetstream.KeyValueEntry) (p clientwait.Presence, live int) {
	t.Helper()
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		t.Fatal(err)
	}
	for _, until := range p.Waiters {
		if until.After(e.Created()) {
			live++
		}
	}
	return p, live
}

// waitingFor is a progress handler that signals waits (if not nil) once the
// request with progress token tok is told its call waits for approval.
func waitingFor(tok string, waits chan struct{}) func(*mcp.ProgressNotificationClientRequest) {
	return func(r *mcp.ProgressNotificationClientRequest) {
		if waits != nil && r.Params.ProgressToken == tok && strings.Contains(r.Params.Message, "waiting for approval") {
			select {
			case waits <- struct{}{}:
			default:
			}
		}
	}
}

// waitingCall calls write_file with args in cs under progress token tok,
// whose "waiting for approval" progress signals waits (cs's handler is
// waitingFor(tok, waits)), and returns once it came; hangUp gives up on
// the call and returns once the client has.
func waitingCall(t *testing.T, cs *mcp.ClientSession, tok string, waits <-chan struct{}, args map[string]any) (hangUp func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan struct{})
	go func() {
		params := &mcp.CallToolParams{Name: "fs__write_file", Arguments: args}
		params.SetProgressToken(tok)
		_, _ = cs.CallTool(ctx, params)
		close(done)
	}()
	select {
	case <-waits:
	case <-done:
		t.Fatalf("the call under progress token %s ended before it was told it waits for approval", tok)
	case <-time.After(30 * time.Second):
		t.Fatalf("the call under progress token %s was not told within 30s that it waits for approval", tok)
	}
	return func() { cancel(); <-done }
}

// callAsyncToken is callAsync with a progress token.
func callAsyncToken(cs *mcp.ClientSession, tok, name string, args map[string]any) <-chan *mcp.CallToolResult {
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		params := &mcp.CallToolParams{Name: name, Arguments: args}
		params.SetProgressToken(tok)
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the call failed: " + err.Error()}}}
		}
		done <- res
	}()
	return done
}
