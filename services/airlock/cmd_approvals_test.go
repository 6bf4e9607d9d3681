package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// TestApprovalsShowLabelsTheAgentsReasonAsItsWords: the agent's stated
// reason sits one line below the policy's; labelled plain "reason" it read
// as the policy's (every other surface says "Agent's reason").
func TestApprovalsShowLabelsTheAgentsReasonAsItsWords(t *testing.T) {
	r := &airlockv1.ApprovalRecord{
		Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Tool: "demo__write_file", Reason: "the user asked for the file"},
		Decision: &airlockv1.Decision{Reason: "writes need a person", RuleId: "ask-writes"},
	}
	var out strings.Builder
	printRecord(&out, r)
	for _, want := range []string{"\npolicy    writes need a person (rule ask-writes)\n", "\nagent's reason the user asked for the file\n"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("approvals show lacks %q:\n%s", want, out.String())
		}
	}
}

// approvals show says where a relative path in the arguments takes effect:
// the working directory the agent chose, escaped on one line.
func TestApprovalsShowShowsTheAgentsWorkingDirectory(t *testing.T) {
	r := &airlockv1.ApprovalRecord{
		Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Tool: "fs__delete_file", Cwd: "/srv/\u202eapp\nstate     approved"},
		Decision: &airlockv1.Decision{Reason: "deletes need a person"},
	}
	var out strings.Builder
	printRecord(&out, r)
	if want := "\ncwd       /srv/\\u202eapp\\nstate     approved\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("approvals show lacks %q:\n%s", want, out.String())
	}
}

// approvals show and list warn of a name that passes for a Latin one it is
// not: the tool gіthub__push (a Cyrillic і) and the host pаypal.com (a
// Cyrillic а) read as Latin on a terminal; a Cyrillic sentence does not.
func TestApprovalsShowAndListWarnOfLookAlikeLetters(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{"url": "https://pаypal.com/x", "note": "Привет, мир"})
	if err != nil {
		t.Fatal(err)
	}
	r := &airlockv1.ApprovalRecord{
		Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Server: "gіthub", Tool: "push", Arguments: args},
		Decision: &airlockv1.Decision{Reason: "pushes need a person"},
	}
	tool := "Look-alike letters: the name gіthub__push mixes Latin and Cyrillic letters: і (U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I) looks like i"
	host := "Look-alike letters: the address https://pаypal.com/x mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is xn--pypal-4ve.com"

	var show strings.Builder
	printRecord(&show, r)
	for _, want := range []string{"\n(!)       " + tool + "\n", "\n(!)       " + host + "\n"} {
		if !strings.Contains(show.String(), want) {
			t.Errorf("approvals show lacks %q:\n%s", want, show.String())
		}
	}

	b, err := protojson.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var list strings.Builder
	printList(&list, listReply{Records: []json.RawMessage{b}}, time.Now())
	for _, want := range []string{"bot/c1 (!)", "\n(!) bot/c1: " + tool + "\n", "\n(!) bot/c1: " + host + "\n"} {
		if !strings.Contains(list.String(), want) {
			t.Errorf("approvals list lacks %q:\n%s", want, list.String())
		}
	}

	r.Call.Server, r.Call.Arguments = "github", nil
	show.Reset()
	printRecord(&show, r)
	if strings.Contains(show.String(), "Look-alike") {
		t.Errorf("approvals show warns of a call with no look-alike letters:\n%s", show.String())
	}
}

// approvals show warns of every class of look-alike an agent may use to
// pass a name off as a Latin one: a host with no Latin letter at all, digits
// of another script, styled letters, a μ that is no unit, an ASCII address
// whose user name or subdomain reads as another domain. Each warning names
// the character, its code point and name, what it passes for, and a host's
// ASCII form, or the host or domain an address really leads to.
func TestApprovalsShowWarnsOfEachClassOfLookAlike(t *testing.T) {
	for _, tt := range []struct{ name, arg, want string }{
		{"a_host_wholly_of_look_alike_letters", "https://аррӏе.со",
			"Look-alike letters: the address https://аррӏе.со mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; р (U+0440 CYRILLIC SMALL LETTER ER) looks like p; ӏ (U+04CF CYRILLIC SMALL LETTER PALOCHKA) looks like l; and 3 more; in ASCII its host is xn--80ak6aa92e.xn--n1af"},
		{"a_bare_host_wholly_of_look_alike_letters", "аррӏе.со",
			"Look-alike letters: the host аррӏе.со is written in Cyrillic letters that pass for Latin: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; р (U+0440 CYRILLIC SMALL LETTER ER) looks like p; ӏ (U+04CF CYRILLIC SMALL LETTER PALOCHKA) looks like l; and 3 more; in ASCII its host is xn--80ak6aa92e.xn--n1af"},
		{"malayalam_zeros", "g൦൦gle.com",
			"Look-alike letters: the host g൦൦gle.com mixes Latin letters and Malayalam digits: ൦ (U+0D66 MALAYALAM DIGIT ZERO) looks like o; in ASCII its host is xn--ggle-0qna.com"},
		{"mathematical_bold_letters", "𝐩𝐚𝐲𝐩𝐚𝐥.com",
			"Look-alike letters: the host 𝐩𝐚𝐲𝐩𝐚𝐥.com mixes Latin letters and styled letters: 𝐩 (U+1D429 MATHEMATICAL BOLD SMALL P), a styled letter, passes for p; 𝐚 (U+1D41A MATHEMATICAL BOLD SMALL A), a styled letter, passes for a; 𝐲 (U+1D432 MATHEMATICAL BOLD SMALL Y), a styled letter, passes for y; and 1 more; in ASCII its host is paypal.com"},
		{"a_division_slash", "https://paypal.com\u2215login.evil.com/x",
			"Look-alike letters: the address https://paypal.com\u2215login.evil.com/x mixes Latin letters and punctuation that is not ASCII: \u2215 (U+2215 DIVISION SLASH) looks like /; in ASCII its host is paypal.xn--comlogin-0f7d.evil.com"},
		{"a_domain_before_the_at", "https://paypal.com@evil.example/login",
			"Leads elsewhere: the address https://paypal.com@evil.example/login leads to the host evil.example: paypal.com before the @ is a user name"},
		{"a_domain_in_front_of_the_hosts", "https://accounts.google.com.evil.example/",
			"Leads elsewhere: the address https://accounts.google.com.evil.example/ leads to the domain evil.example, not google.com"},
		{"a_mu_that_is_no_unit", "10μicrosoft",
			"Look-alike letters: the name 10μicrosoft mixes Latin and Greek letters: μ (U+03BC GREEK SMALL LETTER MU), a Greek letter, is no unit here"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args, err := structpb.NewStruct(map[string]any{"url": tt.arg})
			if err != nil {
				t.Fatal(err)
			}
			r := &airlockv1.ApprovalRecord{
				Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Server: "web", Tool: "fetch", Arguments: args},
				Decision: &airlockv1.Decision{Reason: "fetches need a person"},
			}
			var show strings.Builder
			printRecord(&show, r)
			if want := "\n(!)       " + tt.want + "\n"; !strings.Contains(show.String(), want) {
				t.Errorf("approvals show lacks %q:\n%s", want, show.String())
			}
		})
	}
}
