package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
)

// Msg is an encoded event as a NATS message (no copy: the header map is shared).
func Msg(m envelope.Message) *nats.Msg {
	return &nats.Msg{Subject: m.Subject, Header: nats.Header(m.Header), Data: m.Data}
}

// Encode is envelope.Encode as a NATS message for the events stream.
func Encode(ev *airlockv1.Event, source, parentTrace string) (*nats.Msg, error) {
	m, err := envelope.Encode(ev, source, parentTrace)
	if err != nil {
		return nil, err
	}
	return Msg(m), nil
}

// EncodeRequest is envelope.EncodeRequest as a NATS message for the intake stream.
func EncodeRequest(ev *airlockv1.Event, source, parentTrace string) (*nats.Msg, error) {
	m, err := envelope.EncodeRequest(ev, source, parentTrace)
	if err != nil {
		return nil, err
	}
	return Msg(m), nil
}

// Publisher publishes events to JetStream in airlock's envelope.
type Publisher struct {
	js     jetstream.JetStream
	source string
	// stored, when set, is called with the type of every event stored.
	stored func(typ string)
}

// NewPublisher returns a Publisher whose events name source as ce-source,
// e.g. "airlock/policy" or "agent/bot-1".
func NewPublisher(js jetstream.JetStream, source string) *Publisher {
	return &Publisher{js: js, source: source}
}

// Counting makes the publisher call stored with the type of every event it
// stores (services count them as airlock_events_published_total).
func (p *Publisher) Counting(stored func(typ string)) *Publisher {
	p.stored = stored
	return p
}

func (p *Publisher) count(msg *nats.Msg) {
	if p.stored != nil {
		p.stored(envelope.TypeOfMessage(msg.Header))
	}
}

// Publish stores ev in the events stream and waits for the stream's ack.
// A publish whose event id the stream saw within its duplicate window is
// acknowledged as a duplicate and stored once; that is success.
func (p *Publisher) Publish(ctx context.Context, ev *airlockv1.Event, parentTrace string) (*jetstream.PubAck, error) {
	msg, err := Encode(ev, p.source, parentTrace)
	if err != nil {
		return nil, err
	}
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", msg.Subject, err)
	}
	p.count(msg)
	return ack, nil
}

// ErrConflict is returned when a compare-and-append is refused: the
// subject's last stored message is not the expected one, another writer got
// there first. Read again and decide again.
var ErrConflict = errors.New("another event was stored first")

// PublishAfter stores ev only if the last message stored on expectSubject
// (which may end in a wildcard) has sequence expectSeq (0: there is none) —
// JetStream's compare-and-append. It carries no message id: a message id
// would let the stream answer a competing writer "duplicate" instead of
// refusing it (NOTES), so a writer that cannot tell whether its publish
// landed reads the subject back instead. A refused append is ErrConflict.
func (p *Publisher) PublishAfter(ctx context.Context, ev *airlockv1.Event, parentTrace, expectSubject string, expectSeq uint64) (*jetstream.PubAck, error) {
	msg, err := Encode(ev, p.source, parentTrace)
	if err != nil {
		return nil, err
	}
	msg.Header.Del(jetstream.MsgIDHeader)
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expectSeq, 10))
	msg.Header.Set(headerExpectedLastSubjSeqSubj, expectSubject)
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		if refusedAppend(err) {
			return nil, fmt.Errorf("publish %s: %w", msg.Subject, ErrConflict)
		}
		return nil, fmt.Errorf("publish %s: %w", msg.Subject, err)
	}
	p.count(msg)
	return ack, nil
}

// refusedAppend reports whether the stream refused a compare-and-append:
// 10071 names the sequence it found; a replicated stream answers 10164
// instead, also when another append to the same subject is still in flight
// (two handlings claiming one call at once). Both mean: not stored, read
// and decide again.
func refusedAppend(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// headerExpectedLastSubjSeqSubj names the subject (or wildcard) whose last
// sequence Nats-Expected-Last-Subject-Sequence is compared with.
const headerExpectedLastSubjSeqSubj = "Nats-Expected-Last-Subject-Sequence-Subject"
