package violation

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/quota"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Limits bound what a connection that causes violations in a loop can make
// the recorder do (SPEC §10): events, memory and time.
type Limits struct {
	// Window: repeats of one identity, kind and subject within it are
	// counted, and recorded as one event when it ends.
	Window time.Duration
	// PerMinute is how many events one identity can cause per minute (and
	// at once); attempts over it are counted in its next event.
	PerMinute int
	// Subjects is how many subjects of one identity are followed at once
	// and Identities how many identities; attempts beyond them are counted
	// as PerMinute's are.
	Subjects, Identities int
	// Queue is how many violations wait for the recorder; when it is full
	// the server's logger drops the violation and counts it, and the count
	// goes in the next event.
	Queue int
}

// DefaultLimits: a refused subject is recorded at once, its repeats every
// 10 s; an identity causes at most 30 events a minute (a burst of 30, then
// one every 2 s).
var DefaultLimits = Limits{Window: 10 * time.Second, PerMinute: 30, Subjects: 256, Identities: 1024, Queue: 4096}

// Identity is who the server authenticated a connection as: its account
// and its user (the public nkey for an nkey user).
type Identity struct{ Account, User string }

// Recorder records violations as unauthorized_attempt events under
// airlock.evt._system._bus, bounded by its Limits. Offer may be called from
// any goroutine and never waits; Run does the recording.
type Recorder struct {
	limits  Limits
	queue   chan Violation
	dropped atomic.Uint64
	whois   func(cid uint64) (Identity, bool)
	users   func() ([]natsauth.User, error)
	log     *slog.Logger
	now     func() time.Time
}

// NewRecorder returns a recorder. whois says who the server authenticated
// a connection as (embedded.Server.Who); users lists the credentials
// airlock issued, to name an identity by its agent or service role.
func NewRecorder(limits Limits, whois func(cid uint64) (Identity, bool), users func() ([]natsauth.User, error), log *slog.Logger) *Recorder {
	return &Recorder{limits: limits, queue: make(chan Violation, limits.Queue), whois: whois, users: users, log: log, now: time.Now}
}

// Offer hands a violation to the recorder without waiting; when its queue
// is full the violation is counted as dropped.
func (r *Recorder) Offer(v Violation) {
	select {
	case r.queue <- v:
	default:
		r.dropped.Add(1)
	}
}

// Store stores an event in the events stream.
type Store func(ctx context.Context, ev *airlockv1.Event) error

// Run records what is offered until ctx ends. Violations offered before
// Run starts wait in the queue.
func (r *Recorder) Run(ctx context.Context, publish Store) {
	st := r.newState(publish)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case v := <-r.queue:
			st.add(ctx, v)
		case <-t.C:
			st.tick(ctx)
		}
	}
}

// state is the recorder's bookkeeping, owned by Run's goroutine.
type state struct {
	r          *Recorder
	publish    Store
	identities map[budgetOf]*tracked
	cids       map[uint64]Identity
	names      map[string]natsauth.User // by public nkey
	reported   uint64                   // of r.dropped, already in an event
	dropReport time.Time
}

// budgetOf is whose budget an attempt spends: each identity has one for
// airlock's and the server's own subjects and one for any other, so a
// flood of made-up subjects cannot spend the events that record an attempt
// on the stream, the API or another agent.
type budgetOf struct {
	Identity
	own bool
}

// ownSubject reports a subject of airlock's or the server's own: JetStream,
// KV, service and system subjects, reply inboxes, and airlock's.
func ownSubject(subj string) bool {
	airlock := subject.EventsPrefix[:strings.IndexByte(subject.EventsPrefix, '.')+1] // "airlock."
	return strings.HasPrefix(subj, "$") || strings.HasPrefix(subj, "_INBOX") || strings.HasPrefix(subj, airlock)
}

// tracked is one identity's attempts on one kind of subject (budgetOf):
// its open windows and its budget of events.
type tracked struct {
	id         Identity
	windows    map[string]*window // by kind and subject
	budget     quota.Bucket       // events, at limits.PerMinute a minute
	unrecorded uint64
	last       Violation // the last attempt counted in unrecorded
}

