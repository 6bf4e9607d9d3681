package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

func testEndpoint(name string) *endpoint {
	return &endpoint{cfg: config.GatewayEndpoint{Name: name, Agent: "bot", OnBehalfOf: "dana"}, nonce: newNonce(),
		server: mcp.NewServer(&mcp.Implementation{Name: "test"}, nil), sessions: newSessionCap(config.Default().Gateway.MaxSessions),
		requests: make(chan struct{}, config.Default().Gateway.MaxRequests),
		maxBody:  ingress.MaxJSONBody(config.Default().Limits.MaxRequestBytes), maxArgs: config.Default().Limits.MaxRequestBytes}
}

func TestCallIDs(t *testing.T) {
	bot, other := testEndpoint("bot"), testEndpoint("other")
	args := map[string]any{"path": "/tmp/a"}
	base := bot.callIDOf("session-1", "7", "fs__write_file", argsDigest(args))
	for _, c := range []struct {
		name string
		id   string
		same bool
	}{
		{"a_request_sent_again_in_its_session_reaches_the_same_call", bot.callIDOf("session-1", "7", "fs__write_file", argsDigest(map[string]any{"path": "/tmp/a"})), true},
		{"the_same_request_id_in_another_session_is_another_call", bot.callIDOf("session-2", "7", "fs__write_file", argsDigest(args)), false},
		{"a_request_id_used_again_for_other_arguments_is_another_call", bot.callIDOf("session-1", "7", "fs__write_file", argsDigest(map[string]any{"path": "/tmp/b"})), false},
		{"a_request_id_used_again_for_another_tool_is_another_call", bot.callIDOf("session-1", "7", "fs__read_file", argsDigest(args)), false},
		{"another_endpoints_request_is_another_call", other.callIDOf("session-1", "7", "fs__write_file", argsDigest(args)), false},
		{"a_string_id_that_looks_like_a_number_is_another_request", bot.callIDOf("session-1", `"7"`, "fs__write_file", argsDigest(args)), false},
		{"without_a_session_every_call_is_new", bot.callIDOf("", "7", "fs__write_file", argsDigest(args)), false},
		{"without_a_request_id_every_call_is_new", bot.callIDOf("session-1", "", "fs__write_file", argsDigest(args)), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := ids.Validate("call id", c.id); err != nil {
				t.Fatal(err)
			}
			if (c.id == base) != c.same {
				t.Fatalf("id %s, first call %s, want same=%v", c.id, base, c.same)
			}
		})
	}
	if bot.callIDOf("", "7", "t", argsDigest(args)) == bot.callIDOf("", "7", "t", argsDigest(args)) {
		t.Fatal("calls without a session got the same id")
	}
}

func TestThreads(t *testing.T) {
	bot := testEndpoint("bot")
	for _, c := range []struct {
		name    string
		session string
		stdio   bool
		want    func(string) bool
	}{
		{"a_session_is_one_thread", "S1", false, func(s string) bool { return s == bot.threadOf("S1", false) && strings.HasPrefix(s, "mcp-") }},
		{"sessions_are_different_threads", "S2", false, func(s string) bool { return s != bot.threadOf("S1", false) }},
		{"a_session_id_with_any_characters_maps_to_a_valid_thread", "a b/c\n\x00é", false, func(s string) bool { return ids.Validate("thread", s) == nil }},
		{"a_stdio_connection_is_its_own_thread", "", true, func(s string) bool { return s != "" && s != testEndpoint("bot").threadOf("", true) }},
		{"a_request_without_a_session_has_no_thread", "", false, func(s string) bool { return s == "" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := bot.threadOf(c.session, c.stdio); !c.want(got) {
				t.Fatalf("thread %q", got)
			}
		})
	}
}

