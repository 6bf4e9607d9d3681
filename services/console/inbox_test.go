package console_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

var (
	countRE  = regexp.MustCompile(`<span class="count" id="inbox-count">(\d+)</span>`)
	othersRE = regexp.MustCompile(`id="inbox-others-count">(\d+)</span>`)
	titleRE  = regexp.MustCompile(`<title>\((\d+)\) Inbox`)
)

// section is the HTML of the inbox between two markers.
func section(t *testing.T, body, from, to string) string {
	t.Helper()
	i, j := strings.Index(body, from), strings.Index(body, to)
	if i < 0 || j < i {
		t.Fatalf("the inbox has no %q before %q:\n%s", from, to, body)
	}
	return body[i:j]
}

// TestInboxCountsOnlyWhatThePersonMayDecide: the inbox's count, its badge
// and its title count the calls the approval service would let the
// signed-in person decide; a call made on their behalf (separation of
// duties) and one whose approvers exclude them are listed apart, saying
// why and who can decide — and the live feed sorts its rows the same way.
func TestInboxCountsOnlyWhatThePersonMayDecide(t *testing.T) {
	e := newEnv(t)
	mine := pending("call_mine", "bot", "fs__write_file", map[string]any{"path": "/tmp/a"}, airlockv1.Risk_RISK_LOW)
	own := pending("call_own", "bot", "fs__write_file", map[string]any{"path": "/tmp/b"}, airlockv1.Risk_RISK_LOW)
	own.Call.OnBehalfOf, own.Call.OnBehalfOfVerified = "alice", true
	carols := pending("call_carol", "bot", "fs__write_file", map[string]any{"path": "/tmp/c"}, airlockv1.Risk_RISK_LOW)
	carols.Decision.Approvers = []string{"carol"}
	nobody := pending("call_nobody", "bot", "fs__write_file", map[string]any{"path": "/tmp/d"}, airlockv1.Risk_RISK_LOW)
	nobody.Call.OnBehalfOf, nobody.Decision.Approvers = "alice", []string{"alice"}
	for _, r := range []*airlockv1.ApprovalRecord{mine, own, carols, nobody} {
		e.approval.put(r)
	}

	for _, tc := range []struct {
		who          string
		count, other string
		yours        []string
		says         []string
	}{
		{who: "alice", count: "1", other: "3", yours: []string{"call_mine"},
			says: []string{"You cannot decide a call made on your behalf.", `Who can decide: <span class="who-decides">bob, root</span>`,
				"You are not among its approvers.", `Who can decide: <span class="who-decides">carol</span>`,
				"Nobody its approvers (alice) name can decide it: it will expire at its deadline"}},
		{who: "bob", count: "2", other: "2", yours: []string{"call_mine", "call_own"}},
		{who: "audrey", count: "0", other: "4", says: []string{"Your role (auditor) cannot decide calls."}},
	} {
		t.Run(tc.who+"_counts_"+tc.count, func(t *testing.T) {
			b := e.browser()
			b.signIn(tc.who)
			p := b.get("/")
			if m := countRE.FindStringSubmatch(p.Body); m == nil || m[1] != tc.count {
				t.Errorf("the badge shows %v, want %s", m, tc.count)
			}
			if m := titleRE.FindStringSubmatch(p.Body); m == nil || m[1] != tc.count {
				t.Errorf("the title counts %v, want %s", m, tc.count)
			}
			if m := othersRE.FindStringSubmatch(p.Body); m == nil || m[1] != tc.other {
				t.Errorf("the others count %v, want %s", m, tc.other)
			}
			yours := section(t, p.Body, `id="inbox-rows"`, `id="inbox-empty"`)
			others := section(t, p.Body, `id="inbox-others-rows"`, `id="live-status"`)
			for _, r := range []*airlockv1.ApprovalRecord{mine, own, carols, nobody} {
				id := r.GetCall().GetCallId()
				want := strings.Contains(strings.Join(tc.yours, " "), id)
				if strings.Contains(yours, id) != want || strings.Contains(others, id) == want {
					t.Errorf("%s is listed as yours=%v, want %v", id, strings.Contains(yours, id), want)
				}
			}
			for _, s := range tc.says {
				if !strings.Contains(others, s) {
					t.Errorf("the others do not say %q:\n%s", s, others)
				}
			}

			// The live feed sends the same rows, marked the same way.
			feed := openFeed(t, b, "")
			ev := next(t, feed)
			if ev.Name != "sync" {
				t.Fatalf("first event %+v", ev)
			}
			if got := strings.Count(ev.Data, `class="call-row`) - strings.Count(ev.Data, "not-yours"); got != len(tc.yours) {
				t.Errorf("the feed's sync has %d rows %s may decide, want %d", got, tc.who, len(tc.yours))
			}
			rec := pending("call_live_"+tc.who, "bot", "fs__write_file", map[string]any{"path": "/tmp/e"}, airlockv1.Risk_RISK_LOW)
			rec.Call.OnBehalfOf, rec.Call.OnBehalfOfVerified = tc.who, true
			if _, err := e.deps.Publisher("policy").Publish(context.Background(), &airlockv1.Event{AgentId: "bot", CallId: rec.Call.CallId, Revision: 1,
				Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: rec.Call, Decision: rec.Decision}}}, ""); err != nil {
				t.Fatal(err)
			}
			ev = next(t, feed)
			if ev.Name != "pending" || !strings.Contains(ev.Data, "call_live_"+tc.who) || !strings.Contains(ev.Data, "not-yours") {
				t.Errorf("a call made on %s's behalf arrives live as %+v", tc.who, ev)
			}
		})
	}

	t.Run("the_call_page_says_who_decides_and_offers_no_decision", func(t *testing.T) {
		b := e.browser()
		b.signIn("alice")
		p := b.get("/calls/bot/call_own")
		if strings.Contains(p.Body, "confirm-approve") || !strings.Contains(p.Body, "You cannot decide a call made on your behalf.") || !strings.Contains(p.Body, "bob, root") {
			t.Fatalf("the call page of a call made on alice's behalf:\n%s", p.Body)
		}
		if p := b.get("/calls/bot/call_mine"); !strings.Contains(p.Body, "confirm-approve") {
			t.Fatalf("the call page of a call alice may decide offers no decision:\n%s", p.Body)
		}
	})
}

