package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

const (
	pendingState  = airlockv1.ApprovalState_APPROVAL_STATE_PENDING
	approveKind   = airlockv1.DecisionKind_DECISION_KIND_APPROVE
	writeTool     = "demo__write_file"
	eventsStream  = "AIRLOCK_EVENTS"
	requestStream = "AIRLOCK_REQUESTS"
)

// TestTrustBoundaryUnderTheShippedPermissions attacks airlock as SPEC §6's
// hostile agent would — with valid credentials of its own, choosing every id,
// header and reply subject — against the production layout: the shipped
// accounts and permissions, each service its own process and NATS user.
// Every attack must fail in effect (nothing runs, nothing changes, the
// victim's call is still decided normally) and the legitimate paths must
// keep working.
func TestTrustBoundaryUnderTheShippedPermissions(t *testing.T) {
	p := startProdLayout(t, "bot", "evil")
	url := p.nats.Server.URL()
	bot := connectAgent(t, p.nats.CredentialFile("bot"), url)
	evil := connectAgent(t, p.nats.CredentialFile("evil"), url)
	api := p.frontend(t)
	_, adminJS := p.nats.Connect(natsauth.RoleAdmin)

	t.Run("the_legitimate_agent_paths_work", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := bot.client.Do(ctx, airlock.Call{Tool: "demo__echo", Args: map[string]any{"text": "hi"}})
		if err != nil || out.Status != airlock.StatusCompleted || !strings.Contains(string(out.Result), "hi") {
			t.Fatalf("auto-allowed call: %+v %v", out, err)
		}
		id := bot.mustSubmit(airlock.Call{ID: "legit-w", Tool: writeTool, Args: map[string]any{"path": "legit.txt", "content": "ok"}})
		waitApproval(t, api, "bot", id, 1, pendingState)
		if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Revision: 1, Kind: approveKind, Principal: reviewer("alice")}); err != nil {
			t.Fatal(err)
		}
		// A restarted agent (a new connection) still gets the outcome.
		again := connectAgent(t, p.nats.CredentialFile("bot"), url)
		if out := again.await(id, 1); out.Status != airlock.StatusCompleted {
			t.Fatalf("after a restart the agent got %+v", out)
		}
		c := bot.mustSubmit(airlock.Call{ID: "legit-cancel", Tool: writeTool, Args: map[string]any{"path": "no.txt", "content": "x"}})
		waitApproval(t, api, "bot", c, 1, pendingState)
		if err := bot.client.Cancel(ctx, c, "not needed"); err != nil {
			t.Fatal(err)
		}
		if out := bot.await(c, 1); out.Status != airlock.StatusCanceled {
			t.Fatalf("canceled call ended %+v", out)
		}
	})

	// A pending call of bot's that every attack below tries to approve,
	// run, or take over; it must end exactly as its reviewer decides.
	victim := bot.mustSubmit(airlock.Call{ID: "victim", Tool: writeTool, Args: map[string]any{"path": "victim.txt", "content": "bot's"}})
	waitApproval(t, api, "bot", victim, 1, pendingState)
	// What the channels record follows the record a moment later (the
	// victim's announcement, the canceled call's update): counted before
	// the attacks, not taken for one of them (a fresh-clone CI saw the
	// events stream grow by one).
	notified := func(call string, n int) {
		t.Helper()
		subj, _ := subject.Event("bot", call, subject.Notified)
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("%d notified events of %s", n, call), func() bool {
			return len(testenv.Events(t, adminJS, subj)) >= n
		})
	}
	notified(victim, 1)
	notified("legit-cancel", 2)
	before := streamMsgs(t, adminJS, eventsStream)

	t.Run("an_agent_reaches_no_jetstream_api_no_service_and_no_other_agent", func(t *testing.T) {
		decide, _ := json.Marshal(map[string]any{"agentId": "bot", "callId": victim, "revision": 1, "kind": "DECISION_KIND_APPROVE",
			"principal": map[string]string{"id": "alice", "type": "ACTOR_TYPE_HUMAN"}})
		consumer, _ := json.Marshal(map[string]any{"stream_name": eventsStream, "config": map[string]any{
			"name": "evil", "deliver_subject": "airlock.api.approval.decide", "deliver_group": "q", "filter_subject": "airlock.evt.evil.>"}})
		attacks := []struct {
			subject, why string
			data         []byte
		}{
			{"$JS.API.CONSUMER.CREATE." + eventsStream + ".evil.airlock.evt.evil.>", "a push consumer delivering to a service's request subject", consumer},
			{"$JS.API.CONSUMER.CREATE." + requestStream + ".evil", "a consumer on the intake", consumer},
			{"$JS.API.STREAM.PURGE." + eventsStream, "purging the audit trail", nil},
			{"$JS.API.STREAM.DELETE." + eventsStream, "deleting the audit trail", nil},
			{"$JS.API.STREAM.UPDATE." + eventsStream, "shortening its retention", []byte(`{"name":"AIRLOCK_EVENTS","subjects":["airlock.evt.>"],"max_age":1}`)},
			{"$JS.API.STREAM.PURGE." + requestStream, "purging other agents' requests", nil},
			{"$JS.API.DIRECT.GET." + eventsStream, "reading any sequence", []byte(`{"seq":1}`)},
			{"$JS.API.DIRECT.GET." + eventsStream + ".airlock.evt.bot.>", "reading another agent's events", nil},
			// NATS cannot tell a literal "*" from a wildcard: a Direct Get of
			// its own subjects with one walks the agent's whole history under
			// the stream's lock. An agent reads its calls through airlock.
			{"$JS.API.DIRECT.GET." + eventsStream + ".airlock.evt.evil.*.requested", "a wildcard read of its own events on the stream", nil},
			{"$JS.API.DIRECT.GET." + eventsStream + ".airlock.evt.evil.x.requested", "reading its own events on the stream", nil},
			{"airlock.agent.bot.events", "reading another agent's call through airlock", []byte(`{"call_id":"victim","types":["requested"]}`)},
			{"airlock.api.approval.decide", "deciding as alice", decide},
			{"airlock.api.approval.grants.create", "planting a standing grant", []byte(`{"fromAgentId":"evil","fromCallId":"x"}`)},
			{"airlock.api.policy.rules.put", "an allow-everything rule", []byte(`{"rule":{"id":"evil","priority":1,"effect":"allow"},"by":{"id":"alice"}}`)},
			{"$KV.airlock_grants.grant_evil", "writing the grants bucket", []byte("x")},
			{"$KV.airlock_approvals.bot." + victim + ".1", "overwriting an approval record", []byte("x")},
			{"airlock.evt.evil.x.approved", "publishing a decision", []byte("x")},
			{"airlock.evt.bot." + victim + ".exec.started", "claiming another agent's call", []byte("x")},
			{"airlock.req.bot.stolen", "requesting as another agent", []byte("x")},
			{"airlock.agent.bot.cancel", "canceling another agent's call", []byte(`{"call_id":"victim"}`)},
			{"$SRV.PING", "discovering the services", nil},
		}
		var subjects []string
		var data [][]byte
		for _, a := range attacks {
			subjects, data = append(subjects, a.subject), append(data, a.data)
		}
		for i, err := range evil.requestEach(subjects, data) {
			if err == nil {
				t.Errorf("%s (%s) was answered", attacks[i].why, attacks[i].subject)
				continue
			}
			evil.refused(attacks[i].subject)
		}
		for _, subj := range []string{"airlock.out.bot.>", "airlock.evt.>", "airlock.api.>", "_INBOX.>", "_INBOX_bot.>"} {
			sub, err := evil.nc.SubscribeSync(subj)
			if err == nil {
				_ = evil.nc.Flush()
				evil.refused(subj)
				if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
					t.Errorf("evil received %s on %s", m.Subject, subj)
				}
			}
		}
		// In effect: no consumer but the services', no grant, no record
		// changed, nothing stored, the victim still waits for its reviewer.
		es, err := adminJS.Stream(context.Background(), eventsStream)
		if err != nil {
			t.Fatal(err)
		}
		for info := range es.ListConsumers(context.Background()).Info() {
			if info.Name == "evil" || info.Config.DeliverSubject != "" {
				t.Errorf("consumer %q (delivering to %q) exists on the events stream", info.Name, info.Config.DeliverSubject)
			}
		}
		kv, _ := adminJS.KeyValue(context.Background(), p.nats.Config.Buckets.Grants)
		keys, err := bus.Keys(context.Background(), kv, ">")
		if err != nil {
			t.Errorf("list the grants: %v", err)
		}
		for _, k := range keys {
			t.Errorf("grant %s exists", k)
		}
		if n := streamMsgs(t, adminJS, eventsStream); n != before {
			t.Errorf("the events stream went from %d to %d messages", before, n)
		}
		waitApproval(t, api, "bot", victim, 1, pendingState)
	})

	t.Run("ids_an_agent_chooses_never_reach_another_agents_calls", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Message ids equal to the victim's event ids, and to a future call's.
		for _, id := range []string{"bot." + victim + ".1.decision", "bot." + victim + ".1.approved", "bot.future.1.requested", "bot.future.1.decision", "future.1.approved"} {
			call := "pre_" + strings.ReplaceAll(id, ".", "_")
			m := nats.NewMsg("airlock.req.evil." + call)
			m.Header.Set(jetstream.MsgIDHeader, id)
			m.Header.Set("Content-Type", "application/json")
			m.Data = []byte(`{"requested":{"call":{"callId":"` + call + `","tool":"demo__echo"}}}`)
			if _, err := evil.client.Submit(ctx, airlock.Call{ID: call, Tool: "demo__echo"}); err != nil {
				t.Fatal(err)
			}
			if err := evil.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		// The same call id, a revision 2 of it, and the same thread as bot's.
		mine := bot.mustSubmit(airlock.Call{ID: "future", Thread: "T1", Tool: writeTool, Args: map[string]any{"path": "future.txt", "content": "bot's"}})
		other := bot.mustSubmit(airlock.Call{ID: "future2", Thread: "T1", Tool: writeTool, Args: map[string]any{"path": "future2.txt", "content": "bot's"}})
		evil.mustSubmit(airlock.Call{ID: "future", Thread: "T1", Tool: writeTool, Args: map[string]any{"path": "future.txt", "content": "evil's"}})
		hijack := evil.mustSubmit(airlock.Call{ID: victim, Revision: 2, Thread: "T1", Tool: writeTool, Args: map[string]any{"path": "victim.txt", "content": "evil's"}})
		if out := evil.await(hijack, 2); out.Status != airlock.StatusInvalid || !strings.Contains(out.Reason, "revision 1") {
			t.Fatalf("evil's revision 2 of %s: %+v, want invalid", hijack, out)
		}
		evilRec := waitApproval(t, api, "evil", "future", 1, pendingState)
		mineRec := waitApproval(t, api, "bot", mine, 1, pendingState)
		otherRec := waitApproval(t, api, "bot", other, 1, pendingState)

		// Approving bot's thread T1 approves exactly the two calls listed.
		resp, err := api.ApproveThread(ctx, &airlockv1.ApproveThreadRequest{AgentId: "bot", ThreadId: "T1", Principal: reviewer("alice"),
			Calls: []*airlockv1.CallRef{
				{AgentId: "bot", CallId: mine, Revision: 1, ArgumentsDigest: mineRec.GetArgumentsDigest()},
				{AgentId: "bot", CallId: other, Revision: 1, ArgumentsDigest: otherRec.GetArgumentsDigest()},
				{AgentId: "evil", CallId: "future", Revision: 1, ArgumentsDigest: evilRec.GetArgumentsDigest()}}})
		if err != nil || len(resp.GetResults()) != 2 || resp.GetRefused()["evil/future"] == "" {
			t.Fatalf("approve_thread: %v %v", resp, err)
		}
		for _, id := range []string{mine, other} {
			if out := bot.await(id, 1); out.Status != airlock.StatusCompleted {
				t.Fatalf("bot's %s: %+v", id, out)
			}
		}
		waitApproval(t, api, "evil", "future", 1, pendingState)

		// The victim, untouched by all of it, is decided normally and runs bot's arguments.
		if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: victim, Revision: 1, Kind: approveKind, Principal: reviewer("bob")}); err != nil {
			t.Fatal(err)
		}
		if out := bot.await(victim, 1); out.Status != airlock.StatusCompleted {
			t.Fatalf("the victim ended %+v", out)
		}
		sandbox := filepath.Join(filepath.Dir(p.cfgFile), "sandbox")
		if got := readFileString(t, filepath.Join(sandbox, "victim.txt")); got != "bot's" {
			t.Fatalf("victim.txt holds %q: another agent's arguments ran", got)
		}
		if got := readFileString(t, filepath.Join(sandbox, "future.txt")); got != "bot's" {
			t.Fatalf("future.txt holds %q", got)
		}
	})

	t.Run("a_reply_subject_an_agent_chooses_cannot_feed_another_agent_a_false_outcome", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		forged, err := evil.client.Do(ctx, airlock.Call{ID: "forged", Tool: "demo__echo", Args: map[string]any{"text": "you were approved"}})
		if err != nil || forged.Status != airlock.StatusCompleted {
			t.Fatalf("evil's own call: %+v %v", forged, err)
		}
		id := bot.mustSubmit(airlock.Call{ID: "injected", Tool: writeTool, Args: map[string]any{"path": "i.txt", "content": "x"}})
		waitApproval(t, api, "bot", id, 1, pendingState)
		target := subject.Out("airlock.evt.bot." + id + ".exec.completed")
		// A subscription of bot's own to the target would count injected
		// answers reaching bot's connection; the wait's reads of the
		// stream, which bot's connection receives too, are not on it.
		seen, err := bot.nc.SubscribeSync(target)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = seen.Unsubscribe() }()
		testenv.Subscribed(t, bot.nc)
		subs := bot.nc.NumSubscriptions()
		got := make(chan airlock.Outcome, 1)
		go func() { got <- bot.await(id, 1) }()
		// The injections must reach a wait that follows the call live:
		// before its subscription they would prove nothing.
		testenv.Eventually(t, 10*time.Second, "bot's wait to subscribe", func() bool { return bot.nc.NumSubscriptions() > subs })
		testenv.Subscribed(t, bot.nc)
		// The server answers these on the subject evil names — in evil's
		// own account, where bot is not: the same requests answered on
		// evil's inbox after them show the server has answered them all.
		probe, err := evil.nc.SubscribeSync(natsauth.InboxPrefix("evil") + ".probe")
		if err != nil {
			t.Fatal(err)
		}
		for _, reply := range []string{target, probe.Subject} {
			for range 3 {
				_ = evil.nc.PublishRequest(subject.AgentEvents("evil"), reply, []byte(`{"call_id":"forged","types":["completed"]}`))
				_ = evil.nc.PublishRequest("airlock.req.evil.pubackinject", reply, []byte("x"))
			}
		}
		for i := range 6 {
			if _, err := probe.NextMsg(10 * time.Second); err != nil {
				t.Fatalf("answer %d of 6 on evil's own inbox did not come (%v): the server did not answer what evil injected", i+1, err)
			}
		}
		if n, _, err := seen.Pending(); err != nil || n != 0 {
			t.Fatalf("%d answers evil had sent to bot's outcome subject reached bot's connection (%v): want them kept in evil's account", n, err)
		}
		if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Revision: 1, Kind: airlockv1.DecisionKind_DECISION_KIND_REJECT,
			Reason: "no", Principal: reviewer("alice")}); err != nil {
			t.Fatal(err)
		}
		if out := <-got; out.Status != airlock.StatusRejected {
			t.Fatalf("bot's call reported %+v: an injected message was taken for its outcome", out)
		}
	})

	t.Run("decisions_not_issued_by_the_services_run_nothing_even_when_a_writer_is_misconfigured", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		id := bot.mustSubmit(airlock.Call{ID: "forge-target", Tool: writeTool, Args: map[string]any{"path": "forged.txt", "content": "x"}})
		rec := waitApproval(t, api, "bot", id, 1, pendingState)
		// The admin stands in for any writer that should not decide: an
		// unsealed approved event, and decide requests no front-end sealed.
		adminNC, adminJS := p.nats.Connect(natsauth.RoleAdmin)
		ev := &airlockv1.Event{EventId: "forged-approval", AgentId: "bot", CallId: id, Revision: 1,
			Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: rec.GetCall(), ArgumentsDigest: rec.GetArgumentsDigest()}}}
		if _, err := bus.NewPublisher(adminJS, "airlock/approval").Publish(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
		testenv.WaitForEvent(t, adminJS, subject.OfCall("bot", id), subject.UnauthorizedAttempt, 20*time.Second)
		for _, c := range []*approvalapi.Client{approvalapi.New(adminNC, seal.Key{}, ""), approvalapi.New(adminNC, seal.NewKey(), "console")} {
			_, err := c.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Revision: 1, Kind: approveKind, Principal: reviewer("alice")})
			if apierr.CodeOf(err) != apierr.NotAuthorized {
				t.Fatalf("an unsealed decide answered %v", err)
			}
		}
		if _, err := policyapi.New(adminNC, seal.Key{}, "").PutRule(ctx, &airlockv1.PolicyRule{Id: "open", Priority: 1, Effect: "allow"}, reviewer("alice")); apierr.CodeOf(err) != apierr.NotAuthorized {
			t.Fatalf("an unsealed rule change answered %v", err)
		}
		rec = waitApproval(t, api, "bot", id, 1, pendingState)
		if len(rec.GetVotes()) != 0 {
			t.Fatalf("votes %v", rec.GetVotes())
		}
		if got := testenv.SubjectTypes(t, adminJS, subject.OfExecution("bot", id)); len(got) != 0 {
			t.Fatalf("the forged approval started something: %v", got)
		}
		if n := len(testenv.SubjectTypes(t, adminJS, "airlock.evt.bot."+id+".unauthorized_attempt")); n < 3 {
			t.Fatalf("%d unauthorized attempts recorded on the call, want the forged event and both decide requests", n)
		}
	})

	t.Run("the_services_never_needed_a_permission_they_lack", func(t *testing.T) {
		for role, proc := range p.services {
			if out := proc.Output(); strings.Contains(out, "Permissions Violation") {
				t.Errorf("%s was refused something it needs:\n%s", role, out)
			}
		}
	})

	t.Run("each_service_holds_only_its_own_permissions", func(t *testing.T) {
		forbidden := map[string][]string{
			natsauth.RoleAudit:    {"$KV.airlock_grants.x", "airlock.evt.bot.x.approved", "$JS.API.STREAM.PURGE." + eventsStream},
			natsauth.RoleConsole:  {"$KV.airlock_grants.x", "airlock.evt.bot.x.approved", "$JS.API.STREAM.DELETE." + eventsStream, "$KV.airlock_approvals.x"},
			natsauth.RolePolicy:   {"airlock.evt.bot.x.approved", "airlock.evt.bot.x.exec.started", "$KV.airlock_approvals.x", "$JS.API.STREAM.PURGE." + requestStream},
			natsauth.RoleExecutor: {"airlock.evt.bot.x.approved", "$KV.airlock_grants.x", "airlock.api.approval.decide"},
			natsauth.RoleApproval: {"airlock.evt.bot.x.exec.started", "$KV.airlock_executions.x", "airlock.req.bot.x"},
			natsauth.RoleGateway:  {"airlock.evt.bot.x.approved", "$KV.airlock_grants.x", "airlock.api.approval.grants.create"},
		}
		// Every role's requests at once; then what each was told.
		answered := map[string][]error{}
		watched := map[string]*hostile{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for role, subjects := range forbidden {
			nc, _ := p.nats.Connect(role)
			w := &hostile{t: t, agent: role, nc: nc}
			nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				w.mu.Lock()
				w.errs = append(w.errs, err.Error())
				w.mu.Unlock()
			})
			watched[role] = w
			wg.Add(1)
			go func() {
				defer wg.Done()
				data := make([][]byte, len(subjects))
				for i := range data {
					data[i] = []byte("x")
				}
				errs := w.requestEach(subjects, data)
				mu.Lock()
				answered[role] = errs
				mu.Unlock()
			}()
		}
		wg.Wait()
		for role, subjects := range forbidden {
			for i, subj := range subjects {
				if answered[role][i] == nil {
					t.Errorf("%s: %s was answered", role, subj)
					continue
				}
				watched[role].refused(subj)
			}
		}
		// The events stream refuses purges and message deletes from anyone,
		// even the operator.
		s, _ := adminJS.Stream(context.Background(), eventsStream)
		if err := s.Purge(context.Background()); err == nil {
			t.Fatal("the admin purged the events stream")
		}
		if err := s.DeleteMsg(context.Background(), 1); err == nil {
			t.Fatal("the admin deleted an event")
		}
	})
}

