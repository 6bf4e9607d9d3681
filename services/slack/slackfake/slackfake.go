// Package slackfake is Slack as airlock's tests and `airlock chaos` reach
// it, on loopback: slacktest's Web API server plus the methods it lacks
// (chat.update, views.open) and a chat.postMessage that answers as Slack
// does and records each card by the call its buttons carry; faults to
// inject (rate limits, errors, unknown channels, an outage); and the
// interaction posts Slack sends, signed exactly as Slack signs them. One
// fake for every test of the Slack channel, so what they assume of Slack is
// written once.
package slackfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"

	airlockslack "github.com/airlock-gate/airlock/services/slack"
)

// Methods are the Web API methods the fake answers itself.
var Methods = []string{"chat.postMessage", "chat.update", "chat.postEphemeral", "views.open"}

// Call is one Web API call the fake answered.
type Call struct {
	Method string
	Form   url.Values      // form-encoded calls (chat.*)
	Body   json.RawMessage // JSON calls (views.open)
	At     time.Time
}

// Blocks is the raw blocks JSON of a chat call.
func (c Call) Blocks() string { return c.Form.Get("blocks") }

// Card is a Block Kit message posted for a pending call.
type Card struct {
	Channel, TS string
	Value       airlockslack.ButtonValue
}

// Server is the fake. Every answered call is queued on its method's
// channel (Next waits for one) and kept in order (Calls, Saw).
type Server struct {
	*slacktest.Server
	seq       atomic.Int64
	abandoned atomic.Int64 // held calls whose caller gave up waiting

	// hold, while not nil, keeps every call waiting until it is closed
	// (Hold, Release); held counts the calls waiting, by method.
	hold chan struct{}
	held map[string]int

	mu        sync.Mutex
	queued    map[string]chan Call
	log       []Call
	down      int                      // Slack outage: how many more calls that match downOf answer 503
	downOf    func(Call) bool          // the calls the outage meets
	refused   []Call                   // calls answered 503 during an outage
	limited   map[string]int           // channel → how many more posts answer 429
	limitWait map[string]time.Duration // channel → the Retry-After its 429s tell
	limitAt   map[string]time.Time     // channel → when its last 429 was answered
	broken    map[string]int           // channel → how many more posts answer 500
	missing   map[string]bool          // channels that answer channel_not_found
	tries     map[string]int           // channel → posts attempted, whatever the answer
	cards     map[string][]Card        // "<agent>/<call>/<rev>" → cards posted for it
	updates   map[string][]string      // "<channel>/<ts>" → blocks and text of each chat.update
	modals    map[string]string        // trigger id → private_metadata of the modal opened
}

// queueSize bounds each method's queue; calls past it are kept in the log only.
const queueSize = 1000

// Start starts a fake; Stop it when done.
func Start() *Server {
	f := &Server{queued: map[string]chan Call{}, limited: map[string]int{}, limitWait: map[string]time.Duration{},
		limitAt: map[string]time.Time{}, broken: map[string]int{}, missing: map[string]bool{}, tries: map[string]int{},
		cards: map[string][]Card{}, held: map[string]int{}, updates: map[string][]string{}, modals: map[string]string{}}
	for _, m := range Methods {
		f.queued[m] = make(chan Call, queueSize)
	}
	f.Server = slacktest.NewTestServer(func(c slacktest.Customize) {
		for _, m := range Methods {
			c.Handle("/"+m, f.handle(m))
		}
	})
	f.Start()
	return f
}

func (f *Server) handle(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if !f.wait(r, method) {
			return
		}
		call := Call{Method: method, At: time.Now()}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			call.Body = raw
		} else {
			call.Form, _ = url.ParseQuery(string(raw))
		}
		if f.outage(call) {
			http.Error(w, "<html>Slack is having trouble</html>", http.StatusServiceUnavailable)
			return
		}
		if method == "chat.postMessage" && f.fault(w, call.Form.Get("channel")) {
			return
		}
		ts := fmt.Sprintf("1700000000.%06d", f.seq.Add(1))
		var resp any
		switch method {
		case "chat.postMessage":
			ch := ChannelID(call.Form.Get("channel"))
			if v, ok := buttonValue(call.Blocks()); ok {
				f.mu.Lock()
				k := cardKey(v.Agent, v.Call, v.Revision)
				f.cards[k] = append(f.cards[k], Card{Channel: ch, TS: ts, Value: v})
				f.mu.Unlock()
			}
			resp = map[string]any{"ok": true, "channel": ch, "ts": ts}
		case "chat.update":
			ch, uts := call.Form.Get("channel"), call.Form.Get("ts")
			f.mu.Lock()
			f.updates[ch+"/"+uts] = append(f.updates[ch+"/"+uts], call.Blocks()+call.Form.Get("text"))
			f.mu.Unlock()
			resp = map[string]any{"ok": true, "channel": ch, "ts": uts}
		case "chat.postEphemeral":
			resp = map[string]any{"ok": true, "message_ts": ts}
		case "views.open":
			var req struct {
				TriggerID string `json:"trigger_id"`
				View      struct {
					PrivateMetadata string `json:"private_metadata"`
				} `json:"view"`
			}
			if err := json.Unmarshal(raw, &req); err != nil {
				http.Error(w, "bad views.open body", http.StatusBadRequest)
				return
			}
			f.mu.Lock()
			f.modals[req.TriggerID] = req.View.PrivateMetadata
			f.mu.Unlock()
			resp = map[string]any{"ok": true, "view": map[string]any{"id": "V" + strconv.FormatInt(f.seq.Add(1), 10)}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		f.mu.Lock()
		f.log = append(f.log, call)
		f.mu.Unlock()
		select {
		case f.queued[method] <- call:
		default:
		}
	}
}

