package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

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
	// headers are the envelope headers of messages published and done
	// with (*envelope.Header): a sync publish has written a message's
	// header to the connection when it returns, so the next one reuses it.
	headers sync.Pool
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

// count counts a stored event of type typ (the encoded message's Type:
// no need to read it back from the header).
func (p *Publisher) count(typ string) {
	if p.stored != nil {
		p.stored(typ)
	}
}

// Publish stores ev in the events stream and waits for the stream's ack.
// A publish whose event id the stream saw within its duplicate window is
// acknowledged as a duplicate and stored once; that is success.
func (p *Publisher) Publish(ctx context.Context, ev *airlockv1.Event, parentTrace string) (*jetstream.PubAck, error) {
	hb := p.header()
	defer p.headers.Put(hb)
	m, err := envelope.EncodeInto(hb, ev, p.source, parentTrace)
	if err != nil {
		return nil, err
	}
	msg := Msg(m)
	ack, err := PublishSync(ctx, p.js, msg)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", msg.Subject, err)
	}
	p.count(m.Type)
	return ack, nil
}

// header is a header to encode the next message into (headers).
func (p *Publisher) header() *envelope.Header {
	if hb, ok := p.headers.Get().(*envelope.Header); ok {
		return hb
	}
	return &envelope.Header{}
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
	hb := p.header()
	defer p.headers.Put(hb)
	m, err := envelope.EncodeAfterInto(hb, ev, p.source, parentTrace, expectSubject, expectSeq)
	if err != nil {
		return nil, err
	}
	msg := Msg(m)
	ack, err := PublishSync(ctx, p.js, msg)
	if err != nil {
		if Conflict(err) {
			return nil, fmt.Errorf("publish %s: %w", msg.Subject, ErrConflict)
		}
		return nil, fmt.Errorf("publish %s: %w", msg.Subject, err)
	}
	p.count(m.Type)
	return ack, nil
}

// AppendAfter stores evs as one atomic batch (AppendBatch) if the last
// message stored on expectSubject has sequence expectSeq, as PublishAfter
// does for one event: the first event carries the expectation, and no event
// carries a message id. A refused append is ErrConflict. The stream must
// allow atomic publish (StreamConfig does).
func (p *Publisher) AppendAfter(ctx context.Context, evs []*airlockv1.Event, parentTrace, expectSubject string, expectSeq uint64) (*jetstream.PubAck, error) {
	if len(evs) == 0 {
		return nil, errors.New("append batch: no events")
	}
	msgs := make([]*nats.Msg, len(evs))
	types := make([]string, len(evs))
	for i, ev := range evs {
		var m envelope.Message
		var err error
		if i == 0 {
			m, err = envelope.EncodeAfter(ev, p.source, parentTrace, expectSubject, expectSeq)
		} else {
			m, err = envelope.EncodeInBatch(ev, p.source, parentTrace)
		}
		if err != nil {
			return nil, err
		}
		msgs[i], types[i] = Msg(m), m.Type
	}
	ack, err := AppendBatch(ctx, p.js, msgs)
	if err != nil {
		return nil, err
	}
	for _, typ := range types {
		p.count(typ)
	}
	return ack, nil
}

// Conflict reports whether a compare-and-set write was refused because
// something else was written first: a compare-and-append (PublishAfter,
// AppendBatch) or a KV Create, Update or Delete by revision. Either way
// nothing was stored: read and decide again.
//
// A stream answers 10071 naming the sequence it found; a replicated stream
// answers 10164 instead, also when another append to the same subject is
// still in flight (two handlings claiming one call at once). nats.go
// (v1.55.0, jetstream/kv.go) maps both for the KV: Create wraps them in
// ErrKeyExists, Update and Delete with LastRevision in
// ErrKeyRevisionMismatch (mapRevisionMismatch), so on an R3 bucket a lost
// Update matches ErrKeyRevisionMismatch but not ErrKeyExists. A publish
// with an expectation is not mapped: its APIError's code is read.
func Conflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Full reports whether a write was refused because the stream or bucket
// holds what its MaxBytes allows (a KV bucket discards nothing old to make
// room): nothing was stored, and trying again stores nothing until
// something leaves it or the bound is raised.
func Full(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStoreFailed && apiErr.Description == "maximum bytes exceeded"
}

// jsErrStoreFailed is JetStream refusing to store a message; its
// description says why (nats-server's errors.json: JSStreamStoreFailedF).
const jsErrStoreFailed jetstream.ErrorCode = 10077

// Atomic batch publish (ADR-50) headers; the stream needs AllowAtomicPublish.
const (
	headerBatchID     = "Nats-Batch-Id"
	headerBatchSeq    = "Nats-Batch-Sequence"
	headerBatchCommit = "Nats-Batch-Commit"
)

// AppendBatch stores msgs in one stream as one atomic batch: all of them or
// none. The first message may carry an expectation (a compare-and-append
// header): the stream checks it at the commit, so the batch lands only where
// that message alone would have. No message may carry a message id (the
// server refuses it inside a batch). Only the commit is acknowledged, one
// round trip for the whole batch: the messages before it are sent without a
// reply subject on the same connection, which keeps their order. A refused
// expectation is ErrConflict, as for PublishAfter; any other error may mean
// the batch landed with its ack lost, so the writer reads back, as after a
// failed PublishAfter.
func AppendBatch(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) (*jetstream.PubAck, error) {
	if len(msgs) == 0 {
		return nil, errors.New("append batch: no messages")
	}
	id := nuid.Next()
	nc := js.Conn()
	for i, m := range msgs {
		if m.Header == nil {
			m.Header = nats.Header{}
		}
		m.Header.Set(headerBatchID, id)
		m.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i == len(msgs)-1 {
			break
		}
		if err := nc.PublishMsg(m); err != nil {
			return nil, fmt.Errorf("publish %s: %w", m.Subject, err)
		}
	}
	last := msgs[len(msgs)-1]
	last.Header.Set(headerBatchCommit, "1")
	ack, err := PublishSync(ctx, js, last)
	if err != nil {
		if Conflict(err) {
			return nil, fmt.Errorf("publish %s: %w", msgs[0].Subject, ErrConflict)
		}
		return nil, fmt.Errorf("publish batch of %d from %s: %w", len(msgs), msgs[0].Subject, err)
	}
	return ack, nil
}
