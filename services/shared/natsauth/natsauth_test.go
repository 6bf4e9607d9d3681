package natsauth_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestShippedConfigIsCurrent keeps deploy/nats/airlock.conf in step with
// the permissions this package defines (and that `airlock dev` and the
// trust-boundary tests run with).
func TestShippedConfigIsCurrent(t *testing.T) {
	want, err := natsauth.Shipped(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "nats", "airlock.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("deploy/nats/airlock.conf is stale: run `go tool task generate` (or `airlock nats config -o deploy/nats/airlock.conf`)")
	}
}

// TestShippedConfigLoadsInNATSServer parses the shipped file the way
// nats-server does, with every public key given in the environment.
func TestShippedConfigLoadsInNATSServer(t *testing.T) {
	dir := t.TempDir()
	for _, role := range append([]string{natsauth.RoleAdmin}, natsauth.ServiceRoles...) {
		pub, err := natsauth.EnsureSeed(filepath.Join(dir, role+".nk"))
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(strings.TrimPrefix(natsauth.EnvVar(role), "$"), pub)
	}
	c, err := natsauth.NewCredential(filepath.Join(dir, "bot"+natsauth.CredentialSuffix), "bot", "")
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := c.PublicKey()
	t.Setenv(strings.TrimPrefix(natsauth.AgentEnvVar("bot"), "$"), pub)
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "..", "deploy", "nats", "airlock.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Nkeys) != len(natsauth.ServiceRoles)+2 {
		t.Fatalf("%d nkey users, want one per service role, admin and the example agent", len(opts.Nkeys))
	}
	for _, u := range opts.Nkeys {
		if u.Account == nil || (u.Account.Name != natsauth.AccountAirlock && !(u.Nkey == pub && u.Account.Name == natsauth.AgentAccount("bot"))) {
			t.Fatalf("user %s is in account %v; want the services in %s and agent bot alone in %s", u.Nkey, u.Account, natsauth.AccountAirlock, natsauth.AgentAccount("bot"))
		}
	}
}

// TestServicesMayReadTheLastEventsTheirCodeReads reads, as each service's
// own user, the last stored event of the subjects that service's code reads:
// from the stream's leader, the executor's ledger (before a claim after a
// redelivery or take-over) and the policy service's sequencing of revisions;
// with Direct Get, the approval service's decision events (its sweeper's
// check) and those of a call in doubt (its call, its answer, its failure:
// services/approval/indoubt.go), and the approval_requested of a call its
// agent withdraws before it was recorded (api.go withdraw). A refused read
// is a permissions violation; an allowed one finds nothing (404).
func TestServicesMayReadTheLastEventsTheirCodeReads(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	event := func(typ string) string {
		s, err := subject.Event("bot", "c1", typ)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name, role, subject string
		// leader: read from the stream's leader (bus.LastStoredLeader).
		leader bool
	}{
		{"executor_reads_the_ledger_of_a_call", natsauth.RoleExecutor, subject.OfExecution("bot", "c1"), true},
		{"executor_reads_a_started_event", natsauth.RoleExecutor, event(subject.Started), true},
		{"approval_reads_an_approved_event", natsauth.RoleApproval, event(subject.Approved), false},
		{"approval_reads_a_rejected_event", natsauth.RoleApproval, event(subject.Rejected), false},
		{"approval_reads_a_changes_requested_event", natsauth.RoleApproval, event(subject.ChangesRequested), false},
		{"approval_reads_an_expired_event", natsauth.RoleApproval, event(subject.Expired), false},
		{"approval_reads_a_canceled_event", natsauth.RoleApproval, event(subject.Canceled), false},
		{"approval_reads_an_allowed_event", natsauth.RoleApproval, event(subject.Allowed), false},
		{"approval_reads_an_outcome_resolved_event", natsauth.RoleApproval, event(subject.OutcomeResolved), false},
		{"approval_reads_a_failed_event", natsauth.RoleApproval, event(subject.Failed), false},
		{"approval_reads_an_approval_requested_event", natsauth.RoleApproval, event(subject.ApprovalRequested), false},
		{"approval_reads_the_last_event_of_a_call_from_the_leader", natsauth.RoleApproval, subject.OfCall("bot", "c1"), true},
		{"approval_reads_a_requested_event_from_the_leader", natsauth.RoleApproval, event(subject.Requested), true},
		{"approval_reads_a_canceled_event_from_the_leader", natsauth.RoleApproval, event(subject.Canceled), true},
		{"approval_reads_a_denied_event_from_the_leader", natsauth.RoleApproval, event(subject.Denied), true},
		{"approval_reads_an_agents_newest_event_from_the_leader", natsauth.RoleApproval, subject.OfAgent("bot"), true},
		{"policy_reads_the_last_event_of_a_call", natsauth.RolePolicy, subject.OfCall("bot", "c1"), true},
		{"policy_reads_a_canceled_event_from_the_leader", natsauth.RolePolicy, event(subject.Canceled), true},
		{"policy_reads_a_changes_requested_event", natsauth.RolePolicy, event(subject.ChangesRequested), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, _ := n.Connect(tt.role)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			read := bus.LastStored
			if tt.leader {
				read = bus.LastStoredLeader
			}
			m, err := read(ctx, nc, n.Config.Stream.Name, tt.subject)
			if err != nil || m != nil {
				t.Fatalf("%s reading the last event on %s: %v %v (want nothing stored, no error)", tt.role, tt.subject, m, err)
			}
		})
	}
}

