package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/audit/suggest"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// consoleSuggest computes the console's Suggestions page from the trail the
// audit pages read, with the run-time rules the policy service holds now.
// A report replays the whole trail, so it is computed once per state of
// what it is computed from — the trail's head, the rules in force, the
// evidence window to the minute — however many people load the page or
// adopt at once: requests that find that state computed take the report,
// and requests that find it being computed wait for that computation. One
// computation runs at a time: a request for another state waits for the
// running one and then looks again, so agents' traffic changing the state
// while reviewers reload never piles up replays. Adopting proves against
// the state it reads then, never an older one.
type consoleSuggest struct {
	audit *consoleAudit
	// replayed, when set (tests), is called as each computation starts;
	// the function it returns as it ends.
	replayed func() (ended func())
	// waiting, when set (tests), is called when a request finds a
	// computation running and waits for it instead of starting one.
	waiting func()

	mu      sync.Mutex
	key     string // the state rep was computed for ("": none)
	rep     console.SuggestionReport
	running *suggestFlight // the computation under way, nil when none
}

func newConsoleSuggest(a *consoleAudit) *consoleSuggest {
	return &consoleSuggest{audit: a}
}

// suggestFlight is one computation of the report, shared by the requests
// that wait for it.
type suggestFlight struct {
	key  string // the state it computes
	done chan struct{}
	rep  console.SuggestionReport
	err  error
}

// suggestFor bounds one computation: it runs for every request waiting
// for it, so none of them ending it stops it.
const suggestFor = 5 * time.Minute

// Suggestions implements console.Suggester. The report it returns may be
// shared with other requests: callers treat it as read-only.
func (s *consoleSuggest) Suggestions(ctx context.Context) (console.SuggestionReport, error) {
	for {
		// The state is read before the computation starts, so what is
		// computed is at least as new as the state it is kept for.
		key, rules, err := s.state(ctx)
		if err != nil {
			return console.SuggestionReport{}, err
		}
		s.mu.Lock()
		if s.key == key {
			rep := s.rep
			s.mu.Unlock()
			return rep, nil
		}
		f := s.running
		if f == nil {
			f = &suggestFlight{key: key, done: make(chan struct{})}
			s.running = f
			go s.compute(context.WithoutCancel(ctx), rules, f)
		} else if s.waiting != nil {
			s.waiting()
		}
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return console.SuggestionReport{}, ctx.Err()
		}
		if f.key == key {
			return f.rep, f.err
		}
		// Another state's computation ended: look again.
	}
}

func (s *consoleSuggest) compute(ctx context.Context, rules []*airlockv1.PolicyRule, f *suggestFlight) {
	ctx, cancel := context.WithTimeout(ctx, suggestFor)
	defer cancel()
	ended := func() {}
	if s.replayed != nil {
		ended = s.replayed()
	}
	f.rep, f.err = s.replay(ctx, rules)
	ended()
	s.mu.Lock()
	s.running = nil
	if f.err == nil {
		s.key, s.rep = f.key, f.rep
	}
	s.mu.Unlock()
	close(f.done)
}