// fault answers a post to channel with the fault injected for it, if any.
func (f *Server) fault(w http.ResponseWriter, channel string) bool {
	f.mu.Lock()
	f.tries[channel]++
	limited, wait, broken, missing := f.limited[channel], f.limitWait[channel], f.broken[channel], f.missing[channel]
	if limited > 0 {
		f.limited[channel]--
		f.limitAt[channel] = time.Now()
	} else if broken > 0 {
		f.broken[channel]--
	}
	f.mu.Unlock()
	switch {
	case limited > 0:
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
	case broken > 0:
		http.Error(w, "<html>internal error</html>", http.StatusInternalServerError)
	case missing:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":false,"error":"channel_not_found"}`))
	default:
		return false
	}
	return true
}

// ChannelID is what Slack answers for a channel given by name: its id.
func ChannelID(ch string) string {
	if strings.HasPrefix(ch, "#") {
		return "C" + strings.ToUpper(strings.TrimPrefix(ch, "#"))
	}
	return ch
}

// Next waits up to within for the next call of method.
func (f *Server) Next(method string, within time.Duration) (Call, bool) {
	select {
	case c := <-f.queued[method]:
		return c, true
	case <-time.After(within):
		return Call{}, false
	}
}

// Queued returns a call of method already received and not yet taken, if any.
func (f *Server) Queued(method string) (Call, bool) {
	select {
	case c := <-f.queued[method]:
		return c, true
	default:
		return Call{}, false
	}
}

// Updates is the queue of chat.update calls, for a select.
func (f *Server) Updates() <-chan Call { return f.queued["chat.update"] }

// Calls returns every call answered so far, in order.
func (f *Server) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.log...)
}

// Saw reports whether a call of method matching match was answered.
func (f *Server) Saw(method string, match func(Call) bool) bool {
	for _, c := range f.Calls() {
		if c.Method == method && match(c) {
			return true
		}
	}
	return false
}

// RateLimit makes the next n posts to channel answer 429 with a
// Retry-After of wait (in whole seconds, as Slack gives it).
func (f *Server) RateLimit(channel string, n int, wait time.Duration) {
	f.set(func() { f.limited[channel], f.limitWait[channel] = n, wait })
}

// RateLimitedAt is when the fake last answered a post to channel 429,
// taken before it wrote the answer: the poster cannot have been told to
// wait before then.
func (f *Server) RateLimitedAt(channel string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.limitAt[channel]
	return at, ok
}

// Break makes the next n posts to channel answer 500.
func (f *Server) Break(channel string, n int) { f.set(func() { f.broken[channel] = n }) }

// Missing makes every post to channel answer channel_not_found.
func (f *Server) Missing(channel string) { f.set(func() { f.missing[channel] = true }) }

func (f *Server) set(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

// Attempts is how many posts to channel were tried, whatever the answer.
func (f *Server) Attempts(channel string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries[channel]
}

// Down makes the next n calls that match answer 503, as during an outage;
// Slack is back after them. Counting calls rather than timing the outage
// lets a test end it before a retrying caller gives up, however slowly
// either runs; match lets it choose the call that meets the outage
// whichever of several held calls is answered first.
func (f *Server) Down(n int, match func(Call) bool) { f.set(func() { f.down, f.downOf = n, match }) }

// outage reports whether call falls in the outage (see Down), and records it.
func (f *Server) outage(call Call) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down <= 0 || !f.downOf(call) {
		return false
	}
	f.down--
	f.refused = append(f.refused, call)
	return true
}

// Hold keeps every call from now on waiting, unanswered, until Release: a
// test proves that something did not wait on Slack by seeing it finish
// while Slack holds every call (had it waited, it could not have finished).
func (f *Server) Hold() { f.set(func() { f.hold = make(chan struct{}) }) }

// Release answers every held call (as the fake would now: see Down) and
// ends the hold.
func (f *Server) Release() {
	f.set(func() {
		if f.hold != nil {
			close(f.hold)
			f.hold = nil
		}
	})
}

