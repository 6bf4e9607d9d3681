package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// TestAlwaysAllowPinsEveryArgumentExactly: the grant form pins every
// argument of the call, strings with line breaks and values that are not
// text included, to exactly its value (taken from the call, not from the
// form), says the scope in words, and widens only what the reviewer widens.
func TestAlwaysAllowPinsEveryArgumentExactly(t *testing.T) {
	e := newEnv(t)
	args := map[string]any{"path": "notes/*.txt", "content": "line one\nline two", "mode": 420, "opts": map[string]any{"append": true}}
	e.approval.put(pending("call_pin", "bot", "demo__write_file", args, airlockv1.Risk_RISK_LOW))
	b := e.browser()
	b.signIn("alice")
	form := b.get("/grants/new?agent=bot&from=call_pin")
	for _, want := range []string{
		`<pre class="value" id="value-0">&#34;line one\nline two&#34;</pre>`, "several lines: pinned exactly", // /content
		`<pre class="value" id="value-1">420</pre>`, // /mode: no glob for a number
		`/path is exactly &#34;notes/*.txt&#34;`,    // a glob-looking value is pinned as text
	} {
		if !strings.Contains(form.Body, want) {
			t.Errorf("the form lacks %q", want)
		}
	}
	if strings.Contains(form.Body, `id="globmode-1"`) {
		t.Error("a number is offered a glob")
	}
	if !strings.Contains(form.Body, `id="rangemode-1"`) || !strings.Contains(form.Body, `id="min-1" value="420"`) || strings.Contains(form.Body, `id="rangemode-3"`) {
		t.Error("a number is not offered a range starting at its own value, or text is")
	}
	tests := []struct {
		name   string
		form   url.Values
		status int
		scope  string
		check  func(*airlockv1.StandingGrant) bool
	}{
		{"the_defaults_pin_every_value_and_refuse_other_arguments", url.Values{"only_listed": {"1"}}, http.StatusSeeOther,
			`when /content is exactly "line one\nline two" and /mode is exactly 420 and /opts is exactly {"append":true} and /path is exactly "notes/*.txt" and no other argument is given`,
			func(g *airlockv1.StandingGrant) bool {
				return len(g.GetArgumentValues()) == 4 && len(g.GetArgumentGlobs()) == 0 && g.GetOnlyListedArguments() &&
					proto.Equal(g.GetArgumentValues()["/content"], structpb.NewStringValue("line one\nline two")) &&
					proto.Equal(g.GetArgumentValues()["/mode"], structpb.NewNumberValue(420))
			}},
		{"a_reviewer_widens_one_argument_to_a_glob_and_one_to_any_value", url.Values{"only_listed": {"1"}, "mode_0": {"any"}, "mode_3": {"glob"}, "glob_3": {"notes/**"}}, http.StatusSeeOther,
			`when /content may be any value and /mode is exactly 420 and /opts is exactly {"append":true} and /path matches notes/** and no other argument is given`,
			func(g *airlockv1.StandingGrant) bool {
				_, content := g.GetArgumentValues()["/content"]
				return !content && g.GetArgumentGlobs()["/path"] == "notes/**" && len(g.GetArgumentValues()) == 2 &&
					len(g.GetAnyArguments()) == 1 && g.GetAnyArguments()[0] == "/content"
			}},
		{"unticking_lets_other_arguments_vary", url.Values{}, http.StatusSeeOther, "any other argument may take any value",
			func(g *airlockv1.StandingGrant) bool { return !g.GetOnlyListedArguments() }},
		{"a_glob_on_a_number_is_refused_with_a_sentence", url.Values{"mode_1": {"glob"}, "glob_1": {"4*"}}, http.StatusBadRequest, "is not text", nil},
		{"a_reviewer_holds_a_number_within_a_range", url.Values{"only_listed": {"1"}, "mode_1": {"range"}, "min_1": {"400"}, "max_1": {"420.5"}}, http.StatusSeeOther,
			"and /mode is a number from 400 to 420.5 and",
			func(g *airlockv1.StandingGrant) bool {
				_, pinned := g.GetArgumentValues()["/mode"]
				r := g.GetArgumentRanges()["/mode"]
				return !pinned && r.GetMin() == 400 && r.GetMax() == 420.5 && len(g.GetArgumentValues()) == 3
			}},
		{"a_range_on_text_is_refused_with_a_sentence", url.Values{"mode_3": {"range"}, "min_3": {"1"}, "max_3": {"2"}}, http.StatusBadRequest, "is not a number", nil},
		{"a_range_with_an_end_that_is_not_a_number_is_refused", url.Values{"mode_1": {"range"}, "min_1": {"four"}, "max_1": {"500"}}, http.StatusBadRequest, "give the range's two ends as numbers", nil},
		{"a_range_with_an_infinite_end_is_refused", url.Values{"mode_1": {"range"}, "min_1": {"0"}, "max_1": {"Inf"}}, http.StatusBadRequest, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := url.Values{"agent": {"bot"}, "from": {"call_pin"}, "from_revision": {"1"}, "uses": {"5"}, "expires_hours": {"1"}}
			for k, v := range tt.form {
				f[k] = v
			}
			f.Set("_csrf", b.csrf("/"))
			scope := b.post("/grants/scope", f)
			if !strings.Contains(scope.Body, tt.scope) {
				t.Errorf("the scope reads %q, want it to contain %q", scope.Body, tt.scope)
			}
			before := len(e.approval.grants)
			p := b.post("/grants", f)
			if p.Status != tt.status {
				t.Fatalf("status %d, want %d:\n%s", p.Status, tt.status, p.Body)
			}
			if tt.check == nil {
				if len(e.approval.grants) != before {
					t.Fatal("a refused form created a grant")
				}
				return
			}
			var newest *airlockv1.StandingGrant
			for _, g := range e.approval.grants {
				if newest == nil || g.GetId() > newest.GetId() {
					newest = g
				}
			}
			if newest == nil || !tt.check(newest) {
				t.Fatalf("grant %v", newest)
			}
		})
	}
}
