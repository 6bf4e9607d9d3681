package approval

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
)

// A pending call's announcement outlives the approval_requested that began
// it: a channel that hangs holds it up to approval.notify_timeout, and
// behind a backlog on that channel's lane longer. The message is therefore
// acknowledged as soon as the record is stored, never held for the
// announcement (held messages count against the consumer's MaxAckPending:
// about 100 agents each at its notify_burst on a hanging webhook filled it,
// and no other agent's call was recorded until the channel timed out). The
// record names the replica announcing it (ApprovalRecord.announcer) until
// every channel answered; a replica that finds the named one gone finishes
// the announcement (takeOver), as a redelivered message did.

// ownAnnouncements are the keys of the records naming this replica their
// announcer whose announcement this process is making, or is about to make
// (from before the record is created). A record naming this replica whose
// key is not here is nobody's: an attempt stored it and then failed (a
// write after it failed, or the store's answer timed out though the record
// was written), and its message, delivered again, finds it named.
type ownAnnouncements struct {
	mu   sync.Mutex
	keys map[string]bool
}

// take reserves key for the caller; false when it is already reserved.
func (o *ownAnnouncements) take(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys[key] {
		return false
	}
	if o.keys == nil {
		o.keys = map[string]bool{}
	}
	o.keys[key] = true
	return true
}

// drop frees key, its announcement over (or never begun).
func (o *ownAnnouncements) drop(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.keys, key)
}

// announceOwned announces rec, whose record names this replica its
// announcer, in the background, and clears the name once every channel
// answered or timed out. The caller took key in s.announcing; it is freed
// once the name is cleared. A reference that could not be stored is tried
// again (the channels already holding one are not told twice). Stopped
// meanwhile, it leaves the name: channels may not have been told, and a
// replica that finds this one gone announces the call.
func (s *Service) announceOwned(key string, rec *airlockv1.ApprovalRecord) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		// Freed after the name is cleared: a record still naming this
		// replica with its key free is an orphan (takeOver).
		defer s.announcing.drop(key)
		for attempt := 1; ; attempt++ {
			err := <-s.announce(key, rec)
			if s.life.Err() != nil {
				return
			}
			if err == nil {
				break
			}
			s.deps.Log.Warn("storing where a channel announced a pending call failed; announcing it again on the channels without a reference", "key", key, "err", err)
			select {
			case <-time.After(retryDelay(attempt)):
			case <-s.life.Done():
				return
			}
			fresh, _, err := s.store.get(s.life, key)
			if errors.Is(err, errNotFound) || err == nil && fresh.GetState() != domain.Pending {
				break // gone or decided: a decision shows its outcome where it was announced
			}
			if err == nil && fresh.GetAnnouncer() != s.instance {
				// Taken over (this replica was off the bus longer than
				// approval.takeover_after): the other replica announces it.
				return
			}
			if err == nil {
				rec = fresh
			}
		}
		if err := s.releaseAnnouncement(s.life, key); err != nil && s.life.Err() == nil {
			s.deps.Log.Warn("a pending call was announced but its record still names this replica its announcer; another replica announces it again on the channels that did not answer once this one stops", "key", key, "err", err)
		}
	}()
}

// retryDelay is how long to wait before the attempt-th repeat.
func retryDelay(attempt int) time.Duration {
	return min(time.Duration(attempt*attempt)*100*time.Millisecond, 10*time.Second)
}

// claimAnnouncement names this replica the announcer of the pending,
// unqueued record of key if it names from (empty: none; this replica: it
// stays so, unwritten), and returns the record as it now stands; nil when
// another claimed it first or it needs no announcement.
func (s *Service) claimAnnouncement(ctx context.Context, key, from string) (*airlockv1.ApprovalRecord, error) {
	claimed := false
	rec, _, _, err := mutate(ctx, s.store, key, func(cur *airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, struct{}, error) {
		claimed = cur.GetState() == domain.Pending && !cur.GetQueued() && cur.GetAnnouncer() == from
		if !claimed || from == s.instance {
			return nil, struct{}{}, nil
		}
		next := proto.Clone(cur).(*airlockv1.ApprovalRecord)
		next.Announcer = s.instance
		return next, struct{}{}, nil
	})
	if err != nil || !claimed {
		return nil, err
	}
	return rec, nil
}

// releaseAnnouncement clears this replica's name from the record of key,
// its announcement done. A decided record keeps it: nobody announces those.
func (s *Service) releaseAnnouncement(ctx context.Context, key string) error {
	_, _, _, err := mutate(ctx, s.store, key, func(cur *airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, struct{}, error) {
		if cur.GetState() != domain.Pending || cur.GetAnnouncer() != s.instance {
			return nil, struct{}{}, nil
		}
		next := proto.Clone(cur).(*airlockv1.ApprovalRecord)
		next.Announcer = ""
		return next, struct{}{}, nil
	})
	if errors.Is(err, errNotFound) {
		return nil
	}
	return err
}

// takeOver announces the pending calls whose announcer is gone: a replica
// that stopped or died before every channel answered. A replica is gone
// when its micro service has had no responder on the bus for
// approval.takeover_after (replicaGone), longer than a reconnect: a
// replica cut off from NATS for a moment (a server restarting, a blip)
// answers no ping meanwhile, and its announcements, still under way, are
// not made twice.
//
// A record naming this replica whose key it is not announcing
// (ownAnnouncements) is announced too: an attempt that stored it failed
// before announcing it.
func (s *Service) takeOver(ctx context.Context) {
	now := s.now()
	announcers := s.index.announcers()
	for id := range s.silentSince {
		if !slices.Contains(announcers, id) {
			delete(s.silentSince, id) // names no pending call any more
		}
	}
	for _, announcer := range announcers {
		if ctx.Err() != nil {
			return
		}
		if announcer != s.instance && !s.replicaGone(ctx, announcer, now) {
			continue
		}
		for _, key := range s.index.announcedBy(announcer) {
			if !s.announcing.take(key) {
				continue // this process announces it
			}
			// Read after take: an announcement of this process clears the
			// name before it frees the key.
			rec, err := s.claimAnnouncement(ctx, key, announcer)
			if err != nil && !errors.Is(err, errNotFound) {
				s.deps.Log.Warn("taking over the announcement of a call whose replica is gone failed; the sweeper will retry", "key", key, "err", err)
			}
			if rec == nil {
				s.announcing.drop(key)
				continue
			}
			if announcer == s.instance {
				s.deps.Log.Info("announcing a pending call this replica stored but did not announce (the attempt failed after the record was written)", "key", key)
			} else {
				s.deps.Log.Info("announcing a pending call whose announcing replica is gone", "key", key, "announcer", announcer)
			}
			s.announceOwned(key, rec)
		}
	}
}

// replicaGone reports whether no approval replica of id has been on the
// bus for approval.takeover_after: every ping of it since the first that
// found it missing (silentSince) was answered "no responders". An answer,
// or a ping that times out (a responder there but slow), starts over; a
// ping that fails otherwise (this replica cut off) counts for nothing.
func (s *Service) replicaGone(ctx context.Context, id string, now time.Time) bool {
	subj, err := micro.ControlSubject(micro.PingVerb, approvalapi.Service, id)
	if err != nil {
		return false
	}
	ping, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = s.deps.NC.RequestWithContext(ping, subj, nil)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
	case err == nil || ctx.Err() == nil && ping.Err() != nil:
		delete(s.silentSince, id)
		return false
	default:
		return false
	}
	since, seen := s.silentSince[id]
	if !seen {
		s.silentSince[id] = now
		return false
	}
	return now.Sub(since) >= s.cfg.TakeoverAfter
}
