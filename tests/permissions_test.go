package tests

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestShippedNATSPermissionsConfineAgents runs the nats-server configuration
// shipped in deploy/nats and checks SPEC §6 against it: an agent can submit
// and follow its own calls, and can neither publish a decision, speak for
// another agent, nor read another agent's calls.
func TestShippedNATSPermissionsConfineAgents(t *testing.T) {
	for _, u := range []string{"ADMIN", "POLICY", "APPROVAL", "EXECUTOR", "AUDIT", "CONSOLE", "AGENT_BOT"} {
		t.Setenv("AIRLOCK_"+u+"_PASSWORD", "pw-"+u)
	}
	srv, err := embedded.Start(embedded.Options{ConfigFile: filepath.Join("..", "deploy", "nats", "airlock.conf"), Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin, err := nats.Connect(srv.URL(), nats.UserInfo("admin", "pw-ADMIN"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adminJS, _ := jetstream.New(admin)
	if _, err := bus.Provision(ctx, adminJS, config.Default()); err != nil {
		t.Fatal(err)
	}

	violations := make(chan error, 16)
	bot, err := nats.Connect(srv.URL(), nats.UserInfo("bot", "pw-AGENT_BOT"), nats.CustomInboxPrefix("_INBOX_bot"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer bot.Close()
	client, err := airlock.New(bot, "bot")
	if err != nil {
		t.Fatal(err)
	}

	// Allowed: submit its own call, then follow it to the outcome.
	id, err := client.Submit(ctx, airlock.Call{Tool: "demo__echo"})
	if err != nil {
		t.Fatalf("the agent could not submit its own call: %v", err)
	}
	done := &airlockv1.Event{EventId: envelope.EventID(id, 1, "result"), AgentId: "bot", CallId: id, Revision: 1,
		Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `"ok"`}}}
	if _, err := envelope.NewPublisher(adminJS, "airlock/executor").Publish(ctx, done, ""); err != nil {
		t.Fatal(err)
	}
	out, err := client.Await(ctx, id)
	if err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("the agent could not follow its own call: %+v %v", out, err)
	}

	// Refused: a decision about its own call, and a request as another agent.
	botJS, _ := jetstream.New(bot)
	for _, subj := range []string{"airlock.evt.bot." + id + ".approved", "airlock.evt.other.c1.requested", "airlock.evt.bot.c2.completed"} {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := botJS.Publish(pctx, subj, []byte("forged"))
		pcancel()
		if err == nil {
			t.Errorf("agent bot published %s", subj)
		}
	}
	testenv.Eventually(t, 5*time.Second, "permission violations reported to the agent", func() bool { return len(violations) >= 3 })
	for _, subj := range []string{"airlock.evt.bot." + id + ".approved", "airlock.evt.other.c1.requested", "airlock.evt.bot.c2.completed"} {
		s, _ := adminJS.Stream(ctx, config.Default().Stream.Name)
		if _, err := s.GetLastMsgForSubject(ctx, subj); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("%s was stored (err %v)", subj, err)
		}
	}

	// Refused: reading from, redefining or deleting a service's durable consumer.
	if _, err := adminJS.CreateOrUpdateConsumer(ctx, config.Default().Stream.Name, jetstream.ConsumerConfig{
		Durable: "executor", FilterSubject: "airlock.evt.*.*.approved", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for name, try := range map[string]func(context.Context) error{
		"fetch": func(c context.Context) error {
			cons, err := botJS.Consumer(c, config.Default().Stream.Name, "executor")
			if err != nil {
				return err
			}
			_, err = cons.Fetch(1, jetstream.FetchMaxWait(300*time.Millisecond))
			return err
		},
		"redefine": func(c context.Context) error {
			_, err := botJS.CreateOrUpdateConsumer(c, config.Default().Stream.Name, jetstream.ConsumerConfig{
				Durable: "executor", FilterSubject: "airlock.evt.bot.>", AckPolicy: jetstream.AckExplicitPolicy})
			return err
		},
		"delete": func(c context.Context) error {
			return botJS.DeleteConsumer(c, config.Default().Stream.Name, "executor")
		},
	} {
		c, ccancel := context.WithTimeout(ctx, time.Second)
		err := try(c)
		ccancel()
		if err == nil {
			t.Errorf("agent bot could %s the executor's consumer", name)
		}
	}
	if info, err := adminJS.Consumer(ctx, config.Default().Stream.Name, "executor"); err != nil || info.CachedInfo().Config.FilterSubject != "airlock.evt.*.*.approved" {
		t.Fatalf("the executor's consumer was changed or removed by an agent (%v)", err)
	}

	// Refused: reading another agent's calls.
	other, _ := airlock.New(bot, "other")
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	if _, err := other.Await(actx, "c1"); err == nil {
		t.Fatal("agent bot followed agent other's call")
	}
}
