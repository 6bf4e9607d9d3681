package lastevents

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/envelope"
)

func stored(subj string, seq uint64, json bool, data string) *nats.Msg {
	m := &nats.Msg{Data: []byte(data), Header: nats.Header{}}
	m.Header.Set(jetstream.SubjectHeader, subj)
	m.Header.Set(jetstream.SequenceHeader, strconv.FormatUint(seq, 10))
	if json {
		m.Header.Set(envelope.HeaderContentType, envelope.ContentJSON)
	}
	return m
}

// A reply carries the events found in the order asked, each readable as
// Direct Get answered it (subject, sequence, encoding, body with line
// feeds in it); what does not fit is named for the next request, and an
// event no reply can carry is refused with a sentence.
func TestAReplyCarriesWhatFitsAndNamesTheRest(t *testing.T) {
	types := []string{"requested", "denied", "completed"}
	found := []*nats.Msg{
		stored("airlock.evt.bot.c1.requested", 7, true, "{\"requested\":\n{}}"),
		nil,
		stored("airlock.evt.bot.c1.exec.completed", 9, false, strings.Repeat("\n\x00x", 100)),
	}
	body, unread, err := Encode(types, found, 1<<20)
	if err != nil || len(unread) != 0 {
		t.Fatalf("Encode: %v, unread %v", err, unread)
	}
	got, err := Decode(body)
	if err != nil || len(got) != 2 {
		t.Fatalf("Decode: %d messages, %v", len(got), err)
	}
	for i, want := range []*nats.Msg{found[0], found[2]} {
		m := got[i]
		if m.Header.Get(jetstream.SubjectHeader) != want.Header.Get(jetstream.SubjectHeader) || m.Header.Get(jetstream.SequenceHeader) != want.Header.Get(jetstream.SequenceHeader) ||
			envelope.IsJSON(m.Header) != envelope.IsJSON(want.Header) || !bytes.Equal(m.Data, want.Data) {
			t.Fatalf("message %d read back as %v %q; want %v %q", i, m.Header, m.Data, want.Header, want.Data)
		}
	}

	first := len(frameHead(found[0])) + len(found[0].Data) + 1
	body, unread, err = Encode(types, found, first)
	if err != nil || strings.Join(unread, ",") != "completed" {
		t.Fatalf("a reply with room for one event: unread %v, %v; want completed left for the next request", unread, err)
	}
	if got, _ := Decode(body); len(got) != 1 {
		t.Fatalf("a reply with room for one event carried %d", len(got))
	}
	if _, _, err := Encode(types, found, first-1); err == nil || !strings.Contains(err.Error(), "more than a reply carries") {
		t.Fatalf("an event no reply can carry: %v; want a refusal saying so", err)
	}
	for _, bad := range []string{"airlock.evt.bot.c1.requested 1 json 5\nabc", "airlock.evt.bot.c1.requested 1 yaml 1\na\n", "no line feed"} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Fatalf("Decode(%q) read it; want it refused", bad)
		}
	}
}
