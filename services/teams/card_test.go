package teams_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/escape/escapetest"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

// texts walks a card and returns every string it shows, by element type:
// TextRun text, TextBlock text, and the titles of actions and facts.
func texts(t *testing.T, card airlockteams.Card) map[string][]string {
	t.Helper()
	raw, err := json.Marshal(card)
	must(t, err)
	var v any
	must(t, json.Unmarshal(raw, &v))
	out := map[string][]string{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			typ, _ := x["type"].(string)
			for _, k := range []string{"text", "title", "value", "label"} {
				if s, ok := x[k].(string); ok {
					out[typ+"."+k] = append(out[typ+"."+k], s)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// TestAgentTextIsShownInertlyOnTheCard puts every hostile string where an
// agent chooses text (tool, reason, thread, argument names and values) and
// checks that it lands only in TextRuns (which Adaptive Cards draw without
// markdown) with nothing hidden, and that the card has no markdown-drawing
// TextBlock or FactSet at all.
func TestAgentTextIsShownInertlyOnTheCard(t *testing.T) {
	for _, h := range escapetest.Corpus {
		t.Run(h.Name, func(t *testing.T) {
			rec := pendingRecord(t, "call_hostile")
			rec.Call.Tool = h.Text
			rec.Call.Reason = h.Text
			rec.Call.Arguments = &structpb.Struct{Fields: map[string]*structpb.Value{
				"content": structpb.NewStringValue(h.Text), h.Text: structpb.NewStringValue("x"),
			}}
			for _, state := range []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING, airlockv1.ApprovalState_APPROVAL_STATE_REJECTED} {
				rec.State = state
				rec.DecidedBy = &airlockv1.Actor{Id: "alice", Channel: "teams"}
				rec.Reason = h.Text
				shown := texts(t, airlockteams.Render(rec, publicURL))
				for kind, list := range shown {
					switch kind {
					case "TextRun.text":
						for _, s := range list {
							if found := escapetest.Raw(s); len(found) > 0 {
								t.Errorf("a TextRun shows %v: %q", found, s)
							}
						}
					case "Action.Submit.title", "Action.ShowCard.title", "Action.OpenUrl.title", "Input.Text.label", "Input.Text.errorMessage":
						// the card's own words
					default:
						t.Errorf("the card draws %s, where markdown or hidden text could show: %q", kind, list)
					}
				}
			}
		})
	}
}

func TestMarkdownInArgumentsStaysLiteral(t *testing.T) {
	card := airlockteams.Render(pendingRecord(t, "call_md"), publicURL)
	runs := strings.Join(texts(t, card)["TextRun.text"], "\n")
	for _, want := range []string{`"**bold** [click](https://evil.example) \u202eevil"`, "update config _now_ <at>everyone</at>"} {
		if !strings.Contains(runs, want) {
			t.Errorf("the card does not show %q as written; runs:\n%s", want, runs)
		}
	}
}

// The card says beside the call's fields that a name passes for a Latin one
// it is not (the host pаypal.com with a Cyrillic а), in a TextRun; an
// ordinary Cyrillic reason adds nothing.
func TestTheCardWarnsOfLookAlikeLetters(t *testing.T) {
	rec := pendingRecord(t, "call_spoof")
	args, err := structpb.NewStruct(map[string]any{"url": "https://pаypal.com/login"})
	must(t, err)
	rec.Call.Arguments = args
	want := "⚠ Look-alike letters: the address https://pаypal.com/login mixes Latin and Cyrillic letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is xn--pypal-4ve.com"
	if runs := texts(t, airlockteams.Render(rec, publicURL))["TextRun.text"]; !slices.Contains(runs, want) {
		t.Errorf("the card's TextRuns lack %q:\n%q", want, runs)
	}
	plain := pendingRecord(t, "call_plain")
	plain.Call.Reason = "Привет, мир"
	for _, run := range texts(t, airlockteams.Render(plain, publicURL))["TextRun.text"] {
		if strings.Contains(run, "Look-alike") {
			t.Errorf("the card warns of a call with no look-alike letters: %q", run)
		}
	}
}
