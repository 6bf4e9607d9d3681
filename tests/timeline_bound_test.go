package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// An agent adds events to its own pending call at will: every report it
// sends for the call is refused and recorded on it as an
// unauthorized_attempt, up to its call budget a minute (36,000 an hour at
// the defaults). The call page a reviewer opens to decide the call, and
// the events API, read and showed every one of them (h-bounds review F4:
// 4,000 reports made the page 1.3 MB, and near 100,000 its read passed its
// 5 s and the page failed). They show the first and the last 100, and say
// how many are left out and which command lists them.
func TestAnAgentCannotGrowItsCallsPageWithoutBound(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	// The budget is raised only to make the test short.
	if err := os.WriteFile(cfg, []byte("approval:\n  groups: {reviewers: [alice]}\nlimits:\n  agent_calls_per_minute: 1000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	agent := dev.Agent(t, "bot")
	token := adminToken(t, dev)
	_, js := dev.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id, err := agent.Submit(ctx, airlock.Call{ID: "noisy", Server: "fs", Tool: "write_file", Args: map[string]any{"path": "/tmp/x", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, id)

	const reports = 1000
	for range reports {
		if err := agent.Report(ctx, id, 1, airlock.Report{Result: []byte(`{"ok":true}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ofCall := subject.OfCall("bot", id)
	stored := func() (attempts, all int) {
		s, err := js.Stream(ctx, config.Default().Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(ofCall))
		if err != nil {
			t.Fatal(err)
		}
		for subj, n := range info.State.Subjects {
			all += int(n)
			if strings.HasSuffix(subj, "."+subject.UnauthorizedAttempt) {
				attempts += int(n)
			}
		}
		return attempts, all
	}
	testenv.Eventually(t, 2*time.Minute, "the refused reports to be recorded", func() bool { a, _ := stored(); return a >= reports })
	_, all := stored()

	status, page := bearerGet(t, dev.HTTPURL+"/calls/bot/"+id, token)
	if status != http.StatusOK {
		t.Fatalf("the call page answered %d", status)
	}
	shown := strings.Count(page, `<strong class="ev ev-`)
	omitted := fmt.Sprintf("… %d more events not shown here", all-200)
	if shown != 200 || !strings.Contains(page, omitted) || !strings.Contains(page, "airlock audit query --agent bot --call "+id) {
		t.Fatalf("of the call's %d events the page shows %d (want the first and last 100) and says %q: %v", all, shown, omitted, strings.Contains(page, omitted))
	}
	if !strings.Contains(page, "ev-requested") {
		t.Errorf("the page does not show the call's first event, its request")
	}

	status, body := bearerGet(t, dev.HTTPURL+"/api/v1/approvals/bot/"+id+"/events", token)
	var api struct {
		Events    []struct{ Type string }
		Omitted   int    `json:"omitted"`
		AllEvents string `json:"all_events"`
	}
	if err := json.Unmarshal([]byte(body), &api); status != http.StatusOK || err != nil {
		t.Fatalf("the events API answered %d %v: %s", status, err, body)
	}
	if len(api.Events) != 200 || api.Omitted != all-200 || api.AllEvents != "airlock audit query --agent bot --call "+id {
		t.Fatalf("the events API gave %d events, omitted %d, all_events %q; the call has %d", len(api.Events), api.Omitted, api.AllEvents, all)
	}
	if api.Events[0].Type != "requested" || api.Events[199].Type != subject.UnauthorizedAttempt {
		t.Errorf("the events API's first event is %q and last %q: want the call's first and its newest", api.Events[0].Type, api.Events[199].Type)
	}
}
