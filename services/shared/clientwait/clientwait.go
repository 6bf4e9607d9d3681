// Package clientwait records, in a JetStream KV bucket shared by every
// gateway replica and read by the console, two things about MCP calls that
// wait for a person longer than a client waits for an answer:
//
//   - a rejoin entry (key "r.<hash>", the gateway's hash of the endpoint,
//     its agent, the session, the tool and the arguments' digest): the call
//     a client was told to call again for. A repeated identical call in that session finds
//     it and follows that call instead of asking again; the request that
//     returns the outcome deletes the entry by revision (compare-and-swap),
//     so the outcome is returned once and a later identical call is new.
//   - an offer (key "a.<hash>", the gateway's hash of the endpoint, its
//     agent, the tool and the arguments' digest: no session): the call the
//     same identical call made in another session of the endpoint (its
//     replica died, say) rejoins once no client waits for it. The request
//     that returns the call's outcome deletes it by revision too.
//   - a presence lease (key "c.<agent>.<call>"): until when a client is known
//     to wait for the call, renewed while one does, so a reviewer can see
//     whether anyone still waits for the outcome.
package clientwait

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Store is the bucket. Its zero value is unusable; build it with Open.
type Store struct {
	kv jetstream.KeyValue
	// ttl is how long the bucket keeps an entry (0: for ever).
	ttl time.Duration
}

// Open binds the bucket (bus.Provision creates it).
func Open(ctx context.Context, js jetstream.JetStream, bucket string) (*Store, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("client-waits bucket %s: %w (is the bus provisioned?)", bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("client-waits bucket %s: %w", bucket, err)
	}
	return &Store{kv: kv, ttl: st.TTL()}, nil
}

// Rejoin is a rejoin entry: the call a repeated identical call follows.
type Rejoin struct {
	Call     string `json:"call"`
	Revision uint32 `json:"revision"`
	// Revision of the entry in the bucket, for the delete that delivers.
	entryRev uint64
}

// Remember stores the rejoin entry for key (replacing one left by a call
// whose outcome was never fetched).
func (s *Store) Remember(ctx context.Context, key string, r Rejoin) error {
	_, err := s.remember(ctx, key, r)
	return err
}

// remember is Remember; it returns the entry's revision.
func (s *Store) remember(ctx context.Context, key string, r Rejoin) (uint64, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	rev, err := s.kv.Put(ctx, key, raw)
	if err != nil {
		return 0, fmt.Errorf("remember call %s for a repeated call: %w", r.Call, err)
	}
	return rev, nil
}

// Find returns the rejoin entry for key; ok is false when there is none.
func (s *Store) Find(ctx context.Context, key string) (r Rejoin, ok bool, err error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Rejoin{}, false, nil
	}
	if err != nil {
		return Rejoin{}, false, fmt.Errorf("look up a repeated call: %w", err)
	}
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Rejoin{}, false, fmt.Errorf("a rejoin entry does not decode: %w", err)
	}
	r.entryRev = e.Revision()
	return r, true, nil
}

// Deliver claims the right to return r's outcome: it deletes the entry if
// it is still the one Find returned. won is false when another request
// (on any replica) claimed it first.
func (s *Store) Deliver(ctx context.Context, key string, r Rejoin) (won bool, err error) {
	err = s.kv.Delete(ctx, key, jetstream.LastRevision(r.entryRev))
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return false, nil
	}
	return false, fmt.Errorf("mark call %s's outcome delivered: %w", r.Call, err)
}

// Presence is whether a client waits for a call: one does until Until.
type Presence struct {
	Endpoint string    `json:"endpoint"`
	Until    time.Time `json:"until"`
}

// Waiting reports whether a client waits at now.
func (p Presence) Waiting(now time.Time) bool { return now.Before(p.Until) }

func presenceKey(agent, call string) string { return "c." + agent + "." + call }

// Hold records that a client of endpoint waits for the call until until
// (renew it before then; set it to now when the client stops waiting).
func (s *Store) Hold(ctx context.Context, agent, call string, p Presence) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := s.kv.Put(ctx, presenceKey(agent, call), raw); err != nil {
		return fmt.Errorf("record whether a client waits for call %s: %w", call, err)
	}
	return nil
}

// Forget drops the call's presence (its outcome was delivered, or it was
// withdrawn).
func (s *Store) Forget(ctx context.Context, agent, call string) error {
	if err := s.kv.Delete(ctx, presenceKey(agent, call)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget whether a client waits for call %s: %w", call, err)
	}
	return nil
}

