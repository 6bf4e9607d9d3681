package slack_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// TestTheCardWarnsOfLookAlikeLetters: a host pаypal.com with a Cyrillic а
// reads as paypal.com on a card; the card posted to Slack says so beside
// the call's fields, the agent's words in code, and quotes no value the
// policy redacts. A card with an ordinary Cyrillic sentence says nothing.
func TestTheCardWarnsOfLookAlikeLetters(t *testing.T) {
	t.Parallel()
	notifier, f := newNotifier(t)
	ctx := context.Background()

	spoof := pendingRecord(t, "call_spoof")
	args, err := structpb.NewStruct(map[string]any{"url": "https://pаypal.com/login", "password": "huntеr2"})
	if err != nil {
		t.Fatal(err)
	}
	spoof.Call.Arguments = args
	if _, err := notifier.Announce(ctx, spoof); err != nil {
		t.Fatal(err)
	}
	text := cardStrings(t, f.next(t, "chat.postMessage").Blocks())
	want := ":warning: Look-alike letters: the address `https://pаypal.com/login` mixes Latin and Cyrillic letters: `а` (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its host is `xn--pypal-4ve.com`"
	if !strings.Contains(text, want+"\n") && !strings.HasSuffix(text, want) {
		t.Errorf("the card lacks %q:\n%s", want, text)
	}
	if strings.Contains(text, "huntеr2") {
		t.Errorf("a warning quotes the value the policy redacts:\n%s", text)
	}

	plain := pendingRecord(t, "call_plain")
	plain.Call.Reason = "Привет, мир: обновить отчёт.pdf"
	if _, err := notifier.Announce(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if text := cardStrings(t, f.next(t, "chat.postMessage").Blocks()); strings.Contains(text, "Look-alike") {
		t.Errorf("the card warns of a call with no look-alike letters:\n%s", text)
	}
}
