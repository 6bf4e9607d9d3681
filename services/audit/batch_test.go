package audit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/shared/bus"
)

// TestABatchSortsItsRowsLogsWhatDoesNotDecodeAndIsUsedAgain: the fetcher's
// batch builds each message as it comes, gives the rows in sequence order,
// logs why an event does not decode (its row says only that it does not),
// and its buffers serve the next batch once this one is released.
func TestABatchSortsItsRowsLogsWhatDoesNotDecodeAndIsUsedAgain(t *testing.T) {
	ev := &airlockv1.Event{EventId: "e1", AgentId: "bot", CallId: "c1",
		Body: &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: "ex", Attempt: 1}}}
	m, err := bus.Encode(ev, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	good := func(seq uint64) record.Msg {
		return record.Msg{Seq: seq, Time: time.Unix(1_700_000_000, 0), Subject: m.Subject, Header: m.Header, Data: m.Data}
	}
	var logs bytes.Buffer
	bufs := newBatchBufs()
	b := newRowBatch(bufs, 3, slog.New(slog.NewTextHandler(&logs, nil)))
	b.add(good(3))
	b.add(record.Msg{Seq: 2, Time: time.Unix(1_700_000_000, 0), Subject: "airlock.evt.bot.c9.requested", Data: []byte{0xff, 0x01}})
	b.add(good(1))
	rows, release := b.rows()
	var seqs []uint64
	for _, r := range rows {
		seqs = append(seqs, r.Seq)
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Fatalf("rows in order %v, want [1 2 3]", seqs)
	}
	if rows[1].Decision != "undecodable" || rows[0].Type != "started" {
		t.Fatalf("rows %+v", rows)
	}
	if got := logs.String(); !strings.Contains(got, "does not decode") || !strings.Contains(got, "seq=2") || strings.Contains(got, "seq=1") {
		t.Fatalf("log %q: want one warning naming seq 2", got)
	}
	buf := b.buf
	release()
	again := newRowBatch(bufs, 3, slog.New(slog.DiscardHandler))
	if again.buf != buf || len(again.buf.rows) != 0 {
		t.Fatal("the next batch did not get the released buffers back, emptied")
	}
	// Its rows are built into the same places: nothing of the rows before
	// them may remain (a requested event sets fewer columns than those).
	req, err := bus.Encode(&airlockv1.Event{EventId: "e4", AgentId: "bot", CallId: "c2",
		Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{CallId: "c2", AgentId: "bot", Tool: "t"}}}}, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	next := []record.Msg{{Seq: 4, Time: time.Unix(1_700_000_001, 0), Subject: req.Subject, Header: req.Header, Data: req.Data}, good(5)}
	for _, m := range next {
		again.add(m)
	}
	rebuilt, releaseAgain := again.rows()
	defer releaseAgain()
	for i, m := range next {
		if want := record.Build(m); len(record.DifferentColumns(&rebuilt[i], &want)) > 0 {
			t.Fatalf("row %d built into a used place differs in %v", m.Seq, record.DifferentColumns(&rebuilt[i], &want))
		}
	}
}