// Held is how many calls of method are waiting in the hold now.
func (f *Server) Held(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[method]
}

// Abandoned is how many held calls were given up by their caller (its
// context ended or its HTTP client timed out) before Release.
func (f *Server) Abandoned() int64 { return f.abandoned.Load() }

// wait holds the call while there is a hold (Hold); false: the caller gave
// up meanwhile.
func (f *Server) wait(r *http.Request, method string) bool {
	f.mu.Lock()
	hold := f.hold
	if hold != nil {
		f.held[method]++
	}
	f.mu.Unlock()
	if hold == nil {
		return true
	}
	defer f.set(func() { f.held[method]-- })
	select {
	case <-hold:
		return true
	case <-r.Context().Done():
		f.abandoned.Add(1)
		return false
	}
}

// Refused returns the calls answered 503 during outages, in order.
func (f *Server) Refused() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.refused...)
}

func cardKey(agent, call string, rev uint32) string { return fmt.Sprintf("%s/%s/%d", agent, call, rev) }

// buttonValue reads the airlock value of a card's Approve button.
func buttonValue(blocksJSON string) (airlockslack.ButtonValue, bool) {
	var blocks slackgo.Blocks
	if err := json.Unmarshal([]byte(blocksJSON), &blocks); err != nil {
		return airlockslack.ButtonValue{}, false
	}
	for _, b := range blocks.BlockSet {
		ab, ok := b.(*slackgo.ActionBlock)
		if !ok || ab.Elements == nil {
			continue
		}
		for _, el := range ab.Elements.ElementSet {
			if btn, ok := el.(*slackgo.ButtonBlockElement); ok && btn.ActionID == airlockslack.ActionApprove {
				v, err := airlockslack.ParseButtonValue(btn.Value)
				return v, err == nil
			}
		}
	}
	return airlockslack.ButtonValue{}, false
}

// CardOf returns the first card posted for the call revision.
func (f *Server) CardOf(agent, call string, rev uint32) (Card, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.cards[cardKey(agent, call, rev)]
	if len(cs) == 0 {
		return Card{}, false
	}
	return cs[0], true
}

// Updated reports whether the card was redrawn with text containing want.
func (f *Server) Updated(c Card, want string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.updates[c.Channel+"/"+c.TS] {
		if strings.Contains(u, want) {
			return true
		}
	}
	return false
}

// Modal returns the private metadata of the modal opened for trigger.
func (f *Server) Modal(trigger string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.modals[trigger]
	return m, ok
}

// User is a reviewer's Slack identity.
type User struct{ ID, Name string }

// Signature is Slack's request signature of body sent at ts with the app's
// signing secret: "v0=" + hex(HMAC-SHA256(secret, "v0:<ts>:<body>")).
func Signature(secret string, ts int64, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:%s", ts, body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// InteractionBody is the form body Slack posts for an interaction payload.
func InteractionBody(payload any) (string, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return "", err
	}
	return "payload=" + url.QueryEscape(string(raw)), nil
}

// SignedPost is the interaction post Slack sends to endpoint at time at:
// payload=<JSON>, signed with the app's signing secret.
func SignedPost(endpoint, secret string, payload any, at time.Time) (*http.Request, error) {
	body, err := InteractionBody(payload)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("X-Slack-Signature", Signature(secret, at.Unix(), body))
	return req, nil
}

// ButtonClick is the block_actions payload Slack sends when u clicks
// action on card c; trigger identifies the click (and the modal it opens).
func ButtonClick(u User, c Card, action, trigger string) map[string]any {
	return map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": "T1"},
		"api_app_id": "A1",
		"container":  map[string]any{"type": "message", "message_ts": c.TS, "channel_id": c.Channel},
		"trigger_id": trigger,
		"team":       map[string]any{"id": "T1", "domain": "airlock"},
		"channel":    map[string]any{"id": c.Channel},
		"actions": []any{map[string]any{
			"action_id": action, "block_id": airlockslack.BlockActions, "type": "button", "value": c.Value.Encode(),
			"action_ts": fmt.Sprintf("%d.000100", time.Now().Unix()),
		}},
	}
}

// ViewSubmission is the payload Slack sends when u submits the reason modal.
func ViewSubmission(u User, privateMetadata, reason string) map[string]any {
	return map[string]any{
		"type": "view_submission",
		"team": map[string]any{"id": "T1"},
		"user": map[string]any{"id": u.ID, "name": u.Name},
		"view": map[string]any{
			"id": "V1", "type": "modal", "callback_id": airlockslack.CallbackReason, "private_metadata": privateMetadata,
			"state": map[string]any{"values": map[string]any{
				airlockslack.BlockReason: map[string]any{airlockslack.InputReason: map[string]any{"type": "plain_text_input", "value": reason}},
			}},
		},
	}
}