// The approval service withdraws a call its policy has not decided only
// while its agent has requests waiting in the intake: it counts them (the
// stream's info) and may not read them, every agent's raw arguments
// (helper-184, F4: it was first given the intake's plain message get,
// which reads any message by sequence).
func TestTheApprovalServiceCountsAnAgentsWaitingRequestsWithoutReadingThem(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	_, js := n.Connect(natsauth.RoleAdmin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "airlock.req.victim.c1", Data: []byte(`{"secret":"s3cr3t"}`)})
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := n.Connect(natsauth.RoleApproval)
	if count, err := bus.StoredOn(ctx, nc, n.Config.Intake.Name, subject.AgentRequests("victim")); err != nil || count != 1 {
		t.Fatalf("the approval service counting victim's waiting requests: %d, %v; want 1", count, err)
	}
	req, _ := json.Marshal(map[string]uint64{"seq": ack.Sequence})
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+n.Config.Intake.Name, req)
	if err == nil && strings.Contains(string(resp.Data), `"message"`) {
		t.Fatalf("the approval service read message %d of the intake: %s", ack.Sequence, resp.Data)
	}
}

// TestTheAuditServiceMayUnpinItsConsumer: an audit replica that stops
// releases its pinned pull (services/audit unpin) so a standby takes over
// at once; refused, every shutdown was a permissions violation and the
// standby waited out the pinned TTL.
func TestTheAuditServiceMayUnpinItsConsumer(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	nc, _ := n.Connect(natsauth.RoleAudit)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	const group = "audit"
	cons, err := js.CreateOrUpdateConsumer(ctx, n.Config.Stream.Name, jetstream.ConsumerConfig{
		Durable: "audit", AckPolicy: jetstream.AckAllPolicy, FilterSubject: subject.AllEvents,
		PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{group}, PinnedTTL: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond), jetstream.FetchPriorityGroup(group)); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, n.Config.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UnpinConsumer(ctx, "audit", group); err != nil {
		t.Fatalf("the audit user unpinning its consumer: %v", err)
	}
}