// TestAirlockDevIsSecureByDefault: `airlock dev`'s embedded NATS takes only
// the credentials dev generated, agents added with `airlock agents add`
// are confined to their own calls, and the quick start still works.
func TestAirlockDevIsSecureByDefault(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	if nc, err := nats.Connect(dev.NATSURL); err == nil {
		nc.Close()
		t.Fatal("dev's NATS accepted a connection without credentials")
	}
	if !strings.Contains(dev.Output(), "agent     bot") || !strings.Contains(dev.Output(), "airlock agents add NAME") {
		t.Fatalf("dev does not say where the agent credential is or how to add one:\n%s", dev.Output())
	}
	if out, err := runAirlock(t, "agents", "add", "_system", "--data", dev.DataDir); err == nil || !strings.Contains(out, "reserves") {
		t.Fatalf("agents add _system: %v\n%s", err, out)
	}
	dev.Agent(t, "evil") // added while dev runs; dev reloads its accounts
	bot := connectAgent(t, dev.Creds("bot"), dev.NATSURL)
	evil := connectAgent(t, dev.Creds("evil"), dev.NATSURL)
	api := dev.API(t)

	out, code, stderr := airlockCall(t, dev, "--tool", "demo__echo", "--args", `{"text":"quick start"}`)
	if code != 0 || out.Status != "completed" {
		t.Fatalf("airlock call: exit %d %+v %s", code, out, stderr)
	}
	id := bot.mustSubmit(airlock.Call{ID: "dev-victim", Tool: writeTool, Args: map[string]any{"path": "v.txt", "content": "x"}})
	waitApproval(t, api, "bot", id, 1, pendingState)
	for _, subj := range []string{"airlock.api.approval.decide", "$JS.API.CONSUMER.CREATE.AIRLOCK_EVENTS.x", "airlock.req.bot.x", "$KV.airlock_grants.x"} {
		if err := evil.request(subj, []byte(`{}`)); err == nil {
			t.Errorf("%s was answered for evil", subj)
		}
		evil.refused(subj)
	}
	if err := bot.request("$JS.API.STREAM.PURGE.AIRLOCK_EVENTS", nil); err == nil {
		t.Error("an agent purged the events stream")
	}
	waitApproval(t, api, "bot", id, 1, pendingState)

	// A local process that reads no credential file cannot act as anyone:
	// a forged decide over an operator connection is still refused.
	nc, _ := dev.Admin(t)
	if _, err := approvalapi.New(nc, seal.Key{}, "").Decide(context.Background(), &airlockv1.DecideRequest{AgentId: "bot", CallId: id, Revision: 1,
		Kind: approveKind, Principal: reviewer("admin")}); apierr.CodeOf(err) != apierr.NotAuthorized {
		t.Fatalf("an unsealed decide in dev answered %v", err)
	}
}

// runAirlock runs the airlock binary with args and returns its combined output.
func runAirlock(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := execCommand(airlockBinary(t), args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