// PresenceOf is the call's presence; ok is false when no gateway client
// ever waited for it past its heartbeat.
func (s *Store) PresenceOf(ctx context.Context, agent, call string) (p Presence, ok bool, err error) {
	// Read through a watch: the approval service may follow presences
	// only (c.>), which a get on a replicated bucket cannot be limited to.
	e, err := bus.ReadKey(ctx, s.kv, presenceKey(agent, call))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Presence{}, false, nil
	}
	if err != nil {
		return Presence{}, false, fmt.Errorf("read whether a client waits for call %s: %w", call, err)
	}
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return Presence{}, false, fmt.Errorf("a presence entry does not decode: %w", err)
	}
	return p, true, nil
}

// Absent is a call nobody waits for: its agent, id and presence.
type Absent struct {
	Agent, Call string
	Presence
}

// Absent lists the calls of endpoint nobody has waited for since before
// cutoff.
func (s *Store) Absent(ctx context.Context, endpoint string, cutoff time.Time) ([]Absent, error) {
	// One watch reads every presence with its value (the sweep runs on every
	// tick; a read per key would be a consumer per waiting call).
	var out []Absent
	err := bus.ReadAll(ctx, s.kv, "c.>", func(e jetstream.KeyValueEntry) {
		agent, call, ok := strings.Cut(strings.TrimPrefix(e.Key(), "c."), ".")
		var p Presence
		if !ok || json.Unmarshal(e.Value(), &p) != nil || p.Endpoint != endpoint || !p.Until.Before(cutoff) {
			return
		}
		out = append(out, Absent{Agent: agent, Call: call, Presence: p})
	})
	if err != nil {
		return nil, fmt.Errorf("list the calls clients wait for: %w", err)
	}
	return out, nil
}

// Line is the sentence a reviewer reads about whether the client waits
// (the console's call page, Slack and Teams cards); ok is whether a
// presence was found ("" when not: no gateway client waited for the call).
func Line(p Presence, ok bool, now time.Time) string {
	switch {
	case !ok:
		return ""
	case p.Waiting(now):
		return "The agent's MCP client is waiting for the outcome."
	}
	return fmt.Sprintf("The agent's MCP client stopped waiting at %s UTC; it gets the outcome when it calls the tool again (gateway endpoint %s).", p.Until.UTC().Format("15:04"), p.Endpoint)
}

// LineOf is Line for the call's presence as stored.
func (s *Store) LineOf(ctx context.Context, agent, call string, now time.Time) (string, error) {
	p, ok, err := s.PresenceOf(ctx, agent, call)
	if err != nil {
		return "", err
	}
	return Line(p, ok, now), nil
}

// Follow calls changed whenever whether a client waits for a call changes
// (a client started waiting, stopped, or came back), until ctx ends. What
// the bucket holds when Follow starts is taken as known; a watch that ends
// (a reconnect) is started again, and what changed meanwhile is reported.
// A lease that runs out without a write (its gateway stopped) is reported
// at the next write about that call.
func (s *Store) Follow(ctx context.Context, log *slog.Logger, changed func(agent, call string, waiting bool)) {
	known := map[string]bool{}
	loaded := false
	for ctx.Err() == nil {
		w, err := s.kv.Watch(ctx, "c.>")
		if err != nil {
			log.Warn("watching whether clients wait failed; retrying", "err", err)
		} else {
			loaded = follow(ctx, w, known, loaded, changed)
			_ = w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// follow applies a watch's entries to known until it ends; it returns
// whether the bucket's first content has been loaded.
func follow(ctx context.Context, w jetstream.KeyWatcher, known map[string]bool, loaded bool, changed func(agent, call string, waiting bool)) bool {
	for {
		select {
		case <-ctx.Done():
			return loaded
		case e, ok := <-w.Updates():
			if !ok {
				return loaded
			}
			if e == nil {
				loaded = true
				continue
			}
			agent, call, ok := strings.Cut(strings.TrimPrefix(e.Key(), "c."), ".")
			if !ok {
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				delete(known, e.Key())
				continue
			}
			var p Presence
			if json.Unmarshal(e.Value(), &p) != nil {
				continue
			}
			waiting := p.Waiting(time.Now())
			was, seen := known[e.Key()]
			known[e.Key()] = waiting
			if loaded || seen {
				if !seen || was != waiting {
					changed(agent, call, waiting)
				}
			}
		}
	}
}

// CardLine is Line for the card of rec while it is pending ("" once it is
// decided, or for a nil Store); a presence that cannot be read is logged
// and the card is drawn without the line.
func (s *Store) CardLine(ctx context.Context, rec *airlockv1.ApprovalRecord, log *slog.Logger) string {
	if s == nil || rec.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		return ""
	}
	line, err := s.LineOf(ctx, rec.GetCall().GetAgentId(), rec.GetCall().GetCallId(), time.Now())
	if err != nil {
		log.Warn("whether a client waits for a call could not be read; its card is drawn without it", "call", rec.GetCall().GetCallId(), "err", err)
	}
	return line
}
