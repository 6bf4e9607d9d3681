// Package lastevents is an agent's read of the last stored events of one of
// its calls, written once: the request an agent sends, the reply's wire
// form, the server that answers it (the approval service serves it) and the
// clients that read it (the Go SDK; sdk/typescript speaks the same form).
//
// An agent reaches no JetStream API. NATS permissions cannot tell a literal
// "*" or ">" token from a wildcard, so an agent allowed the Direct Get of
// its own subjects could ask for airlock.evt.<agent>.*.x and make the
// server run a wildcard last-by-subject lookup over the agent's whole
// history, under the events stream's lock that every writer shares. The
// agent asks airlock instead, on airlock.agent.<agent>.events
// (subject.AgentEvents): the call id must be an id (ids.Validate) and each
// type one of Readable, so the server does only literal Direct Gets of
// airlock.evt.<agent>.<call>.<type>, all the types one await needs in one
// request, as many at once.
//
// Request (JSON, at most MaxRequestBytes): {"call_id": "...", "types":
// ["requested", "completed", ...]} (1 to len(Readable) distinct types).
//
// Reply: the stored events found, in the order of the types asked, each a
// line naming it, then its body as stored, then a line feed:
//
//	<stored subject> <stream sequence> <json|protobuf> <body length>\n<body>\n
//
// so that an agent speaking JSON reads its events with `nats req` as it
// reads them republished. A type with nothing stored has none; an empty
// reply: nothing of the types asked is stored. Types whose events did not
// fit in one reply (the server's max_payload) are named, comma-separated,
// in the reply's Airlock-Unread header: ask again for those. A refusal is
// an empty reply with the headers Nats-Service-Error-Code
// (invalid_request, unavailable, ...) and Nats-Service-Error (the
// sentence).
//
// Staleness: the server reads with Direct Get (bus.LastStored), which on a
// replicated stream any replica answers, as the agents' own Direct Gets
// were: a read right after a write may miss it, and the SDKs follow a call
// live as well, so a stale read only delays.
package lastevents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/quota"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Readable are the event types of its calls an agent may read: what the
// SDKs follow a call by (its request, decisions, steps, ends, a person's
// answer about a call in doubt).
var Readable = []string{
	subject.Requested, subject.Allowed, subject.Denied, subject.ApprovalRequested, subject.Approved,
	subject.Rejected, subject.ChangesRequested, subject.Expired, subject.Canceled, subject.Started,
	subject.Completed, subject.Failed, subject.Invalid, subject.OutcomeResolved,
}

// Request is what an agent sends.
type Request struct {
	CallID string   `json:"call_id"`
	Types  []string `json:"types"`
}

// MaxRequestBytes bounds a request's body: a call id and every readable
// type, with room to spare.
const MaxRequestBytes = 2048

// UnreadHeader names, comma-separated, the types a reply left out because
// they did not fit: ask again for them.
const UnreadHeader = "Airlock-Unread"

// parse checks a request from agent: the subject's agent token, the body's
// size, call id and types. Every refusal is a sentence the agent reads.
func parse(subj string, data []byte) (agent string, req Request, err error) {
	tokens := strings.Split(subj, ".")
	if len(tokens) != 4 || tokens[0] != "airlock" || tokens[1] != "agent" || tokens[3] != subject.AgentEventsToken {
		return "", req, apierr.New(apierr.InvalidRequest, "read on %q: use airlock.agent.<agent>.events", subj)
	}
	agent = tokens[2]
	if err := ids.ValidateAgent(agent); err != nil {
		return "", req, apierr.New(apierr.InvalidRequest, "%v", err)
	}
	if len(data) > MaxRequestBytes {
		return "", req, apierr.New(apierr.InvalidRequest, "read request is %d bytes: send only the call id and the event types (at most %d bytes)", len(data), MaxRequestBytes)
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return "", req, apierr.New(apierr.InvalidRequest, "read request is not JSON like {\"call_id\":\"...\",\"types\":[\"requested\"]}: %v", err)
	}
	if err := ids.Validate("call id", req.CallID); err != nil {
		return "", req, apierr.New(apierr.InvalidRequest, "%v", err)
	}
	if len(req.Types) == 0 {
		return "", req, apierr.New(apierr.InvalidRequest, "read request names no event type: name at least one of %s", strings.Join(Readable, ", "))
	}
	for i, t := range req.Types {
		if !slices.Contains(Readable, t) {
			return "", req, apierr.New(apierr.InvalidRequest, "event type %q cannot be read: name only types of %s", t, strings.Join(Readable, ", "))
		}
		if slices.Contains(req.Types[:i], t) {
			return "", req, apierr.New(apierr.InvalidRequest, "event type %q is named twice: name each type once", t)
		}
	}
	return agent, req, nil
}

