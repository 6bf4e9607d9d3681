package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// ReadStored calls fn for every message stored on filters right now, in
// stream order, until fn returns false or it has seen them all. It uses an
// ordered consumer, so it reads history without touching any durable state;
// the consumer is deleted when the read ends (and left by the server after
// readerIdle should that fail), so frequent reads do not pile consumers up
// against the server's limit per stream (1,000 by default; an ordered
// consumer otherwise lingers for 5 minutes).
//
// On a replicated stream the consumer may live on a follower a write or two
// behind the leader, so a read right after a write can miss it: use it to
// show history, not to decide.
func ReadStored(ctx context.Context, js jetstream.JetStream, stream string, filters []string, fn func(jetstream.Msg) bool) error {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: filters, InactiveThreshold: readerIdle})
	if err != nil {
		return fmt.Errorf("read %v from %s: %w", filters, stream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if ci := cons.CachedInfo(); ci != nil && ci.Name != "" {
			_ = js.DeleteConsumer(dctx, stream, ci.Name)
		}
	}()
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("read %v from %s: %w", filters, stream, err)
	}
	for pending := info.NumPending; pending > 0; {
		stopped := false
		n, err := PullOrdered(ctx, cons, int(min(pending, 500)), 5*time.Second, func(m jetstream.Msg) bool {
			if meta, err := m.Metadata(); err == nil {
				pending = meta.NumPending
			}
			stopped = !fn(m)
			return !stopped
		})
		if err != nil {
			return fmt.Errorf("read %v from %s: %w", filters, stream, err)
		}
		if stopped || n == 0 {
			break
		}
	}
	return nil
}

// PullOrdered fetches up to max messages from the ordered consumer cons,
// waiting at most wait, and hands each to fn until fn returns false. It
// returns how many it handed on and, when that is none, why the pull ended
// (nil when wait passed with nothing to deliver); a pull that delivered
// something reports no error, since the next pull goes on after it.
//
// Each Fetch of an ordered consumer creates the consumer afresh, and on a
// cluster the pull can reach this client's server before the consumer's
// interest does (503, no responders). The cursor keeps its place, so such a
// pull is repeated, a few times, a little later each time.
func PullOrdered(ctx context.Context, cons jetstream.Consumer, max int, wait time.Duration, fn func(jetstream.Msg) bool) (int, error) {
	pause := 10 * time.Millisecond
	for unanswered := 0; ; unanswered++ {
		batch, err := cons.Fetch(max, jetstream.FetchMaxWait(wait))
		n := 0
		if err == nil {
			for m := range batch.Messages() {
				n++
				if !fn(m) {
					return n, nil
				}
			}
			if n > 0 {
				return n, nil
			}
			err = batch.Error()
		}
		if !errors.Is(err, nats.ErrNoResponders) || unanswered == maxUnanswered {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// maxUnanswered bounds how often PullOrdered repeats a pull nobody
// answered: about four seconds in all.
const maxUnanswered = 20

// readerIdle is how long the server keeps a ReadStored consumer nobody
// pulls from.
const readerIdle = 30 * time.Second

// LastStored returns the last message stored on subj (which may end in a
// wildcard) in stream, with JetStream's Direct Get, or nil when there is
// none. The subject form of Direct Get is the one agents are allowed, on
// their own subjects.
//
// On a replicated stream any replica answers a Direct Get, and a follower
// may not hold yet what the leader acknowledged: right after a write, the
// read can find nothing or an older message. Use it where a stale answer
// only delays (following a call); decide on LastStoredLeader.
func LastStored(ctx context.Context, nc *nats.Conn, stream, subj string) (*nats.Msg, error) {
	m, err := nc.RequestWithContext(ctx, subject.DirectGet(stream, subj), nil)
	if err != nil {
		return nil, fmt.Errorf("read the last message on %s: %w", subj, err)
	}
	switch m.Header.Get("Status") {
	case "":
		return m, nil
	case "404":
		return nil, nil
	default:
		return nil, fmt.Errorf("read the last message on %s: %s %s", subj, m.Header.Get("Status"), m.Header.Get("Description"))
	}
}

// StoredSeq is the stream sequence of a message read with LastStored or
// republished by the stream (0 when it carries none).
func StoredSeq(m *nats.Msg) uint64 {
	seq, _ := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	return seq
}

// LastStoredLeader is LastStored answered by the stream's leader
// ($JS.API.STREAM.MSG.GET), so it sees every write the stream acknowledged
// before it was asked. Services use it where they decide on what they read:
// sequencing a call's revisions, reading the execution ledger before a
// claim. It returns the message as Direct Get does (Nats-Subject,
// Nats-Sequence and Nats-Time-Stamp headers set).
func LastStoredLeader(ctx context.Context, nc *nats.Conn, stream, subj string) (*nats.Msg, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": subj})
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("read the last message on %s from the leader of %s: %w", subj, stream, err)
	}
	var out struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &out); err != nil {
		return nil, fmt.Errorf("read the last message on %s: %w", subj, err)
	}
	switch {
	case out.Error != nil && out.Error.Code == 404:
		return nil, nil
	case out.Error != nil:
		return nil, fmt.Errorf("read the last message on %s: %d %s", subj, out.Error.Code, out.Error.Description)
	case out.Message == nil:
		return nil, fmt.Errorf("read the last message on %s: empty answer", subj)
	}
	m := &nats.Msg{Subject: out.Message.Subject, Data: out.Message.Data, Header: nats.Header{}}
	if len(out.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(out.Message.Header); err != nil {
			return nil, fmt.Errorf("read the last message on %s: headers: %w", subj, err)
		}
	}
	m.Header.Set(jetstream.StreamHeader, stream)
	m.Header.Set(jetstream.SubjectHeader, out.Message.Subject)
	m.Header.Set(jetstream.SequenceHeader, strconv.FormatUint(out.Message.Seq, 10))
	m.Header.Set(jetstream.TimeStampHeaer, out.Message.Time.UTC().Format(time.RFC3339Nano))
	return m, nil
}

// LastEvent is the last event stored on subj in stream, read from the
// stream's leader (LastStoredLeader) and decoded, with its sequence; nil
// when there is none.
func LastEvent(ctx context.Context, nc *nats.Conn, stream, subj string) (*airlockv1.Event, uint64, error) {
	m, err := LastStoredLeader(ctx, nc, stream, subj)
	if err != nil || m == nil {
		return nil, 0, err
	}
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		return nil, 0, fmt.Errorf("decode the last event on %s: %w", subj, err)
	}
	return ev, StoredSeq(m), nil
}

// StoredOn is how many messages stream holds on subj (which may hold
// wildcards): its info, filtered to subj, so that a user allowed the
// stream's info, not its messages, can count them.
func StoredOn(ctx context.Context, nc *nats.Conn, stream, subj string) (uint64, error) {
	req, _ := json.Marshal(map[string]string{"subjects_filter": subj})
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.INFO."+stream, req)
	if err != nil {
		return 0, fmt.Errorf("count the messages of %s on %s: %w", stream, subj, err)
	}
	var out struct {
		State struct {
			Subjects map[string]uint64 `json:"subjects"`
		} `json:"state"`
		Error *struct {
			Code        int    `json:"code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &out); err != nil {
		return 0, fmt.Errorf("count the messages of %s on %s: %w", stream, subj, err)
	}
	if out.Error != nil {
		return 0, fmt.Errorf("count the messages of %s on %s: %d %s", stream, subj, out.Error.Code, out.Error.Description)
	}
	var n uint64
	for _, c := range out.State.Subjects {
		n += c
	}
	return n, nil
}
