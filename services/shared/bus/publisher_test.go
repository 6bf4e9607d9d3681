package bus_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// On a real server PublishSync answers what PublishMsg answers: the
// stored sequence, a duplicate, a refused compare-and-append (a conflict
// for PublishAfter), a message over the stream's size limit, and no
// stream at all.
func TestPublishSyncAnswersAsPublishMsgOnAServer(t *testing.T) {
	_, js := testenv.Connect(t, testenv.StartNATS(t).URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PUBACK", Subjects: []string{"puback.>"}, MaxMsgSize: 1024}); err != nil {
		t.Fatal(err)
	}
	withID := func(subj, id string) *nats.Msg {
		m := nats.NewMsg(subj)
		m.Header.Set(jetstream.MsgIDHeader, id)
		return m
	}
	after := func(subj string, seq string) *nats.Msg {
		m := nats.NewMsg(subj)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, seq)
		return m
	}
	big := func() *nats.Msg {
		m := nats.NewMsg("puback.big")
		m.Data = make([]byte, 2048)
		return m
	}
	for i, m := range []struct {
		name string
		msg  func() *nats.Msg
		// what the server answers: a duplicate, or the error's code
		duplicate bool
		code      jetstream.ErrorCode
	}{
		{"stored", func() *nats.Msg { return nats.NewMsg("puback.a") }, false, 0},
		{"first_with_an_id", func() *nats.Msg { return withID("puback.b", "id-1") }, false, 0},
		{"a_duplicate", func() *nats.Msg { return withID("puback.b", "id-1") }, true, 0},
		{"appended_after_its_subjects_last", func() *nats.Msg { return after("puback.c", "0") }, false, 0},
		{"refused_after_a_stale_sequence", func() *nats.Msg { return after("puback.c", "0") }, false, jetstream.JSErrCodeStreamWrongLastSequence},
		{"over_the_size_limit", big, false, jetstream.JSErrCodeStreamMessageExceedsMaximum},
	} {
		t.Run(m.name, func(t *testing.T) {
			// The same message through each, on subjects of their own.
			suffix := []string{".sync", ".js"}
			var acks [2]*jetstream.PubAck
			var errs [2]error
			for j, publish := range []func(*nats.Msg) (*jetstream.PubAck, error){
				func(msg *nats.Msg) (*jetstream.PubAck, error) { return bus.PublishSync(ctx, js, msg) },
				func(msg *nats.Msg) (*jetstream.PubAck, error) { return js.PublishMsg(ctx, msg) },
			} {
				msg := m.msg()
				msg.Subject += suffix[j]
				if id := msg.Header.Get(jetstream.MsgIDHeader); id != "" {
					msg.Header.Set(jetstream.MsgIDHeader, id+suffix[j])
				}
				acks[j], errs[j] = publish(msg)
			}
			if (errs[0] == nil) != (errs[1] == nil) || apiCode(errs[0]) != apiCode(errs[1]) {
				t.Fatalf("PublishSync: %v; PublishMsg: %v", errs[0], errs[1])
			}
			if (acks[0] == nil) != (acks[1] == nil) || acks[0] != nil && (acks[0].Stream != acks[1].Stream || acks[0].Duplicate != acks[1].Duplicate || acks[0].Sequence+1 != acks[1].Sequence && !acks[0].Duplicate) {
				t.Fatalf("message %d: PublishSync acked %+v; PublishMsg %+v", i, acks[0], acks[1])
			}
			if apiCode(errs[0]) != m.code || (m.code == 0) != (errs[0] == nil) || m.code == 0 && acks[0].Duplicate != m.duplicate {
				t.Fatalf("message %d: PublishSync answered %+v, %v; want duplicate %v, error code %d", i, acks[0], errs[0], m.duplicate, m.code)
			}
		})
	}
	if _, err := bus.PublishSync(ctx, js, nats.NewMsg("nostream.x")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("a subject no stream holds: %v, want %v", err, jetstream.ErrNoStreamResponse)
	}
}

// apiCode is the JetStream error code err carries, 0 for none.
func apiCode(err error) jetstream.ErrorCode {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return api.ErrorCode
	}
	return 0
}

// A counting publisher counts each event it stored by its type, through
// every way of storing one, and nothing it did not store.
func TestACountingPublisherCountsWhatItStoredByType(t *testing.T) {
	d := testenv.Deps(t, testenv.Config(testenv.StartNATS(t).URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var counted []string
	p := bus.NewPublisher(d.JS, "test").Counting(func(typ string) { counted = append(counted, typ) })
	call := &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Tool: "demo__echo"}
	ev := func(body func(*airlockv1.Event)) *airlockv1.Event {
		e := envelope.ForCall(call, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "test"})
		body(e)
		return e
	}
	requested := ev(func(e *airlockv1.Event) {
		e.Body = &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: call}}
	})
	allowed := ev(func(e *airlockv1.Event) { e.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: call}} })
	started := ev(func(e *airlockv1.Event) { e.Body = &airlockv1.Event_Started{Started: &airlockv1.Started{Attempt: 1}} })
	completed := ev(func(e *airlockv1.Event) {
		e.Body = &airlockv1.Event_Completed{Completed: &airlockv1.Completed{Attempt: 1}}
	})
	all := "airlock.evt.bot.c1.>"
	if _, err := p.AppendAfter(ctx, []*airlockv1.Event{requested, allowed}, "", all, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishAfter(ctx, started, "", all, 0); !errors.Is(err, bus.ErrConflict) {
		t.Fatalf("an append after a stale sequence: %v, want a conflict", err)
	}
	ack, err := p.Publish(ctx, started, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishAfter(ctx, completed, "", all, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	if want := []string{"requested", "allowed", "started", "completed"}; !slices.Equal(counted, want) {
		t.Fatalf("counted %v, want %v", counted, want)
	}
}