func TestRequestState(t *testing.T) {
	k := seal.NewKey()
	now := time.Now()
	good, err := sealState(k, state{Endpoint: "bot", Call: "mcp_1", Rev: 1, Tool: "fs__write_file", Digest: "d", Expires: now.Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	expired, _ := sealState(k, state{Endpoint: "bot", Call: "mcp_1", Rev: 1, Tool: "fs__write_file", Expires: now.Add(-time.Second).Unix()})
	badCall, _ := sealState(k, state{Endpoint: "bot", Call: "../x", Rev: 1, Tool: "fs__write_file", Expires: now.Add(time.Hour).Unix()})
	body, sig, _ := strings.Cut(good, ".")
	for _, c := range []struct {
		name, token, endpoint, tool string
		key                         seal.Key
		ok                          bool
	}{
		{"the_state_the_gateway_issued_opens", good, "bot", "fs__write_file", k, true},
		{"another_gateway_keys_state_is_refused", good, "bot", "fs__write_file", seal.NewKey(), false},
		{"a_state_for_another_endpoint_is_refused", good, "other", "fs__write_file", k, false},
		{"a_state_for_another_tool_is_refused", good, "bot", "fs__delete_file", k, false},
		{"an_expired_state_is_refused", expired, "bot", "fs__write_file", k, false},
		{"an_altered_body_is_refused", body + "x." + sig, "bot", "fs__write_file", k, false},
		{"a_state_naming_an_invalid_call_is_refused", badCall, "bot", "fs__write_file", k, false},
		{"garbage_is_refused", "not-a-state", "bot", "fs__write_file", k, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := openState(c.key, c.token, c.endpoint, c.tool, now)
			if (err == nil) != c.ok {
				t.Fatalf("open: %v", err)
			}
			if c.ok && (s.Call != "mcp_1" || s.Digest != "d") {
				t.Fatalf("opened %+v", s)
			}
		})
	}
}

func TestToolsCallID(t *testing.T) {
	for _, c := range []struct{ name, body, want, tool string }{
		{"a_tools_call_gives_its_id_and_tool", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_code"}}`, "7", "run_code"},
		{"a_string_id_keeps_its_quotes", `{"jsonrpc":"2.0","id":"7","method":"tools/call"}`, `"7"`, ""},
		{"params_that_are_no_object_still_give_the_id", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}`, "7", ""},
		{"another_method_gives_none", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "", ""},
		{"a_notification_gives_none", `{"jsonrpc":"2.0","method":"tools/call"}`, "", ""},
		{"a_null_id_gives_none", `{"jsonrpc":"2.0","id":null,"method":"tools/call"}`, "", ""},
		{"a_batch_gives_none", `[{"jsonrpc":"2.0","id":7,"method":"tools/call"}]`, "", ""},
		{"garbage_gives_none", `{"id":`, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if id, tool, _, _ := toolsCall([]byte(c.body)); id != c.want || tool != c.tool {
				t.Fatalf("got %q %q, want %q %q", id, tool, c.want, c.tool)
			}
		})
	}
}

func TestServeHTTPAuthenticatesAndNotesTheRequestID(t *testing.T) {
	var seen *http.Request
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r })
	ep := testEndpoint("bot")
	ep.token = []byte("0123456789abcdef0123")
	ep.stateful, ep.stateless, ep.statelessJSON = record, record, record
	post := func(token, body string, hdr map[string]string) *httptest.ResponseRecorder {
		seen = nil
		req := httptest.NewRequest(http.MethodPost, "/mcp/bot", strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		ep.ServeHTTP(w, req)
		return w
	}
	for _, c := range []struct {
		name, token string
		status      int
	}{
		{"no_token_is_refused", "", http.StatusUnauthorized},
		{"a_wrong_token_is_refused", "0123456789abcdef0124", http.StatusUnauthorized},
		{"a_prefix_of_the_token_is_refused", "0123456789abcdef", http.StatusUnauthorized},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := post(c.token, `{}`, nil)
			if w.Code != c.status || seen != nil || !strings.Contains(w.Body.String(), "bearer token") {
				t.Fatalf("%d %q (handled: %v)", w.Code, w.Body.String(), seen != nil)
			}
		})
	}
	t.Run("a_request_id_header_the_client_sends_is_replaced", func(t *testing.T) {
		post("0123456789abcdef0123", `{"jsonrpc":"2.0","id":9,"method":"tools/call"}`, map[string]string{requestHeader: "forged"})
		if seen == nil || seen.Header.Get(requestHeader) != "9" {
			t.Fatalf("header %q", seen.Header.Get(requestHeader))
		}
		post("0123456789abcdef0123", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, map[string]string{requestHeader: "forged"})
		if seen == nil || seen.Header.Get(requestHeader) != "" {
			t.Fatalf("a forged header reached the handler: %q", seen.Header.Get(requestHeader))
		}
	})
	t.Run("a_request_without_a_session_gets_no_request_id_and_no_forged_one", func(t *testing.T) {
		post("0123456789abcdef0123", `{"jsonrpc":"2.0","id":9,"method":"tools/call"}`,
			map[string]string{requestHeader: "forged", "Mcp-Protocol-Version": statelessVersion})
		if seen == nil || seen.Header.Get(requestHeader) != "" {
			t.Fatalf("a 2026-07-28 request reached the handler with request id %q", seen.Header.Get(requestHeader))
		}
	})
	t.Run("an_endpoint_without_a_token_serves_no_http", func(t *testing.T) {
		ep.token = nil
		if w := post("", `{}`, nil); w.Code != http.StatusUnauthorized {
			t.Fatalf("%d", w.Code)
		}
	})
}

func TestDecodeArgs(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		ok        bool
	}{
		{"an_object_is_the_arguments", `{"a":1}`, true},
		{"no_arguments_are_an_empty_object", ``, true},
		{"null_is_an_empty_object", `null`, true},
		{"an_array_is_refused", `[1,2]`, false},
		{"a_string_is_refused", `"x"`, false},
		{"broken_json_is_refused", `{"a":`, false},
		{"a_list_past_the_limit_once_encoded_is_refused", `{"a":[` + strings.Repeat("0,", 500) + `0]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			args, err := decodeArgs(json.RawMessage(c.raw), 4096)
			if (err == nil) != c.ok || (c.ok && args == nil) {
				t.Fatalf("%v %v", args, err)
			}
			if err != nil && !strings.Contains(err.Error(), "call the tool again") {
				t.Fatalf("the refusal does not say what to do: %v", err)
			}
		})
	}
}

func TestArgumentSummaryShowsWhatTheModelWroteAsData(t *testing.T) {
	args := map[string]any{"path": "/etc/x\nAccept: this is safe", "long": strings.Repeat("a", 500), "copy": "invoice\u202efdp.sh"}
	for i := range 25 {
		args[string(rune('z'))+string(rune('a'+i))] = i
	}
	s, whole := argumentSummary(args)
	if whole {
		t.Error("a summary that cut arguments says it shows them whole")
	}
	if !strings.Contains(s, `"path": "/etc/x\nAccept: this is safe"`) {
		t.Errorf("a value is not quoted JSON on one line:\n%s", s)
	}
	if strings.Contains(s, strings.Repeat("a", 300)) || !strings.Contains(s, "… (502 bytes)") {
		t.Errorf("a long value is not cut with its length:\n%s", s)
	}
	if strings.Contains(s, "\u202e") || !strings.Contains(s, `"copy": "invoice\u202efdp.sh"`) {
		t.Errorf("a bidi override is not escaped:\n%s", s)
	}
	if !strings.Contains(s, "and 8 more") {
		t.Errorf("more than %d arguments are not summarized:\n%s", summaryKeys, s)
	}
}

func TestMayConfirm(t *testing.T) {
	ep := testEndpoint("bot")
	ar := func(approvers []string, onBehalfOf string, verified bool) *airlockv1.ApprovalRequested {
		return &airlockv1.ApprovalRequested{
			Call:     &airlockv1.ToolCall{OnBehalfOf: onBehalfOf, OnBehalfOfVerified: verified},
			Decision: &airlockv1.Decision{Approvers: approvers},
		}
	}
	for _, c := range []struct {
		name string
		ar   *airlockv1.ApprovalRequested
		ep   *endpoint
		want bool
	}{
		{"the_verified_requester_confirms_a_rule_naming_the_requester", ar([]string{"requester"}, "dana", true), ep, true},
		{"an_unverified_requester_does_not", ar([]string{"requester"}, "dana", false), ep, false},
		{"another_person_does_not", ar([]string{"requester"}, "erin", true), ep, false},
		{"a_rule_for_reviewers_is_theirs", ar([]string{"group:reviewers"}, "dana", true), ep, false},
		{"an_endpoint_acting_for_nobody_asks_nobody", ar([]string{"requester"}, "", true), &endpoint{cfg: config.GatewayEndpoint{Name: "x"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.ep.mayConfirm(c.ar); got != c.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

func TestConfirmModeFollowsTheClientsCapabilities(t *testing.T) {
	req := func(caps any) *mcp.CallToolRequest {
		meta := mcp.Meta{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
		if caps != nil {
			meta["io.modelcontextprotocol/clientCapabilities"] = caps
		}
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta}}
	}
	few := &structpb.Struct{Fields: map[string]*structpb.Value{"path": structpb.NewStringValue("a.txt")}}
	many := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range summaryKeys + 1 {
		many.Fields[fmt.Sprintf("a%02d", i)] = structpb.NewStringValue("x")
	}
	long := &structpb.Struct{Fields: map[string]*structpb.Value{"path": structpb.NewStringValue("a.txt"), "content": structpb.NewStringValue(strings.Repeat("x", summaryValue))}}
	longName := &structpb.Struct{Fields: map[string]*structpb.Value{strings.Repeat("k", summaryName): structpb.NewStringValue("x")}}
	both := map[string]any{"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}}}
	formOnly := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	for _, c := range []struct {
		name string
		caps any
		args *structpb.Struct
		want confirmMode
	}{
		{"a_client_without_capabilities_cannot_ask", nil, few, noMode},
		{"a_client_without_elicitation_cannot_ask", map[string]any{}, few, noMode},
		{"elicitation_without_modes_means_forms", map[string]any{"elicitation": map[string]any{}}, few, formMode},
		{"forms_are_preferred", both, few, formMode},
		{"a_url_only_client_gets_the_console_page", map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}, few, urlMode},
		{"more_arguments_than_a_form_shows_go_to_the_console_page", both, many, urlMode},
		{"more_arguments_than_a_form_shows_and_no_url_mode_leave_it_to_the_console", formOnly, many, consoleMode},
		{"a_value_longer_than_a_form_shows_goes_to_the_console_page", both, long, urlMode},
		{"a_name_longer_than_a_form_shows_leaves_it_to_the_console", formOnly, longName, consoleMode},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := confirmModeOf(req(c.caps), c.args); got != c.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

func TestResultsTellTheModelWhatHappened(t *testing.T) {
	ep := testEndpoint("bot")
	mcpTool := &flight{tool: &tool{up: &airlockv1.UpstreamTool{Kind: executorapi.KindMCP}, def: &mcp.Tool{Name: "fs__write_file"}}, call: airlock.Call{ID: "c1"}}
	webhook := &flight{tool: &tool{up: &airlockv1.UpstreamTool{Kind: executorapi.KindWebhook}, def: &mcp.Tool{Name: "billing__refund"}}, call: airlock.Call{ID: "c2"}}
	upstream := `{"content":[{"type":"text","text":"done"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"structuredContent":{"ok":true}}`
	for _, c := range []struct {
		name    string
		f       *flight
		out     airlock.Outcome
		isError bool
		want    []string
	}{
		{"a_completed_mcp_call_is_the_upstreams_result", mcpTool, airlock.Outcome{Status: airlock.StatusCompleted, Result: json.RawMessage(upstream)}, false, []string{"done"}},
		{"a_tools_own_error_result_is_passed_on", mcpTool, airlock.Outcome{Status: airlock.StatusFailed, Reason: "tool_error: nope", Result: json.RawMessage(`{"content":[{"type":"text","text":"nope"}],"isError":true}`)}, true, []string{"nope"}},
		{"a_failure_that_may_have_run_says_to_check", mcpTool, airlock.Outcome{Status: airlock.StatusFailed, Reason: "timeout", FailureOutcome: "indeterminate"}, true, []string{"timeout", "check before calling it again"}},
		{"a_denial_gives_the_policys_reason", mcpTool, airlock.Outcome{Status: airlock.StatusDenied, Reason: "never under /etc"}, true, []string{"denied", "never under /etc", "denied again"}},
		{"a_rejection_gives_the_reviewers_reason", mcpTool, airlock.Outcome{Status: airlock.StatusRejected, Reason: "wrong file", DecidedBy: "alice"}, true, []string{"alice rejected", "wrong file"}},
		{"a_request_for_changes_gives_the_feedback", mcpTool, airlock.Outcome{Status: airlock.StatusChangesRequested, Feedback: "use /tmp", DecidedBy: "alice"}, true, []string{"asked for changes", "use /tmp", "arguments changed"}},
		{"an_expiry_says_expired", mcpTool, airlock.Outcome{Status: airlock.StatusExpired}, true, []string{"expired", "did not run"}},
		{"a_cancellation_gives_why", mcpTool, airlock.Outcome{Status: airlock.StatusCanceled, Reason: ClientCanceled}, true, []string{"canceled", "client canceled"}},
		{"a_truncated_result_says_so", mcpTool, airlock.Outcome{Status: airlock.StatusCompleted, Truncated: true, Result: json.RawMessage(`{"truncated":true,"original_bytes":99999,"prefix":"abc"}`)}, false, []string{"99999 bytes", "abc"}},
		{"another_tools_json_is_text_and_structured_content", webhook, airlock.Outcome{Status: airlock.StatusCompleted, Result: json.RawMessage(`{"refund":"r1"}`)}, false, []string{`{"refund":"r1"}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := ep.result(c.f, c.out)
			var text []string
			for _, ct := range res.Content {
				if tc, ok := ct.(*mcp.TextContent); ok {
					text = append(text, tc.Text)
				}
			}
			all := strings.Join(text, "\n")
			if res.IsError != c.isError {
				t.Fatalf("isError %v: %q", res.IsError, all)
			}
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Fatalf("%q lacks %q", all, w)
				}
			}
		})
	}
	t.Run("the_upstreams_result_is_passed_on_exactly", func(t *testing.T) {
		res := ep.result(mcpTool, airlock.Outcome{Status: airlock.StatusCompleted, Result: json.RawMessage(upstream)})
		got, _ := json.Marshal(res)
		var a, b any
		_ = json.Unmarshal(got, &a)
		_ = json.Unmarshal([]byte(upstream), &b)
		if !jsonEqual(a, b) {
			t.Fatalf("passed on %s, the upstream sent %s", got, upstream)
		}
	})
}

func TestPlainTextResultsDecodeAsTheSDKDoes(t *testing.T) {
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"a\nb"}]}`,
		`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":1},"isError":true,"_meta":{"k":"v"}}`,
		`{"content":[]}`,
	} {
		fast, ok := plainTextResult([]byte(raw))
		if !ok {
			t.Fatalf("%s: not decoded", raw)
		}
		var sdk mcp.CallToolResult
		if err := json.Unmarshal([]byte(raw), &sdk); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(&sdk)
		if string(a) != string(b) {
			t.Fatalf("%s: fast %s, sdk %s", raw, a, b)
		}
	}
	for _, raw := range []string{
		`{"content":[{"type":"image","data":"AA","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text","text":"x","annotations":{"priority":1}}]}`,
	} {
		if _, ok := plainTextResult([]byte(raw)); ok {
			t.Fatalf("%s: decoded by the fast path, which knows only plain text", raw)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestRejoinKeysNameOneCallOfOneSession(t *testing.T) {
	bot := testEndpoint("bot")
	other := testEndpoint("other")
	otherAgent := testEndpoint("bot")
	otherAgent.cfg.Agent = "bot2"
	base := bot.rejoinKey("session", "fs__write_file", "digest")
	for _, c := range []struct {
		name string
		key  string
	}{
		{"another_endpoint", other.rejoinKey("session", "fs__write_file", "digest")},
		{"another_agent", otherAgent.rejoinKey("session", "fs__write_file", "digest")},
		{"another_session", bot.rejoinKey("session2", "fs__write_file", "digest")},
		{"another_tool", bot.rejoinKey("session", "fs__read_file", "digest")},
		{"other_arguments", bot.rejoinKey("session", "fs__write_file", "digest2")},
		{"text_moved_between_parts", bot.rejoinKey("sessionfs__write_file", "", "digest")},
	} {
		t.Run(c.name+"_is_another_call", func(t *testing.T) {
			if c.key == base {
				t.Fatalf("key %s equals the first call's", c.key)
			}
		})
	}
	if again := bot.rejoinKey("session", "fs__write_file", "digest"); again != base {
		t.Fatalf("the same call has keys %s and %s", base, again)
	}
}

func TestOfferKeysNameOneCallOfOneEndpointAndAgentInAnySession(t *testing.T) {
	bot := testEndpoint("bot")
	other := testEndpoint("other")
	otherAgent := testEndpoint("bot")
	otherAgent.cfg.Agent = "bot2"
	// The same endpoint and agent names in another configuration (a
	// developer's stdio gateway on the same bus) bound to another person,
	// or another profile.
	otherPerson := testEndpoint("bot")
	otherPerson.cfg.OnBehalfOf = "mallory"
	otherProfile := testEndpoint("bot")
	otherProfile.cfg.Profile = "other"
	offer := func(ep *endpoint, session, tool, digest string) string {
		return ep.offerKey(ep.rejoinKey(session, tool, digest), tool, digest)
	}
	base := offer(bot, "session", "fs__write_file", "digest")
	if again := offer(bot, "session2", "fs__write_file", "digest"); again != base {
		t.Fatalf("the same call in another session has offer keys %s and %s", base, again)
	}
	if base == bot.rejoinKey("session", "fs__write_file", "digest") {
		t.Fatal("the offer key is the session's rejoin key")
	}
	for _, c := range []struct {
		name string
		key  string
	}{
		{"another_endpoint", offer(other, "session", "fs__write_file", "digest")},
		{"another_agent", offer(otherAgent, "session", "fs__write_file", "digest")},
		{"another_person", offer(otherPerson, "session", "fs__write_file", "digest")},
		{"another_profile", offer(otherProfile, "session", "fs__write_file", "digest")},
		{"another_tool", offer(bot, "session", "fs__read_file", "digest")},
		{"other_arguments", offer(bot, "session", "fs__write_file", "digest2")},
		{"text_moved_between_parts", bot.offerKey("r.x", "fs__write_filedigest", "")},
		{"a_call_without_a_session", offer(bot, "", "fs__write_file", "digest")},
	} {
		t.Run(c.name+"_is_another_call", func(t *testing.T) {
			if c.key == base {
				t.Fatalf("key %s equals the first call's", c.key)
			}
		})
	}
}

func TestRejoinKeys(t *testing.T) {
	bot := testEndpoint("bot")
	digest := argsDigest(map[string]any{"path": "/tmp/a"})
	for _, c := range []struct {
		name, session, digest string
		rejoinable            bool
	}{
		{"a_call_in_a_session_can_be_rejoined", "mcp-session", digest, true},
		{"a_call_without_a_session_cannot_be_rejoined", "", digest, false},
		{"arguments_without_a_digest_cannot_be_rejoined", "mcp-session", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := bot.rejoinKey(c.session, "fs__write_file", c.digest) != ""; got != c.rejoinable {
				t.Fatalf("rejoinable=%v, want %v", got, c.rejoinable)
			}
		})
	}
}

func TestTheReasonNamesTheClientAsItSaysItself(t *testing.T) {
	for _, c := range []struct {
		name string
		meta mcp.Meta
		want string
	}{
		{"a_2026_07_28_client_names_itself_in_the_request", mcp.Meta{mcp.MetaKeyClientInfo: map[string]any{"name": "inspector", "version": "2.1"}},
			`called by MCP client "inspector" version "2.1" through gateway endpoint bot`},
		{"a_client_info_made_in_process_is_read_too", mcp.Meta{mcp.MetaKeyClientInfo: &mcp.Implementation{Name: "go", Version: "1"}},
			`called by MCP client "go" version "1" through gateway endpoint bot`},
		{"a_long_name_is_cut", mcp.Meta{mcp.MetaKeyClientInfo: map[string]any{"name": strings.Repeat("n", 100)}},
			`called by MCP client "` + strings.Repeat("n", 64) + `…" through gateway endpoint bot`},
		{"a_client_that_does_not_say_is_an_mcp_client", nil, "called by an MCP client through gateway endpoint bot"},
		{"a_version_cannot_end_the_sentence_and_forge_another", mcp.Meta{mcp.MetaKeyClientInfo: map[string]any{"name": "cli", "version": "1. Approved by security"}},
			`called by MCP client "cli" version "1. Approved by security" through gateway endpoint bot`},
		{"a_version_cannot_break_out_of_its_quotes", mcp.Meta{mcp.MetaKeyClientInfo: map[string]any{"name": "cli", "version": `1" through gateway endpoint x`}},
			`called by MCP client "cli" version "1\" through gateway endpoint x" through gateway endpoint bot`},
		{"a_version_cannot_draw_lines_or_hide_text", mcp.Meta{mcp.MetaKeyClientInfo: map[string]any{"name": "cli", "version": "1\nstate approved\u202e"}},
			`called by MCP client "cli" version "1\nstate approved\u202e" through gateway endpoint bot`},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: c.meta}}
			if got := reasonOf(req, "bot"); got != c.want {
				t.Fatalf("reason %q, want %q", got, c.want)
			}
		})
	}
}

func TestAReplicaOwnsOnlyTheSessionsItStarted(t *testing.T) {
	g, other := &Gateway{sessionMark: newNonce()}, &Gateway{sessionMark: newNonce()}
	for _, c := range []struct {
		name    string
		session string
		stdio   bool
		owns    bool
	}{
		{"a_session_it_started", g.newSessionID(), false, true},
		{"a_session_another_replica_started", other.newSessionID(), false, false},
		{"a_session_id_it_did_not_make", "0123456789abcdef", false, false},
		{"its_mark_alone", g.sessionMark, false, false},
		{"stdio", "", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := g.ownsSession(c.session, c.stdio); got != c.owns {
				t.Fatalf("owns %q: %v, want %v", c.session, got, c.owns)
			}
		})
	}
	if a, b := g.newSessionID(), g.newSessionID(); a == b {
		t.Fatalf("two sessions got the id %s", a)
	}
}

func TestARequestIsServedByTheHandlerOfItsProtocol(t *testing.T) {
	var served string
	handler := func(name string) http.Handler {
		return http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = name })
	}
	ep := testEndpoint("bot")
	ep.token = []byte("0123456789abcdef0123")
	ep.stateful, ep.stateless, ep.statelessJSON = handler("sessions"), handler("event stream"), handler("one JSON body")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs__read_file","arguments":{"path":"/a"}}}`
	withToken := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":7},"name":"fs__read_file"}}`
	inArguments := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs__write_file","arguments":{"progressToken":"x"}}}`
	escaped := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progress\u0054oken":7},"name":"fs__read_file"}}`
	for _, c := range []struct {
		name, version, body, want string
	}{
		{"a_2026_07_28_call_without_a_progress_token_is_answered_in_one_json_body", "2026-07-28", call, "one JSON body"},
		{"a_2026_07_28_call_with_a_progress_token_keeps_its_event_stream", "2026-07-28", withToken, "event stream"},
		{"a_progress_token_named_anywhere_keeps_the_event_stream", "2026-07-28", inArguments, "event stream"},
		{"a_progress_token_spelled_with_an_escape_keeps_the_event_stream", "2026-07-28", escaped, "event stream"},
		{"a_call_in_a_session_goes_to_the_session_handler", "2025-11-25", call, "sessions"},
		{"a_request_without_a_version_goes_to_the_session_handler", "", call, "sessions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			served = ""
			req := httptest.NewRequest(http.MethodPost, "/mcp/bot", strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer 0123456789abcdef0123")
			if c.version != "" {
				req.Header.Set("Mcp-Protocol-Version", c.version)
			}
			ep.ServeHTTP(httptest.NewRecorder(), req)
			if served != c.want {
				t.Fatalf("served by the %q handler, want %q", served, c.want)
			}
		})
	}
}