// TestTheApprovalServiceMayFollowWhetherClientsWait: the approval service
// watches and reads the presences the gateway writes (to redraw cards),
// and may not read the gateway's rejoin entries.
func TestTheApprovalServiceMayFollowWhetherClientsWait(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func(role string) *clientwait.Store {
		_, js := n.Connect(role)
		s, err := clientwait.Open(ctx, js, n.Config.Buckets.ClientWaits)
		if err != nil {
			t.Fatalf("%s opening the client-waits bucket: %v", role, err)
		}
		return s
	}
	gateway, approval := open(natsauth.RoleGateway), open(natsauth.RoleApproval)
	if _, err := gateway.Rejoins().Join(ctx, "r.somecall", clientwait.Rejoin{Call: "c0", Revision: 1}); err != nil {
		t.Fatal(err)
	}
	changed := make(chan string, 4)
	go approval.Follow(ctx, slog.New(slog.DiscardHandler), func(agent, call string, waiting bool) { changed <- agent + "/" + call })
	// Follow loads what is stored first; a hold written until one arrives
	// is a change it reports.
	deadline := time.Now().Add(8 * time.Second)
	for got := ""; got != "bot/c1"; {
		if err := gateway.Lease("bot", "c1", "").Hold(ctx, clientwait.Presence{Endpoint: "e", Until: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := gateway.Lease("bot", "c1", "").Hold(ctx, clientwait.Presence{Endpoint: "e", Until: time.Now()}); err != nil {
			t.Fatal(err)
		}
		select {
		case got = <-changed:
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the approval user's watch reported no change of a presence the gateway wrote")
			}
		}
	}
	if line, err := approval.LineOf(ctx, "bot", "c1", time.Now()); err != nil || line == "" {
		t.Fatalf("the approval user reading a presence: %q %v", line, err)
	}
	short, stop := context.WithTimeout(ctx, time.Second) // a refused request is answered by no one
	defer stop()
	if _, _, err := approval.Find(short, "r.somecall"); err == nil {
		t.Fatal("the approval user read a rejoin entry of the gateway")
	}
}

// TestTheConsoleMayListTheRegistryButNotPreview: the console asks the
// executor's tools endpoint, as its own user, to warn reviewers of a
// pending call of a tool the registry lacks, and hears the executor's
// notice that the tools changed; the preview endpoint stays the approval
// service's alone.
func TestTheConsoleMayListTheRegistryButNotPreview(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	exec, _ := n.Connect(natsauth.RoleExecutor)
	svc, err := micro.AddService(exec, micro.Config{Name: executorapi.Service, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	log := slog.New(slog.DiscardHandler)
	if err := svc.AddEndpoint(executorapi.EndpointTools, rpc.Handle(log, func() *airlockv1.ToolsListRequest { return &airlockv1.ToolsListRequest{} },
		func(context.Context, *airlockv1.ToolsListRequest) (*airlockv1.ToolsListResponse, error) {
			return &airlockv1.ToolsListResponse{Tools: []*airlockv1.UpstreamTool{{Name: "demo__echo", Server: "demo", Tool: "echo"}}}, nil
		}), micro.WithEndpointSubject(executorapi.Tools)); err != nil {
		t.Fatal(err)
	}
	if err := svc.AddEndpoint(executorapi.EndpointPreview, rpc.Handle(log, func() *airlockv1.PreviewRequest { return &airlockv1.PreviewRequest{} },
		func(context.Context, *airlockv1.PreviewRequest) (*airlockv1.PreviewResponse, error) {
			return &airlockv1.PreviewResponse{}, nil
		}), micro.WithEndpointSubject(executorapi.Preview)); err != nil {
		t.Fatal(err)
	}
	testenv.Subscribed(t, exec)
	nc, _ := n.Connect(natsauth.RoleConsole)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	list, err := executorapi.New(nc).List(ctx)
	if err != nil || len(list.GetTools()) != 1 {
		t.Fatalf("the console user listing the registry's tools: %v %v", list, err)
	}
	if _, err := executorapi.New(nc).Preview(ctx, &airlockv1.ToolCall{}, time.Second); err == nil {
		t.Fatal("the console user asked the executor for a preview")
	}
	// It hears the executor say the tools changed, to ask again at once.
	heard := make(chan struct{}, 1)
	sub, err := executorapi.OnChanged(nc, func() {
		select {
		case heard <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Publish(subject.ToolsChanged, []byte(`{"server":"demo"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
	case <-ctx.Done():
		t.Fatal("the console user did not hear the executor's notice that the tools changed")
	}
}

// TestDevUsersOnlyReads: Dev.Users answers lookups (who a permission
// violation was), so it writes nothing: on a data dir `airlock dev` has not
// set up it says so instead of creating seeds; once Ensure (where dev sets
// up) has made them, it lists every role and agent and still writes nothing.
func TestDevUsersOnlyReads(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setUp     bool
		wantUsers int // the three service roles and the first agent
		wantErr   string
	}{
		{"a_data_dir_dev_has_not_set_up", false, 0, "start `airlock dev`"},
		{"a_data_dir_dev_has_set_up", true, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := natsauth.Dev{DataDir: t.TempDir()}
			if tc.setUp {
				if err := d.Ensure(config.Default(), "nats://127.0.0.1:4222"); err != nil {
					t.Fatal(err)
				}
			}
			before := filesUnder(t, d.DataDir)
			users, err := d.Users()
			switch {
			case tc.wantErr == "" && (err != nil || len(users) != tc.wantUsers):
				t.Fatalf("Users() = %d users, %v; want %d", len(users), err, tc.wantUsers)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Users() = %v, %v; want an error saying %q", users, err, tc.wantErr)
			}
			if after := filesUnder(t, d.DataDir); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Fatalf("Users() wrote files: before %v, after %v", before, after)
			}
		})
	}
}

// filesUnder lists the files under dir, sorted.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Only a service's own users may answer the micro discovery requests of
// its name: the approval service takes a replica whose ping finds no
// responder for gone and announces its calls, so another service's user
// (compromised, or someone debugging with `nats sub '$SRV.>'` under its
// credentials) must not answer for a replica that is gone (R-held F5).
func TestOnlyAServicesOwnUsersAnswerItsPings(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	pinger, _ := n.Connect(natsauth.RoleApproval)
	const gone = "$SRV.PING.approval.GONE0REPLICA"
	for _, tt := range []struct {
		role    string
		answers bool
	}{
		{natsauth.RoleApproval, true},
		{natsauth.RolePolicy, false},
		{natsauth.RoleExecutor, false},
		{natsauth.RoleConsole, false},
		{natsauth.RoleGateway, false},
	} {
		t.Run(tt.role, func(t *testing.T) {
			nc, _ := n.Connect(tt.role)
			sub, err := nc.Subscribe(gone, func(m *nats.Msg) { _ = m.Respond([]byte("{}")) })
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err = pinger.RequestWithContext(ctx, gone, nil)
			if answered := err == nil; answered != tt.answers {
				t.Fatalf("the %s user answering the ping of an approval replica: answered %v (%v), want %v", tt.role, answered, err, tt.answers)
			}
		})
	}
	// The approval service's own micro service still answers, by name and
	// by instance.
	nc, _ := n.Connect(natsauth.RoleApproval)
	svc, err := micro.AddService(nc, micro.Config{Name: approvalapi.Service, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	testenv.Subscribed(t, nc)
	for _, id := range []string{"", svc.Info().ID} {
		subj, err := micro.ControlSubject(micro.PingVerb, approvalapi.Service, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pinger.Request(subj, nil, 3*time.Second); err != nil {
			t.Fatalf("the approval service did not answer %s: %v", subj, err)
		}
	}
}

// TestTheConsoleMayAskEveryServiceForItsStats: the Health page lists the
// services that answer $SRV.STATS; under the shipped permissions the
// console user could publish only $SRV.PING, so the page listed none.
func TestTheConsoleMayAskEveryServiceForItsStats(t *testing.T) {
	n := testenv.StartSecureNATS(t)
	exec, _ := n.Connect(natsauth.RoleExecutor)
	svc, err := micro.AddService(exec, micro.Config{Name: executorapi.Service, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	testenv.Subscribed(t, exec)
	nc, _ := n.Connect(natsauth.RoleConsole)
	msg, err := nc.Request("$SRV.STATS", nil, 3*time.Second)
	if err != nil {
		t.Fatalf("the console user asking every service for its stats: %v", err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(msg.Data, &stats); err != nil || stats.Name != executorapi.Service {
		t.Fatalf("the stats answer: %s (%v); want the executor's", msg.Data, err)
	}
}
