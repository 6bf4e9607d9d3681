package slack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
)

// cardStrings returns every string in a blocks JSON document, one per
// line, so tests can look for text without caring about JSON escaping.
func cardStrings(t *testing.T, blocksJSON string) string {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(blocksJSON), &doc); err != nil {
		t.Fatalf("blocks are not JSON: %v\n%s", err, blocksJSON)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(x[k])
			}
		}
	}
	walk(doc)
	return strings.Join(out, "\n")
}

// buttonValues returns action id → value of every button on the card.
func buttonValues(t *testing.T, blocksJSON string) map[string]string {
	t.Helper()
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			URL      string `json:"url"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(blocksJSON), &blocks); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, b := range blocks {
		if b.Type == "actions" {
			for _, e := range b.Elements {
				out[e.ActionID] = e.Value + e.URL
			}
		}
	}
	return out
}

func newNotifier(t *testing.T, adjust ...func(*svc.Deps)) (*airlockslack.Notifier, *fakeSlack) {
	t.Helper()
	n := testenv.StartNATS(t)
	f := startFakeSlack(t)
	deps := config(t, n.URL(), f)
	for _, a := range adjust {
		a(&deps)
	}
	notifier, err := airlockslack.NewNotifier(context.Background(), deps, fastRetry)
	if err != nil {
		t.Fatal(err)
	}
	return notifier, f
}

func TestPendingCallPostsOneCardWithWhatAReviewerNeeds(t *testing.T) {
	t.Parallel()
	notifier, f := newNotifier(t)
	ctx := context.Background()
	rec := pendingRecord(t, "call_card")

	ref, err := notifier.Announce(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	posted := f.next(t, "chat.postMessage")
	if got := posted.Form.Get("channel"); got != "#ops" {
		t.Fatalf("card posted to %q, want #ops (the policy's slack:#ops)", got)
	}
	if !strings.HasPrefix(ref, "COPS/1700000000.") || strings.Contains(ref, ",") {
		t.Fatalf("ref = %q, want the one message as channel id/ts", ref)
	}
	text := cardStrings(t, posted.Blocks())
	deadline := rec.Deadline.AsTime().Unix()
	for _, tt := range []struct{ name, want string }{
		{"names_server_and_tool", "fs__write_file"},
		{"shows_risk", "high"},
		{"shows_policy_reason", "tools that change things need a person's approval"},
		{"shows_rule", "rule `write`"},
		{"shows_call_id_and_revision", "call `call_card` · revision 1"},
		{"shows_thread_id", "thread `thread-9`"},
		{"shows_agent_and_principal_as_the_agents_unverified_claim", "`bot-1` on behalf of `dave` (claimed by the agent, not verified)"},
		{"shows_deadline_in_readers_time_zone", fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|2026-11-21 06:00 UTC>", deadline)},
		{"links_to_console", "<" + publicURL + "/calls/bot-1/call_card|Open in the console>"},
		{"summarizes_short_arguments", `path: "/srv/app/config.yaml"`},
		{"summarizes_numbers", "mode: 420"},
		{"shows_a_long_value_whole_when_it_fits", `content: "` + strings.Repeat("x", 300) + `"`},
		{"masks_redacted_paths", `password: "[redacted]"`},
		{"escapes_agent_text", "update config &lt;!channel&gt;"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(text, tt.want) {
				t.Fatalf("card lacks %q:\n%s", tt.want, text)
			}
		})
	}
	for _, tt := range []struct{ name, absent string }{
		{"never_shows_a_redacted_secret", "hunter2"},
		{"never_lets_an_agent_mention_the_channel", "<!channel>"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(text, tt.absent) {
				t.Fatalf("card contains %q:\n%s", tt.absent, text)
			}
		})
	}

	t.Run("buttons_carry_call_id_revision_and_agent", func(t *testing.T) {
		values := buttonValues(t, posted.Blocks())
		for _, id := range []string{airlockslack.ActionApprove, airlockslack.ActionReject, airlockslack.ActionRequestChanges} {
			v, err := airlockslack.ParseButtonValue(values[id])
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if v != (airlockslack.ButtonValue{Call: "call_card", Revision: 1, Agent: "bot-1"}) {
				t.Fatalf("%s carries %+v", id, v)
			}
		}
		if got := values[airlockslack.ActionOpenConsole]; got != publicURL+"/calls/bot-1/call_card" {
			t.Fatalf("console button opens %q", got)
		}
	})

	// A value too long for a card is cut, and a card that does not show
	// every argument whole offers no Approve: that is decided in the
	// console, where everything is shown.
	t.Run("a_cut_value_is_approved_in_the_console", func(t *testing.T) {
		long := pendingRecord(t, "call_long")
		long.Call.Arguments.Fields["content"] = structpb.NewStringValue(strings.Repeat("y", 500))
		if _, err := notifier.Announce(ctx, long); err != nil {
			t.Fatal(err)
		}
		card := f.next(t, "chat.postMessage")
		text := cardStrings(t, card.Blocks())
		if !strings.Contains(text, "… (502 characters)") || strings.Contains(text, strings.Repeat("y", 401)) || !strings.Contains(text, "approve in the console") {
			t.Fatalf("the card shows the long value as:\n%s", text)
		}
		if values := buttonValues(t, card.Blocks()); values[airlockslack.ActionApprove] != "" || values[airlockslack.ActionReject] == "" {
			t.Fatalf("buttons %v: want Reject and no Approve", values)
		}
	})

	t.Run("announcing_again_after_a_crash_reuses_the_card", func(t *testing.T) {
		again, err := notifier.Announce(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if again != ref {
			t.Fatalf("second Announce returned %q, first %q", again, ref)
		}
		f.none(t, "chat.postMessage")
	})
}

func TestRoutingFollowsThePolicysNotifyList(t *testing.T) {
	t.Parallel()
	notifier, _ := newNotifier(t)
	for _, tt := range []struct {
		name   string
		notify []string
		want   []string
	}{
		{"no_notify_entries_means_no_slack", nil, nil},
		{"console_only_means_no_slack", []string{"console"}, nil},
		{"bare_slack_uses_the_configured_channel", []string{"slack"}, []string{"#airlock"}},
		{"each_named_channel_once_in_order", []string{"slack:#ops", "console", "slack:C0123", "slack:#ops"}, []string{"#ops", "C0123"}},
		{"other_prefixes_are_not_slack", []string{"slackish:#x", "email:ops@example.com"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &airlockv1.ApprovalRecord{Decision: &airlockv1.Decision{Notify: tt.notify}}
			if got := notifier.Targets(rec); !slices.Equal(got, tt.want) {
				t.Fatalf("Targets = %q, want %q", got, tt.want)
			}
			if notifier.Wants(rec) != (len(tt.want) > 0) {
				t.Fatalf("Wants = %v with targets %q", notifier.Wants(rec), tt.want)
			}
		})
	}
}

func TestUpdateShowsTheOutcomeOnEveryCard(t *testing.T) {
	t.Parallel()
	notifier, f := newNotifier(t)
	ctx := context.Background()
	human := func(id, channel string) *airlockv1.Actor {
		return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: id, Channel: channel}
	}
	for _, tt := range []struct {
		name   string
		state  airlockv1.ApprovalState
		by     *airlockv1.Actor
		reason string
		want   []string
	}{
		{"approved_in_the_console_names_who_and_where", airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, human("alice", "console"), "",
			[]string{":white_check_mark: *Approved* by *alice* (console)"}},
		{"rejected_shows_the_reason", airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, human("bob", "slack"), "not during the freeze",
			[]string{":no_entry: *Rejected* by *bob* (slack): `not during the freeze`", "will not run"}},
		{"changes_requested_shows_the_feedback", airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED, human("bob", "cli"), "use the staging path",
			[]string{"*Changes requested* by *bob* (cli): `use the staging path`"}},
		{"expired_says_nobody_decided", airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED, nil, "",
			[]string{":hourglass: *Expired*: nobody decided before", "will not run"}},
		{"canceled_by_the_agent", airlockv1.ApprovalState_APPROVAL_STATE_CANCELED, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot-1"}, "no longer needed",
			[]string{"*Canceled* by *bot-1* (agent): `no longer needed`"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := pendingRecord(t, "call_"+fmt.Sprint(tt.state.Number()))
			rec.Decision.Notify = []string{"slack:#ops", "slack:#sec"}
			ref, err := notifier.Announce(ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			f.next(t, "chat.postMessage")
			f.next(t, "chat.postMessage")

			done := proto.Clone(rec).(*airlockv1.ApprovalRecord)
			done.State, done.DecidedBy, done.Reason = tt.state, tt.by, tt.reason
			if err := notifier.Update(ctx, done, ref); err != nil {
				t.Fatal(err)
			}
			var updated []string
			for range 2 {
				u := f.next(t, "chat.update")
				updated = append(updated, u.Form.Get("channel")+"/"+u.Form.Get("ts"))
				text := cardStrings(t, u.Blocks())
				for _, w := range tt.want {
					if !strings.Contains(text, w) {
						t.Fatalf("updated card lacks %q:\n%s", w, text)
					}
				}
				if len(buttonValues(t, u.Blocks())) != 0 {
					t.Fatalf("a decided card still has buttons: %s", u.Blocks())
				}
			}
			slices.Sort(updated)
			if strings.Join(updated, ",") != ref {
				t.Fatalf("updated %v, want every message of %q", updated, ref)
			}
		})
	}
}

func TestRateLimitedChannelIsRetriedWithoutHoldingUpOthers(t *testing.T) {
	t.Parallel()
	// #busy's Retry-After is far longer than #calm's post may take, so that
	// the order of #calm's post and #busy's retry shows whether #calm waited.
	const retryAfter = 10 * time.Second
	waiting := make(chan struct{})
	notifier, f := newNotifier(t, func(d *svc.Deps) {
		d.Log = slog.New(logSignal{Handler: d.Log.Handler(), key: "call", value: "chat.postMessage to #busy", seen: waiting, once: new(sync.Once)})
	})
	f.RateLimit("#busy", 1, retryAfter)
	busy := pendingRecord(t, "call_429")
	busy.Decision.Notify = []string{"slack:#busy"}
	announced := make(chan error, 1)
	var ref string
	go func() {
		var err error
		ref, err = notifier.Announce(context.Background(), busy)
		announced <- err
	}()
	// #calm's card is asked for once the notifier knows #busy's Retry-After
	// (it logs that it waits to retry), so that a wait shared by every
	// channel would hold it up: one card for both channels posts to #calm
	// before the 429 comes back, which no such wait could delay.
	select {
	case <-waiting:
	case err := <-announced:
		t.Fatalf("Announce returned before retrying #busy's 429: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the notifier did not set out to retry #busy's 429 within 10s")
	}
	calm := pendingRecord(t, "call_calm")
	calm.Decision.Notify = []string{"slack:#calm"}
	ctx, cancel := context.WithTimeout(context.Background(), retryAfter/2)
	defer cancel()
	calmRef, err := notifier.Announce(ctx, calm)
	if err != nil || !strings.HasPrefix(calmRef, "CCALM/") {
		t.Fatalf("#calm's card while #busy waits out its Retry-After (%s): ref %q, err %v", retryAfter, calmRef, err)
	}
	if n := f.Attempts("#busy"); n != 1 {
		t.Fatalf("#busy was tried %d times before #calm's card was out; want only its rate-limited post: #calm waited for #busy's retry", n)
	}
	if first := f.next(t, "chat.postMessage"); first.Form.Get("channel") != "#calm" {
		t.Fatalf("posted to %s first; want #calm while #busy waits out its Retry-After", first.Form.Get("channel"))
	}

	second, ok := f.Next("chat.postMessage", retryAfter+10*time.Second)
	if !ok || second.Form.Get("channel") != "#busy" {
		t.Fatalf("after #calm: %v (received: %v); want #busy's retry", second.Form, ok)
	}
	if err := <-announced; err != nil {
		t.Fatalf("Announce gave up on a single 429: %v", err)
	}
	// #busy cannot have been told to wait before the fake answered its 429.
	limited, ok := f.RateLimitedAt("#busy")
	if !ok {
		t.Fatal("the fake never answered a post to #busy with 429")
	}
	if second.At.Sub(limited) < retryAfter {
		t.Fatalf("the rate-limited post was retried %s after its 429, before Retry-After (%s)", second.At.Sub(limited), retryAfter)
	}
	if !strings.HasPrefix(ref, "CBUSY/") {
		t.Fatalf("ref %q should be #busy's message", ref)
	}
}

// logSignal closes seen the first time a record with the attribute
// key=value is logged: a test waits for what only the log tells.
type logSignal struct {
	slog.Handler
	key, value string
	seen       chan struct{}
	once       *sync.Once
}

func (h logSignal) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == h.key && a.Value.String() == h.value {
			h.once.Do(func() { close(h.seen) })
			return false
		}
		return true
	})
	return h.Handler.Handle(ctx, r)
}

func (h logSignal) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(attrs)
	return h
}

func (h logSignal) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

func TestRemindRepliesInTheCardsThread(t *testing.T) {
	t.Parallel()
	notifier, f := newNotifier(t)
	ctx := context.Background()
	rec := pendingRecord(t, "call_remind")
	ref, err := notifier.Announce(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	f.next(t, "chat.postMessage")
	if err := notifier.Remind(ctx, rec, ref); err != nil {
		t.Fatal(err)
	}
	r := f.next(t, "chat.postMessage")
	_, ts, _ := strings.Cut(ref, "/")
	if r.Form.Get("thread_ts") != ts || r.Form.Get("reply_broadcast") != "true" {
		t.Fatalf("reminder %v is not a broadcast reply to %s", r.Form, ts)
	}
	if !strings.Contains(r.Form.Get("text"), "still waiting for a decision") {
		t.Fatalf("reminder text %q", r.Form.Get("text"))
	}
}

func TestCardPostOutlivingTheCallersDeadlineStillArrivesOnce(t *testing.T) {
	t.Parallel()
	notifier, f := newNotifier(t)
	f.RateLimit("#busy", 1, time.Second)
	rec := pendingRecord(t, "call_late")
	rec.Decision.Notify = []string{"slack:#busy"}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := notifier.Announce(ctx, rec); err == nil || !strings.Contains(err.Error(), "still retrying in the background") {
		t.Fatalf("Announce within 300ms of a Retry-After: 1 returned %v", err)
	}
	late := f.next(t, "chat.postMessage") // after Retry-After, without anyone calling again
	if late.Form.Get("channel") != "#busy" {
		t.Fatalf("late post went to %q", late.Form.Get("channel"))
	}
	testenv.Eventually(t, 10*time.Second, "the late card to be remembered", func() bool {
		ref, err := notifier.Announce(context.Background(), rec)
		return err == nil && strings.HasPrefix(ref, "CBUSY/")
	})
	f.none(t, "chat.postMessage")
}

func TestSlackErrorsAreRetriedOnlyWhenRetryingCanHelp(t *testing.T) {
	t.Parallel()
	notifier, f := newNotifier(t)
	f.Break("#flaky", 2)
	f.Missing("#gone")

	t.Run("server_errors_are_retried_with_backoff", func(t *testing.T) {
		rec := pendingRecord(t, "call_5xx")
		rec.Decision.Notify = []string{"slack:#flaky"}
		ref, err := notifier.Announce(context.Background(), rec)
		if err != nil || !strings.HasPrefix(ref, "CFLAKY/") {
			t.Fatalf("Announce after two 500s: ref %q, err %v", ref, err)
		}
		if n := f.Attempts("#flaky"); n != 3 {
			t.Fatalf("%d attempts, want 3 (two 500s, then success)", n)
		}
	})
	t.Run("a_missing_channel_fails_at_once_without_hiding_the_others", func(t *testing.T) {
		rec := pendingRecord(t, "call_gone")
		rec.Decision.Notify = []string{"slack:#gone"}
		if _, err := notifier.Announce(context.Background(), rec); err == nil || !strings.Contains(err.Error(), "channel_not_found") {
			t.Fatalf("Announce to a missing channel: %v", err)
		}
		if n := f.Attempts("#gone"); n != 1 {
			t.Fatalf("%d attempts at a channel that does not exist, want 1", n)
		}
		rec.Decision.Notify = []string{"slack:#gone", "slack:#fine"}
		ref, err := notifier.Announce(context.Background(), rec)
		if err != nil || !strings.HasPrefix(ref, "CFINE/") || strings.Contains(ref, ",") {
			t.Fatalf("one good channel of two: ref %q, err %v; want the good card and no error", ref, err)
		}
	})
}

// The digest of an agent's calls not posted one by one is one plain
// message in the channel the calls were routed to: the agent (escaped),
// how many, and the console; no card, no buttons.
func TestDigestIsOneMessageNamingTheAgentAndTheCount(t *testing.T) {
	t.Parallel()
	notifier, f := newNotifier(t)
	rec := pendingRecord(t, "call_digest")
	if err := notifier.Digest(context.Background(), notify.Digest{Agent: "bot`*x*`", Calls: 12, Latest: rec}); err != nil {
		t.Fatal(err)
	}
	r := f.next(t, "chat.postMessage")
	text := r.Form.Get("text")
	if !strings.Contains(text, "12 more calls waiting") || !strings.Contains(text, "open the console") || strings.Contains(text, "`*x*`") {
		t.Fatalf("digest text %q: want the count, the console, and the agent's name inert", text)
	}
	if r.Blocks() != "" {
		t.Fatalf("the digest carries blocks: %s", r.Blocks())
	}
}
