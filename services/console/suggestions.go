package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/ids"
)

// Suggester computes the suggestions the Suggestions page shows: groups of
// one agent's calls people kept approving, each with the narrowest standing
// grant that covers it, already proven by replay over the recorded history
// (airlock wires services/audit/suggest). It must return only proven ones
// in Suggestions; nothing it returns is adopted until an admin says so.
// A report replays the whole trail: an implementation may return one it
// computed before (and share it between requests; the console never
// changes it) only while the trail and the rules it was proven against are
// unchanged, since Adopt takes its proof as the proof against the rules now.
type Suggester interface {
	Suggestions(ctx context.Context) (SuggestionReport, error)
}

// SuggestionReport is what the Suggestions page shows.
type SuggestionReport struct {
	Suggestions []Suggestion
	// Dropped: proposals the replay showed would allow a refused call.
	Dropped []Suggestion
	// Skipped: groups not proposed, and why.
	Skipped []SkippedGroup
	// Source: where the trail was read ("clickhouse" or "stream").
	Source string
	// Asks in the replayed history, and how many the suggestions remove.
	Asks, Removed int
	// Decided: calls read from the trail.
	Decided int
	// RuntimeRules: run-time rules in force the replay decided with.
	RuntimeRules int
}

// Suggestion is one proposed standing grant with its evidence and proof.
type Suggestion struct {
	ID, Agent, Tool, RuleID, Risk string
	// Requester: a self-confirmed group's requester, the only person who may adopt it.
	Requester string
	// Grant is the scope as it would be stored; Scope says it in words.
	Grant                  *airlockv1.StandingGrant
	Scope, GrantJSON       string
	Widened                []string
	Approvals              int
	Approvers              []string
	MedianTimeToDecide     time.Duration
	Evidence               []SuggestionEvidence
	FromCall               string
	FromRevision           uint32
	Replayed, AsksRemoved  int
	ReviewerTimeSaved      time.Duration
	PerReviewer            map[string]int
	Violations             []string
	Dismissed              bool
	DismissedBy            string
	AdoptPath, DismissPath string
}

// SuggestionEvidence is one approval a suggestion stands on.
type SuggestionEvidence struct {
	Call         string
	Revision     uint32
	AskedAt      time.Time
	Approvers    []string
	TimeToDecide time.Duration
	Args         string
	Path         string
}

// SkippedGroup is a group of calls not proposed, and why.
type SkippedGroup struct {
	Agent, Tool, Why string
	Calls            int
}

// DismissedKeyPrefix starts the console bucket's keys that remember a
// dismissed suggestion ("suggestions.dismissed.<id>").
const DismissedKeyPrefix = "suggestions.dismissed."

// Dismissal is who dismissed a suggestion, and when.
type Dismissal struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// Dismissals reads every remembered dismissal from the console bucket kv.
func Dismissals(ctx context.Context, kv jetstream.KeyValue) (map[string]Dismissal, error) {
	out := map[string]Dismissal{}
	keys, err := bus.Keys(ctx, kv, DismissedKeyPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("list dismissed suggestions: %w", err)
	}
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue // deleted meanwhile
		}
		var d Dismissal
		if json.Unmarshal(e.Value(), &d) == nil {
			out[key[len(DismissedKeyPrefix):]] = d
		}
	}
	return out, nil
}

type suggestionsView struct {
	layout
	Report        SuggestionReport
	ShowDismissed bool
	Hidden        int
}

// suggestions is the report with dismissals marked, and the links built.
func (con *Console) suggestions(ctx context.Context) (SuggestionReport, error) {
	if con.opts.Suggest == nil {
		return SuggestionReport{}, apierr.New(apierr.Unavailable, "suggestions are not available in this process (they need the audit trail)")
	}
	rep, err := con.opts.Suggest.Suggestions(ctx)
	if err != nil {
		return rep, apierr.Wrap(apierr.Unavailable, err, "compute suggestions: %v", err)
	}
	dismissed, err := Dismissals(ctx, con.store.kv)
	if err != nil {
		return rep, apierr.Wrap(apierr.Unavailable, err, "read dismissed suggestions: %v", err)
	}
	// The report may be shared with other requests: mark a copy.
	rep.Suggestions = slices.Clone(rep.Suggestions)
	for i := range rep.Suggestions {
		s := &rep.Suggestions[i]
		s.Evidence = slices.Clone(s.Evidence)
		if d, ok := dismissed[s.ID]; ok {
			s.Dismissed, s.DismissedBy = true, d.By
		}
		s.AdoptPath = "/suggestions/" + url.PathEscape(s.ID) + "/adopt"
		s.DismissPath = "/suggestions/" + url.PathEscape(s.ID) + "/dismiss"
		for j := range s.Evidence {
			e := &s.Evidence[j]
			e.Path = "/calls/" + url.PathEscape(s.Agent) + "/" + url.PathEscape(e.Call)
		}
	}
	return rep, nil
}