// window counts the repeats of one kind and subject after its event.
type window struct {
	v           Violation // the attempt that opened it
	opened      time.Time
	count       uint64
	first, last time.Time
}

func (r *Recorder) newState(publish Store) *state {
	return &state{r: r, publish: publish, identities: map[budgetOf]*tracked{}, cids: map[uint64]Identity{}}
}

// add counts one violation: an event at once for a subject not seen within
// the window (if the identity has budget), a count otherwise.
func (s *state) add(ctx context.Context, v Violation) {
	now := s.r.now()
	if v.At.IsZero() {
		v.At = now
	}
	id := s.identify(v)
	who := budgetOf{id, ownSubject(v.Subject)}
	t := s.identities[who]
	if t == nil {
		if len(s.identities) >= s.r.limits.Identities {
			s.r.dropped.Add(1)
			return
		}
		t = &tracked{id: id, windows: map[string]*window{}}
		s.identities[who] = t
	}
	key := v.Kind + " " + v.Subject
	if w := t.windows[key]; w != nil {
		if w.count == 0 {
			w.first = v.At
		}
		w.count++
		w.last = v.At
		return
	}
	if len(t.windows) >= s.r.limits.Subjects || !s.take(t, now) {
		t.unrecorded++
		t.last = v
		return
	}
	t.windows[key] = &window{v: v, opened: now}
	s.record(ctx, t, v, 1, v.At, v.At)
}

// tick ends the windows that are over: their repeats are recorded as one
// event (when the identity has budget; otherwise they keep counting), and
// an identity's unrecorded attempts are recorded when nothing else carried
// them. Identities with nothing open are forgotten once their budget is
// whole again, so forgetting them gives no one a new burst.
func (s *state) tick(ctx context.Context) {
	now := s.r.now()
	for who, t := range s.identities {
		for key, w := range t.windows {
			if now.Sub(w.opened) < s.r.limits.Window {
				continue
			}
			if w.count == 0 {
				delete(t.windows, key)
				continue
			}
			if !s.take(t, now) {
				continue
			}
			s.record(ctx, t, w.v, w.count, w.first, w.last)
			w.opened, w.count = now, 0
		}
		if t.unrecorded > 0 && s.take(t, now) {
			t.unrecorded-- // t.last itself is the event's one attempt
			s.record(ctx, t, t.last, 1, t.last.At, t.last.At)
		}
		if len(t.windows) == 0 && t.unrecorded == 0 && t.budget.Full(s.budgetRate(), now) {
			delete(s.identities, who)
		}
	}
	if d := s.r.dropped.Load(); d > s.reported && now.Sub(s.dropReport) >= s.r.limits.Window {
		s.record(ctx, nil, Violation{}, 0, time.Time{}, time.Time{})
	}
}

// take spends one of t's events, if it has one.
func (s *state) take(t *tracked, now time.Time) bool { return t.budget.Take(s.budgetRate(), now, 1) }

// budgetRate is an identity's budget of events: limits.PerMinute a minute.
func (s *state) budgetRate() quota.Rate {
	return quota.Rate{Capacity: float64(s.r.limits.PerMinute), Refill: time.Minute}
}

// identify asks the server who the connection is (once per connection);
// the user label of the log line is used only when the server no longer
// knows the connection.
func (s *state) identify(v Violation) Identity {
	if id, ok := s.cids[v.CID]; ok {
		return id
	}
	id, ok := s.r.whois(v.CID)
	if !ok {
		acc, user, _ := strings.Cut(v.Label, "/")
		id = Identity{Account: acc, User: strings.TrimPrefix(user, "nkey:")}
		if id.User == "" {
			id.User = "unknown"
		}
	}
	if len(s.cids) >= 4*s.r.limits.Identities {
		clear(s.cids)
	}
	s.cids[v.CID] = id
	return id
}

