package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestAReplayedConfirmationStateWritesNoEventPerReplay:
// a 2026-07-28 MCP client asked to confirm a call gets a sealed
// requestState, valid for 24 hours and not single-use. Each tools/call
// that carries it back makes the gateway decide the call as the endpoint's
// person (approval.decide). Once the call is decided by someone else (a
// reviewer, or its expiry), every replay is refused as already_decided,
// and the approval service records each refusal as a `decision_refused`
// event with a random id: an uncharged write to the events stream (and a
// ClickHouse row, and a line on the call page) per HTTP request, which
// the agent's budget (limits.agent_calls_per_minute) never sees — the
// stream every agent shares (stream.max_bytes: full, no agent's call is
// recorded).
func TestAReplayedConfirmationStateWritesNoEventPerReplay(t *testing.T) {
	dir := t.TempDir()
	tok := fmt.Sprintf("bot-token-%d-abcdefghijklmnop", time.Now().UnixNano())
	tokFile := filepath.Join(dir, "bot.token")
	writeFile(t, tokFile, tok+"\n")
	cfg := filepath.Join(dir, "airlock.yaml")
	writeFile(t, cfg, fmt.Sprintf(`approval:
  groups: {reviewers: [alice]}
gateway:
  heartbeat: 1s
  endpoints:
    - {name: bot, agent: bot, token_file: %q, on_behalf_of: dana}
`, tokFile))
	dev := startDev(t, filepath.Join(dir, "data"), 0, "", "AIRLOCK_CONFIG="+cfg)
	nc, js := dev.Admin(t)
	api := dev.API(t)
	rules := policyapi.New(nc, testenv.DevFrontendKey(t, dev.DataDir), "console")
	// As the coding profile's asks: the requester or a reviewer decides.
	if _, err := rules.PutRule(context.Background(), &airlockv1.PolicyRule{
		Id: "confirm-bot", Priority: 5, Agent: "bot", Pattern: "demo__write_file", Effect: "ask",
		Approvers: []string{"requester", "group:reviewers"}, Reason: "writes need a confirmation",
	}, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "admin", Channel: "cli"}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the rule to be in force", func() bool {
		d, err := rules.Eval(context.Background(), &airlockv1.ToolCall{AgentId: "bot", Server: "demo", Tool: "write_file"})
		return err == nil && d.GetRuleId() == "confirm-bot"
	})
	url := dev.HTTPURL + "/mcp/bot"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"replayer","version":"1"}}`
	post := func(id int, extra string) (string, error) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"name":"demo__write_file","arguments":{"path":"notes.txt","content":"x"}%s}}`, id, meta, extra)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "demo__write_file")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return string(raw), err
	}
	// The gateway lists the demo tools once the executor answers.
	var first string
	testenv.Eventually(t, 60*time.Second, "the confirmation asked of the client", func() bool {
		out, err := post(1, "")
		first = out
		return err == nil && strings.Contains(out, "requestState")
	})
	var answer struct {
		Result struct {
			RequestState string `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(first), &answer); err != nil || answer.Result.RequestState == "" {
		t.Fatalf("the first round answered %s (%v)", first, err)
	}
	state := answer.Result.RequestState
	// A reviewer decides the call first.
	var rec *airlockv1.ApprovalRecord
	testenv.Eventually(t, 20*time.Second, "the call pending", func() bool {
		l, err := api.List(context.Background(), &airlockv1.ListRequest{AgentId: "bot"})
		if err != nil || len(l.GetRecords()) == 0 {
			return false
		}
		rec = l.GetRecords()[0]
		return true
	})
	callID := rec.GetCall().GetCallId()
	if _, err := decideAs(t, api, "alice", rec, airlockv1.DecisionKind_DECISION_KIND_REJECT, "no"); err != nil {
		t.Fatal(err)
	}
	// Every event of the call, by type.
	streamBytes := func() uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, config.Default().Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Bytes
	}
	events := func() (all uint64, byType map[string]uint64) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, config.Default().Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject.OfCall("bot", callID)))
		if err != nil {
			t.Fatal(err)
		}
		byType = map[string]uint64{}
		for subj, n := range info.State.Subjects {
			byType[subj[strings.LastIndex(subj, ".")+1:]] += n
			all += n
		}
		return all, byType
	}
	time.Sleep(2 * time.Second) // the rejection's events are stored
	before, _ := events()
	bytesBefore := streamBytes()

	// The client sends the state back, over and over.
	again := fmt.Sprintf(`,"requestState":%q,"inputResponses":{"airlock_confirm":{"action":"accept","content":{}}}`, state)
	const replays, workers = 1000, 16
	var next, failed atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				id := int(next.Add(1)) + 1
				if id > replays+1 {
					return
				}
				if _, err := post(id, again); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	after, byType := events()
	t.Logf("%d replays of one requestState in %s (%.0f/s, %d failed): the call's events went from %d to %d (%v), the events stream grew %d bytes, call %s",
		replays, took.Round(time.Millisecond), float64(replays)/took.Seconds(), failed.Load(), before, after, byType, streamBytes()-bytesBefore, callID)
	if after-before > 10 {
		t.Fatalf("%d replays of one confirmation state stored %d events, uncharged to the agent's budget", replays, after-before)
	}
}