// state names what a report is computed from, cheaply: the trail's last
// row, the policy in force with its run-time rules, and the evidence
// window's start to the minute. A new decision, grant or rule change
// changes it. It returns the run-time rules it read too: the replay
// decides with those, so what is kept under key was proven against them.
func (s *consoleSuggest) state(ctx context.Context) (string, []*airlockv1.PolicyRule, error) {
	rd, err := s.audit.reader(ctx)
	if err != nil {
		return "", nil, err
	}
	head, err := s.trailHead(ctx, rd)
	if err != nil {
		return "", nil, err
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	rules, err := policyapi.New(s.audit.deps.NC, seal.Key{}, "console").ListRules(qctx)
	cancel()
	if err != nil {
		return "", nil, fmt.Errorf("read the run-time rules the replay decides with: %w", err)
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(rules)
	if err != nil {
		return "", nil, fmt.Errorf("read the run-time rules the replay decides with: %w", err)
	}
	_, since, err := suggestConfig(s.audit.deps.Config)
	if err != nil {
		return "", nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00", head, since.Truncate(time.Minute).Unix())
	h.Write(raw)
	return hex.EncodeToString(h.Sum(nil)), rules.GetRules(), nil
}

// trailHead names the last row of the trail rd reads: ClickHouse's row
// with the highest sequence (the sink writes the chain in order) and its
// hash, or the events stream's first and last sequence.
func (s *consoleSuggest) trailHead(ctx context.Context, rd store.Reader) (string, error) {
	if ch, ok := rd.(interface {
		Head(context.Context) (uint64, string, error)
	}); ok {
		seq, hash, err := ch.Head(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("clickhouse %d %s", seq, hash), nil
	}
	st, err := s.audit.deps.JS.Stream(ctx, s.audit.deps.Config.Stream.Name)
	if err != nil {
		return "", fmt.Errorf("read the events stream's head: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("read the events stream's head: %w", err)
	}
	return fmt.Sprintf("stream %d %d", info.State.FirstSeq, info.State.LastSeq), nil
}

// replay computes the report: the whole trail replayed with rules, the
// run-time rules in force (as state read them).
func (s *consoleSuggest) replay(ctx context.Context, rules []*airlockv1.PolicyRule) (console.SuggestionReport, error) {
	cfg := s.audit.deps.Config
	rd, err := s.audit.reader(ctx)
	if err != nil {
		return console.SuggestionReport{}, err
	}
	scfg, since, err := suggestConfig(cfg)
	if err != nil {
		return console.SuggestionReport{}, err
	}
	rep, err := suggestions(ctx, cfg, rd, rules, scfg, since)
	if err != nil {
		return console.SuggestionReport{}, err
	}
	out := console.SuggestionReport{Source: rep.Source, Asks: rep.Asks, Removed: rep.AsksRemoved, Decided: rep.Decided, RuntimeRules: len(rules)}
	for _, x := range rep.Suggestions {
		out.Suggestions = append(out.Suggestions, consoleSuggestion(x))
	}
	for _, x := range rep.Dropped {
		out.Dropped = append(out.Dropped, consoleSuggestion(x))
	}
	for _, k := range rep.Skipped {
		out.Skipped = append(out.Skipped, console.SkippedGroup{Agent: k.Agent, Tool: k.Tool, Why: k.Why, Calls: k.Calls})
	}
	return out, nil
}

// maxEvidenceShown bounds the approvals a suggestion lists on the page.
const maxEvidenceShown = 50

func consoleSuggestion(s suggest.Suggestion) console.Suggestion {
	v := console.Suggestion{ID: s.ID, Agent: s.Agent, Tool: s.Tool, RuleID: s.RuleID, Risk: s.Risk, Requester: s.Requester,
		Grant: s.Grant, Scope: s.Scope, GrantJSON: string(s.GrantJSON), Widened: s.Widened, Approvals: s.Approvals, Approvers: s.Approvers,
		MedianTimeToDecide: s.MedianTimeToDecide, FromCall: s.FromCall, FromRevision: s.FromRevision}
	if s.Server != "" {
		v.Tool = s.Server + "__" + s.Tool
	}
	// The page lists the newest approvals; the counts cover them all.
	ev := s.Evidence
	if len(ev) > maxEvidenceShown {
		ev = ev[len(ev)-maxEvidenceShown:]
	}
	for _, e := range ev {
		v.Evidence = append(v.Evidence, console.SuggestionEvidence{Call: e.Call, Revision: e.Revision, AskedAt: e.AskedAt, Approvers: e.Approvers,
			TimeToDecide: e.TimeToDecide, Args: e.Args})
	}
	if p := s.Proof; p != nil {
		v.Replayed, v.AsksRemoved, v.ReviewerTimeSaved, v.PerReviewer = p.Replayed, p.AsksRemoved, p.ReviewerTimeSaved, p.PerReviewer
		for _, x := range p.Violations {
			v.Violations = append(v.Violations, fmt.Sprintf("call %s of agent %s (%s)", x.Call, x.Agent, x.Outcome))
		}
		for _, x := range p.ProbesAllowed {
			v.Violations = append(v.Violations, fmt.Sprintf("%s %s, which nobody approved anything like", x.Pointer, x.Path))
		}
	}
	return v
}
