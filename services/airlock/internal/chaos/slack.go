package chaos

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

// card is a Block Kit message the approval service posted for a pending call.
type card struct {
	Channel, TS string
	Value       airlockslack.ButtonValue
}

// slackFake is Slack's Web API as the run's approval and console replicas
// reach it: slacktest's server plus the methods it lacks (chat.update,
// views.open) and a chat.postMessage that records each card by the call its
// buttons carry, so reviewers find the card to click.
type slackFake struct {
	*slacktest.Server
	seq atomic.Int64

	mu      sync.Mutex
	cards   map[string][]card   // "<agent>/<call>/<rev>" → cards posted for it
	updates map[string][]string // "<channel>/<ts>" → texts of chat.update
	modals  map[string]string   // trigger id → private_metadata of the modal opened
}

func startSlackFake() *slackFake {
	f := &slackFake{cards: map[string][]card{}, updates: map[string][]string{}, modals: map[string]string{}}
	f.Server = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", f.postMessage)
		c.Handle("/chat.update", f.update)
		c.Handle("/chat.postEphemeral", f.ok)
		c.Handle("/views.open", f.viewsOpen)
	})
	f.Start()
	return f
}

func cardKey(agent, call string, rev uint32) string { return fmt.Sprintf("%s/%s/%d", agent, call, rev) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (f *slackFake) postMessage(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	ch := r.PostForm.Get("channel")
	ts := fmt.Sprintf("1700000000.%06d", f.seq.Add(1))
	if v, ok := buttonValue(r.PostForm.Get("blocks")); ok {
		f.mu.Lock()
		k := cardKey(v.Agent, v.Call, v.Revision)
		f.cards[k] = append(f.cards[k], card{Channel: ch, TS: ts, Value: v})
		f.mu.Unlock()
	}
	writeJSON(w, map[string]any{"ok": true, "channel": ch, "ts": ts})
}

func (f *slackFake) update(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	ch, ts := r.PostForm.Get("channel"), r.PostForm.Get("ts")
	f.mu.Lock()
	f.updates[ch+"/"+ts] = append(f.updates[ch+"/"+ts], r.PostForm.Get("blocks")+r.PostForm.Get("text"))
	f.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true, "channel": ch, "ts": ts})
}

func (f *slackFake) ok(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"ok": true, "message_ts": fmt.Sprintf("1700000000.%06d", f.seq.Add(1))})
}

func (f *slackFake) viewsOpen(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
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
	writeJSON(w, map[string]any{"ok": true, "view": map[string]any{"id": "V" + strconv.FormatInt(f.seq.Add(1), 10)}})
}

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

// cardOf returns the first card posted for the call revision.
func (f *slackFake) cardOf(agent, call string, rev uint32) (card, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cs := f.cards[cardKey(agent, call, rev)]
	if len(cs) == 0 {
		return card{}, false
	}
	return cs[0], true
}

// updated reports whether the card was redrawn with text containing want.
func (f *slackFake) updated(c card, want string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.updates[c.Channel+"/"+c.TS] {
		if strings.Contains(u, want) {
			return true
		}
	}
	return false
}

// modal returns the private metadata of the modal opened for trigger.
func (f *slackFake) modal(trigger string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.modals[trigger]
	return m, ok
}

// slackUser is a reviewer's Slack identity, mapped to a principal by slack.users.
type slackUser struct{ ID, Name string }

// signedPost is a Slack interaction post: payload=<JSON>, signed with the
// app's signing secret over "v0:<timestamp>:<body>".
func signedPost(endpoint, secret string, payload any) (*http.Request, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	body := "payload=" + url.QueryEscape(string(raw))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return req, nil
}

// buttonClick is the block_actions payload Slack sends when u clicks
// action on card c; trigger identifies the click (and the modal it opens).
func buttonClick(u slackUser, c card, action, trigger string) map[string]any {
	return map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": u.ID, "username": u.Name, "name": u.Name, "team_id": "T1"},
		"api_app_id": "A1",
		"container":  map[string]any{"type": "message", "message_ts": c.TS, "channel_id": c.Channel},
		"trigger_id": trigger,
		"team":       map[string]any{"id": "T1", "domain": "chaos"},
		"channel":    map[string]any{"id": c.Channel},
		"actions": []any{map[string]any{
			"action_id": action, "block_id": airlockslack.BlockActions, "type": "button", "value": c.Value.Encode(),
			"action_ts": fmt.Sprintf("%d.000100", time.Now().Unix()),
		}},
	}
}

// viewSubmission is the payload Slack sends when u submits the reason modal.
func viewSubmission(u slackUser, privateMetadata, reason string) map[string]any {
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