func (con *Console) suggestionsPage(c echo.Context) error {
	rep, err := con.suggestions(c.Request().Context())
	if err != nil {
		return err
	}
	v := &suggestionsView{layout: layout{Title: "Suggestions"}, Report: rep, ShowDismissed: c.QueryParam("dismissed") == "1"}
	if !v.ShowDismissed {
		kept := rep.Suggestions[:0:0]
		for _, s := range rep.Suggestions {
			if s.Dismissed {
				v.Hidden++
				continue
			}
			kept = append(kept, s)
		}
		v.Report.Suggestions = kept
	}
	return con.render(c, http.StatusOK, "suggestions", v)
}

// find recomputes the suggestions and returns the one named id: what is
// adopted is what the server proves now, never scope sent by a browser.
func (con *Console) findSuggestion(ctx context.Context, id string) (Suggestion, error) {
	if err := ids.Validate("suggestion id", id); err != nil {
		return Suggestion{}, apierr.New(apierr.InvalidRequest, "%v", err)
	}
	rep, err := con.suggestions(ctx)
	if err != nil {
		return Suggestion{}, err
	}
	for _, s := range rep.Suggestions {
		if s.ID == id {
			return s, nil
		}
	}
	return Suggestion{}, apierr.New(apierr.NotFound, "suggestion %s is no longer proposed (the evidence changed, or replay now finds a refused call it would allow): reload the Suggestions page", id)
}

// adoptSuggestion creates the suggestion's standing grant through the
// approval service, as the admin who adopts it; the grant's id is
// "grant_<suggestion id>", so the trail's grant_created names the evidence
// and its actor the adopter, and adopting twice creates it once.
func (con *Console) adoptSuggestion(c echo.Context) error {
	ctx, p := c.Request().Context(), principal(c)
	s, err := con.findSuggestion(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	if s.Requester != "" && s.Requester != p.Name {
		return apierr.New(apierr.NotAuthorized, "suggestion %s stands on %s confirming their own calls: only %s may adopt it (a grant made by anyone else would reach calls made for other people)", s.ID, s.Requester, s.Requester)
	}
	g, err := con.use.approvals.CreateGrant(ctx, &airlockv1.CreateGrantRequest{FromAgentId: s.Agent, FromCallId: s.FromCall, FromRevision: s.FromRevision,
		Grant: s.Grant, By: p.Actor(channel(c)), RequestId: s.ID})
	if err != nil {
		return err
	}
	if g.GetRevoked() {
		// Adopting is idempotent (the grant's id is the suggestion's): this
		// one was adopted before and revoked since.
		return apierr.New(apierr.Conflict, "suggestion %s was adopted before as grant %s and revoked by %s: it stays revoked", s.ID, g.GetId(), g.GetRevokedBy().GetId())
	}
	return con.flashAndRedirect(c, "/grants", fmt.Sprintf("suggestion %s adopted as standing grant %s", s.ID, g.GetId()))
}

// dismissSuggestion remembers in the console bucket that an admin does not
// want suggestion id; the first dismissal is kept.
func (con *Console) dismissSuggestion(c echo.Context) error {
	id := c.Param("id")
	if err := ids.Validate("suggestion id", id); err != nil {
		return apierr.New(apierr.InvalidRequest, "%v", err)
	}
	b, _ := json.Marshal(Dismissal{By: principal(c).Name, At: con.opts.Now().UTC()})
	if _, err := con.store.kv.Create(c.Request().Context(), DismissedKeyPrefix+id, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return apierr.Wrap(apierr.Unavailable, err, "the dismissal could not be stored; try again")
	}
	return con.flashAndRedirect(c, "/suggestions", "suggestion "+id+" dismissed")
}