// TestInboxShowsTheNewestPageAndSaysMoreWait: however many calls wait, the
// inbox opens with the newest 100 (what it costs stays the same: airlock
// bench pending) and says that more wait and how to reach them; with 100
// or fewer it shows them all and says nothing more.
func TestInboxShowsTheNewestPageAndSaysMoreWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		calls     int
		wantCount string
		wantMore  bool
	}{
		{"a_hundred_are_all_shown", 100, "100", false},
		{"of_a_hundred_and_fifty_the_newest_hundred_are_shown", 150, "100", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			start := time.Now().Add(-time.Hour)
			for i := range tc.calls {
				r := pending(fmt.Sprintf("call_%03d", i), "bot", "fs__write_file", map[string]any{"path": "/tmp/a"}, airlockv1.Risk_RISK_LOW)
				r.CreatedAt = timestamppb.New(start.Add(time.Duration(i) * time.Second))
				e.approval.put(r)
			}
			b := e.browser()
			b.signIn("alice")
			p := b.get("/")
			if m := countRE.FindStringSubmatch(p.Body); m == nil || m[1] != tc.wantCount {
				t.Fatalf("inbox count %v, want %s", m, tc.wantCount)
			}
			if got := strings.Contains(p.Body, `id="inbox-more"`); got != tc.wantMore {
				t.Fatalf("says more wait: %v, want %v", got, tc.wantMore)
			}
			newest, oldestShown := fmt.Sprintf("call_%03d", tc.calls-1), fmt.Sprintf("call_%03d", tc.calls-100)
			if !strings.Contains(p.Body, newest) || !strings.Contains(p.Body, oldestShown) {
				t.Fatalf("the inbox lacks %s or %s", newest, oldestShown)
			}
			if tc.wantMore && strings.Contains(p.Body, fmt.Sprintf("call_%03d", tc.calls-101)) {
				t.Fatalf("the inbox shows call_%03d, older than its newest 100", tc.calls-101)
			}
		})
	}
}