// ReadDirect is the last stored event of each type of agent's call in
// stream, read with literal Direct Gets (bus.LastStored), all at once: nil
// where nothing is stored. The server does this for agents; a service
// allowed the Direct Get of every call's events (the console, the MCP
// gateway) does it itself.
func ReadDirect(ctx context.Context, nc *nats.Conn, stream, agent, callID string, types []string) ([]*nats.Msg, error) {
	subjects := make([]string, len(types))
	for i, t := range types {
		s, err := subject.Event(agent, callID, t)
		if err != nil {
			return nil, err
		}
		subjects[i] = s
	}
	out := make([]*nats.Msg, len(types))
	errs := make([]error, len(types))
	var wg sync.WaitGroup
	for i, s := range subjects {
		wg.Go(func() { out[i], errs[i] = bus.LastStored(ctx, nc, stream, s) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// frameHead is the line that starts m's frame.
func frameHead(m *nats.Msg) string {
	encoding := "protobuf"
	if envelope.IsJSON(m.Header) {
		encoding = "json"
	}
	return m.Header.Get(jetstream.SubjectHeader) + " " + strconv.FormatUint(bus.StoredSeq(m), 10) + " " + encoding + " " + strconv.Itoa(len(m.Data)) + "\n"
}

// Encode is the reply to a request for types whose stored events are
// found (nil where none): the frames that fit in limit bytes, in order,
// and the types left out.
func Encode(types []string, found []*nats.Msg, limit int) (body []byte, unread []string, err error) {
	for i, m := range found {
		if m == nil {
			continue
		}
		head := frameHead(m)
		size := len(head) + len(m.Data) + 1
		if len(body)+size > limit {
			if len(body) == 0 && len(unread) == 0 {
				return nil, nil, apierr.New(apierr.Internal, "the stored %s event is %d bytes, more than a reply carries (%d): airlock cannot pass it on", types[i], size, limit)
			}
			unread = append(unread, types[i])
			continue
		}
		body = append(append(append(body, head...), m.Data...), '\n')
	}
	return body, unread, nil
}

// Decode reads a reply's frames as the messages Direct Get answers
// (Nats-Subject, Nats-Sequence and, for a protojson body, Content-Type
// set), which bus.StoredSeq and envelope.Decode read.
func Decode(b []byte) ([]*nats.Msg, error) {
	var out []*nats.Msg
	for len(b) > 0 {
		line, rest, ok := bytes.Cut(b, []byte{'\n'})
		fields := strings.Fields(string(line))
		if !ok || len(fields) != 4 {
			return nil, fmt.Errorf("a stored event's line %.80q is not \"<subject> <sequence> <json|protobuf> <length>\"", line)
		}
		_, serr := strconv.ParseUint(fields[1], 10, 64)
		size, lerr := strconv.Atoi(fields[3])
		if serr != nil || lerr != nil || size < 0 || (fields[2] != "json" && fields[2] != "protobuf") {
			return nil, fmt.Errorf("a stored event's line %.80q is not \"<subject> <sequence> <json|protobuf> <length>\"", line)
		}
		if len(rest) < size+1 || rest[size] != '\n' {
			return nil, fmt.Errorf("the body of stored event %s is cut short", fields[0])
		}
		m := &nats.Msg{Subject: fields[0], Data: rest[:size:size], Header: nats.Header{}}
		m.Header.Set(jetstream.SubjectHeader, fields[0])
		m.Header.Set(jetstream.SequenceHeader, fields[1])
		if fields[2] == "json" {
			m.Header.Set(envelope.HeaderContentType, envelope.ContentJSON)
		}
		out = append(out, m)
		b = rest[size+1:]
	}
	return out, nil
}

// Read asks airlock, over nc (the agent's connection), for the last stored
// event of each type of agent's call: the messages found, as Direct Get
// answers them, in no particular order. It asks again for what one reply
// could not carry.
func Read(ctx context.Context, nc *nats.Conn, agent, callID string, types []string) ([]*nats.Msg, error) {
	var out []*nats.Msg
	for len(types) > 0 {
		body, _ := json.Marshal(Request{CallID: callID, Types: types})
		r, err := nc.RequestWithContext(ctx, subject.AgentEvents(agent), body)
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("read the stored events of call %s: no airlock approval service answers %s: start it (airlock serve approval, or airlock dev) (%w)", callID, subject.AgentEvents(agent), err)
		}
		if err != nil {
			return nil, fmt.Errorf("read the stored events of call %s: %w", callID, err)
		}
		if code := r.Header.Get(micro.ErrorCodeHeader); code != "" {
			return nil, fmt.Errorf("read the stored events of call %s: airlock refused (%s): %s", callID, code, r.Header.Get(micro.ErrorHeader))
		}
		got, err := Decode(r.Data)
		if err != nil {
			return nil, fmt.Errorf("read the stored events of call %s: %w", callID, err)
		}
		out = append(out, got...)
		var unread []string
		if u := r.Header.Get(UnreadHeader); u != "" {
			unread = strings.Split(u, ",")
		}
		if len(unread) >= len(types) {
			return nil, fmt.Errorf("read the stored events of call %s: airlock left out every type asked (%s)", callID, strings.Join(unread, ","))
		}
		types = unread
	}
	return out, nil
}

// Server answers agents' reads (subject.AgentEvents("*")) with literal
// Direct Gets on the events stream. Each agent holds at most perAgent
// reads at once (waiting or being read), and at most workers are read at
// once in all, so that no agent takes every read from the others.
type Server struct {
	nc       *nats.Conn
	stream   string
	log      *slog.Logger
	of       *quota.PerAgent
	slots    chan struct{}
	bg       sync.WaitGroup
	timeout  time.Duration
	maxReply func() int
}

// Bounds of a Server: reads an agent holds at once, reads being made at
// once in all, how long one may take.
const (
	MaxReadsPerAgent = 64
	readWorkers      = 32
	readTimeout      = 10 * time.Second
)

// NewServer answers agents' reads of stream over nc.
func NewServer(nc *nats.Conn, stream string, log *slog.Logger) *Server {
	return &Server{nc: nc, stream: stream, log: log, of: quota.New(MaxReadsPerAgent), slots: make(chan struct{}, readWorkers),
		timeout: readTimeout, maxReply: func() int { return int(nc.MaxPayload()) }}
}

// Handle answers one request: refused at once when it is not a read of
// the agent's own call by ids and readable types, else read on a goroutine
// of its own (micro hands an endpoint its requests one at a time).
func (s *Server) Handle(r micro.Request) {
	agent, req, err := parse(r.Subject(), r.Data())
	if err != nil {
		s.fail(r, err)
		return
	}
	if !s.of.Take(agent) {
		s.fail(r, apierr.New(apierr.Unavailable, "agent %s has %d reads of stored events waiting: wait for their answers, then read again", agent, MaxReadsPerAgent))
		return
	}
	s.bg.Go(func() { rpc.Recover(s.log, s.answer(agent, req))(r) })
}

// answer reads what req asks of agent's call and answers the request.
func (s *Server) answer(agent string, req Request) micro.HandlerFunc {
	return func(r micro.Request) {
		defer s.of.Give(agent)
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-ctx.Done():
			s.fail(r, apierr.New(apierr.Unavailable, "airlock is reading %d agents' stored events at once: read again in a moment", readWorkers))
			return
		}
		found, err := ReadDirect(ctx, s.nc, s.stream, agent, req.CallID, req.Types)
		if err != nil {
			s.fail(r, apierr.Wrap(apierr.Unavailable, err, "read the stored events of call %s/%s", agent, req.CallID))
			return
		}
		body, unread, err := Encode(req.Types, found, s.maxReply()-512)
		if err != nil {
			s.fail(r, err)
			return
		}
		var opts []micro.RespondOpt
		if len(unread) > 0 {
			opts = append(opts, micro.WithHeaders(micro.Headers{UnreadHeader: {strings.Join(unread, ",")}}))
		}
		if err := r.Respond(body, opts...); err != nil {
			s.log.Warn("reply failed", "subject", r.Subject(), "err", err)
		}
	}
}

// Wait returns once every read handed to a goroutine is answered.
func (s *Server) Wait() { s.bg.Wait() }

func (s *Server) fail(r micro.Request, err error) {
	if rerr := r.Error(string(apierr.CodeOf(err)), apierr.MessageOf(err), nil); rerr != nil {
		s.log.Warn("error reply failed", "subject", r.Subject(), "err", rerr)
	}
}