// actor names an identity by the credential airlock issued for it: an
// agent, a service role, or (a key airlock did not issue) the key itself.
func (s *state) actor(id Identity) *airlockv1.Actor {
	u, ok := s.names[id.User]
	if !ok {
		// A credential added since (airlock agents add): read them again.
		// This happens at most once per event, and events are bounded.
		if users, err := s.r.users(); err != nil {
			s.r.log.Warn("cannot read airlock's NATS credentials to name who caused a violation", "err", err)
		} else {
			s.names = map[string]natsauth.User{}
			for _, u := range users {
				s.names[u.NKey] = u
			}
			u, ok = s.names[id.User]
		}
	}
	switch {
	case ok && u.Agent != "" && id.Account == natsauth.AgentAccount(u.Agent):
		return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: u.Agent, Channel: "nats"}
	case ok && u.Role != "" && id.Account == natsauth.AccountAirlock:
		return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: u.Role, Channel: "nats"}
	}
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_UNSPECIFIED, Id: "nkey:" + id.User, Channel: "nats"}
}

// record publishes one event: count attempts of v (of t's identity; t nil
// for the report of dropped attempts alone), with t's unrecorded attempts
// and the drops not yet reported.
func (s *state) record(ctx context.Context, t *tracked, v Violation, count uint64, first, last time.Time) {
	dropped := s.r.dropped.Load() - s.reported
	s.reported += dropped
	if dropped > 0 {
		s.dropReport = s.r.now()
	}
	b := &airlockv1.BusViolation{Subject: text(v.Subject), Target: text(Target(v.Subject)), Source: text(v.Source), ConnectionId: v.CID,
		ClientName: text(v.ClientName), Count: count, Dropped: dropped}
	if !first.IsZero() {
		b.First, b.Last = timestamppb.New(first), timestamppb.New(last)
	}
	actor := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_UNSPECIFIED, Id: "unknown", Channel: "nats"}
	action := "violations"
	if t != nil {
		b.Account, b.User, b.Unrecorded = text(t.id.Account), text(t.id.User), t.unrecorded
		t.unrecorded = 0
		actor, action = s.actor(t.id), v.Kind
	}
	why := describe(action, b)
	ev := &airlockv1.Event{
		AgentId: subject.SystemAgent, CallId: subject.BusCall, Actor: actor,
		Body: &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{Action: action, Why: why, Bus: b}},
	}
	s.r.log.Error("NATS refused: "+why, "actor", actor.GetId(), "account", b.Account, "user", b.User, "source", b.Source,
		"cid", b.ConnectionId, "client_name", b.ClientName)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.publish(pctx, ev); err != nil {
		s.r.log.Error("could not record a NATS permission violation in the events stream; the line above is its only record", "err", err)
	}
}

// describe is the event's reason in words.
func describe(action string, b *airlockv1.BusViolation) string {
	var parts []string
	if b.Subject != "" {
		p := fmt.Sprintf("%s to %q", action, b.Subject)
		if b.Target != "" {
			p += " (" + b.Target + ")"
		}
		if b.Count > 1 {
			p += fmt.Sprintf(", %d times from %s to %s", b.Count, b.First.AsTime().UTC().Format(time.RFC3339), b.Last.AsTime().UTC().Format(time.RFC3339))
		}
		parts = append(parts, p)
	}
	if b.Unrecorded > 0 {
		parts = append(parts, fmt.Sprintf("%d more attempts by the same user, over its limit, not recorded one by one", b.Unrecorded))
	}
	if b.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("%d attempts by anyone lost: the recorder was behind", b.Dropped))
	}
	return strings.Join(parts, "; ")
}

// StoreWith stores events with p.
func StoreWith(p *bus.Publisher) Store {
	return func(ctx context.Context, ev *airlockv1.Event) error {
		_, err := p.Publish(ctx, ev, "")
		return err
	}
}

// text is s as an event's string field may hold it: what the bus carries
// (a subject, a client's name) may be any bytes, and an event with a
// string that is not UTF-8 cannot be encoded, so the attempt would go
// unrecorded. Such a string is kept quoted, its bytes escaped.
func text(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strconv.QuoteToASCII(s)
}
