package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A person cancels a pending call over the REST API
// (POST /api/v1/approvals/{agent}/{id}/cancel) only when the approval
// service lets them: its approvers, the person it acts for, or an admin
// (SPEC §4 "cancel (agent or operator)"). alice, a reviewer, is refused a
// call whose rule names only carol (403, recorded as an unauthorized
// attempt, the call still waits) and its page offers her no cancel; the
// admin withdraws it; a call the reviewers decide alice cancels: it never
// runs and the agent reads the cancel with the reason.
func TestOnlyItsApproversTheRequesterOrAnAdminCancelACallOverREST(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	writeFile(t, cfg, consoleUsersYAML(t))
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir(), "AIRLOCK_CONFIG="+cfg)
	token := adminToken(t, dev)
	alice := signInWithToken(t, dev.HTTPURL, "alice").token
	rule := `{"id":"carol-only","priority":1,"agent":"bot","server":"demo","tool":"write_file","args":{"/path":"carol.txt"},"effect":"ask","approvers":["carol"],"reason":"carol decides"}`
	if status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", token, rule); status != http.StatusOK {
		t.Fatalf("add rule: %d %s", status, body)
	}
	nc, js := dev.Admin(t)
	args, _ := structpb.NewStruct(map[string]any{"path": "carol.txt", "content": "x"})
	probe := &airlockv1.ToolCall{AgentId: "bot", CallId: "probe", Server: "demo", Tool: "write_file", Arguments: args}
	testenv.Eventually(t, 20*time.Second, "rule carol-only to be in force", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := policyapi.New(nc, seal.Key{}, "").Eval(ctx, probe)
		return err == nil && d.GetRuleId() == "carol-only"
	})
	bot := dev.Agent(t, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	submit := func(id, path string) {
		t.Helper()
		if _, err := bot.Submit(ctx, airlock.Call{ID: id, Server: "demo", Tool: "write_file", Args: map[string]any{"path": path, "content": "x"}}); err != nil {
			t.Fatal(err)
		}
		waitPending(t, dev, token, id)
	}
	offersCancel := func(id, token string) bool {
		t.Helper()
		status, page := bearerGet(t, dev.HTTPURL+"/calls/bot/"+id, token)
		if status != http.StatusOK {
			t.Fatalf("the page of %s: %d %s", id, status, page)
		}
		return strings.Contains(page, `id="act-cancel"`)
	}
	cancelURL := func(id string) string { return dev.HTTPURL + "/api/v1/approvals/bot/" + id + "/cancel" }

	submit("carols", "carol.txt")
	if offersCancel("carols", alice) {
		t.Error("the page of a call only carol decides offers alice, a reviewer, a cancel")
	}
	status, body := apiPost(t, cancelURL("carols"), alice, `{"reason":"mine to stop"}`)
	if status != http.StatusForbidden || !strings.Contains(body, "not_authorized") || !strings.Contains(body, "only its approvers, the person it acts for or an admin") {
		t.Errorf("alice's cancel of carol's call was answered %d %s, want 403 not_authorized", status, body)
	}
	testenv.Eventually(t, 10*time.Second, "the refused cancel on record", func() bool {
		return slices.Contains(testenv.SubjectTypes(t, js, subject.OfCall("bot", "carols")), subject.UnauthorizedAttempt)
	})
	waitPending(t, dev, token, "carols")
	if !offersCancel("carols", token) {
		t.Error("the page of a call only carol decides offers the admin no cancel")
	}
	if status, body := apiPost(t, cancelURL("carols"), token, `{"reason":"incident: stop everything"}`); status != http.StatusOK || !strings.Contains(body, "APPROVAL_STATE_CANCELED") {
		t.Fatalf("the admin's cancel of carol's call was answered %d %s, want 200 canceled", status, body)
	}
	if out, err := bot.Await(ctx, "carols"); err != nil || out.Status != airlock.StatusCanceled || out.Reason != "incident: stop everything" {
		t.Fatalf("the agent read %+v (%v), want canceled by the admin with the reason", out, err)
	}

	submit("ours", "ours.txt")
	if !offersCancel("ours", alice) {
		t.Error("the page of a call the reviewers decide offers alice no cancel")
	}
	if status, body := apiPost(t, cancelURL("ours"), alice, `{}`); status != http.StatusBadRequest || !strings.Contains(body, "say why you cancel") {
		t.Errorf("a cancel without a reason was answered %d %s, want 400", status, body)
	}
	status, body = apiPost(t, cancelURL("ours"), alice, `{"reason":"<i>the plan changed</i>"}`)
	var resp struct {
		Changed bool `json:"changed"`
		Record  struct {
			State string `json:"state"`
		} `json:"record"`
	}
	if err := json.Unmarshal([]byte(body), &resp); status != http.StatusOK || err != nil || !resp.Changed || resp.Record.State != "APPROVAL_STATE_CANCELED" {
		t.Fatalf("alice's cancel was answered %d %s (%v), want 200, changed, canceled", status, body, err)
	}
	out, err := bot.Await(ctx, "ours")
	if err != nil || out.Status != airlock.StatusCanceled || out.Reason != "<i>the plan changed</i>" {
		t.Fatalf("the agent read %+v (%v), want canceled with the reason", out, err)
	}
	if started, completed := testenv.Runs(t, js, "bot", "ours"); started != 0 || completed != 0 {
		t.Errorf("the canceled call started %d and completed %d times", started, completed)
	}
	status, body = apiPost(t, cancelURL("ours"), token, `{"reason":"again"}`)
	resp.Changed = false
	if err := json.Unmarshal([]byte(body), &resp); status != http.StatusOK || err != nil || resp.Changed || resp.Record.State != "APPROVAL_STATE_CANCELED" {
		t.Errorf("a second cancel was answered %d %s (%v), want 200 with nothing changed", status, body, err)
	}
}
