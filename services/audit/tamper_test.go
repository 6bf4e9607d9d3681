package audit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/audit/chtest"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
)

// forge seals r as someone who can write ClickHouse but lacks the key would:
// plain SHA-256 over the documented fields.
func forge(r *store.Row, prev string) {
	r.PrevHash = prev
	sum := sha256.Sum256(append([]byte(prev), record.AppendCanonicalFields(nil, r)...))
	r.Hash = hex.EncodeToString(sum[:])
}

// mutate runs an ALTER TABLE mutation and waits until done reports it applied.
func mutate(t *testing.T, st *store.ClickHouse, sql string, done func() bool) {
	t.Helper()
	if err := st.Conn().Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("mutation %q not applied after 20s", sql)
		}
		time.Sleep(20 * time.Millisecond) // polling ClickHouse's background mutation with a deadline
	}
}

func rowAt(t *testing.T, st *store.ClickHouse, seq uint64) store.Row {
	t.Helper()
	rows, err := st.Query(context.Background(), store.Filter{AfterSeq: seq - 1, Limit: 1})
	if err != nil || len(rows) != 1 || rows[0].Seq != seq {
		t.Fatalf("row %d: %v, %v", seq, rows, err)
	}
	return rows[0]
}

func count(t *testing.T, st *store.ClickHouse, f store.Filter) uint64 {
	t.Helper()
	n, err := st.Count(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTamperingWithClickHouseIsFoundAndNeverCostsAnEvent(t *testing.T) {
	ch := chtest.Shared(t)
	cases := []struct {
		name string
		// tamper changes the store after 10 events are written; rows is how
		// many rows the store holds once 10 more events are written.
		tamper func(t *testing.T, st *store.ClickHouse)
		rows   uint64
		want   []string // problems after 10 more events, as kind@seq
		detail string   // a word the first problem's sentence must contain
	}{
		{"a forged approval by alice appended at head+1, then a sink restart", func(t *testing.T, st *store.ClickHouse) {
			head := rowAt(t, st, 10)
			f := head
			f.Seq, f.EventID, f.Type, f.Call, f.Decision, f.ActorType, f.ActorID, f.Reason = 11, "forged-1", "approved", "c-evil", "approve", "human", "alice", "fine"
			forge(&f, head.Hash)
			if err := st.Insert(context.Background(), []store.Row{f}); err != nil {
				t.Fatal(err)
			}
		}, 21, []string{"altered@11"}, "call_id"},
		{"a row at seq 1000000000, then a sink restart", func(t *testing.T, st *store.ClickHouse) {
			f := rowAt(t, st, 10)
			f.Seq, f.EventID = 1_000_000_000, "far-future"
			forge(&f, f.Hash)
			if err := st.Insert(context.Background(), []store.Row{f}); err != nil {
				t.Fatal(err)
			}
		}, 21, []string{"future@1000000000"}, "planted"},
		{"a reason rewritten with ALTER TABLE UPDATE", func(t *testing.T, st *store.ClickHouse) {
			mutate(t, st, "ALTER TABLE events UPDATE reason = 'nothing to see' WHERE seq = 4", func() bool { return rowAt(t, st, 4).Reason == "nothing to see" })
		}, 20, []string{"altered@4"}, "reason"},
		{"a row deleted with ALTER TABLE DELETE", func(t *testing.T, st *store.ClickHouse) {
			mutate(t, st, "ALTER TABLE events DELETE WHERE seq = 5", func() bool { return count(t, st, store.Filter{}) == 9 })
		}, 19, []string{"missing@5", "link@6"}, "not in the audit store"},
		{"two rows reordered (their sequences swapped)", func(t *testing.T, st *store.ClickHouse) {
			a, b := rowAt(t, st, 2), rowAt(t, st, 3)
			a.Seq, b.Seq = 3, 2
			mutate(t, st, "ALTER TABLE events DELETE WHERE seq IN (2, 3)", func() bool { return count(t, st, store.Filter{}) == 8 })
			if err := st.Insert(context.Background(), []store.Row{b, a}); err != nil {
				t.Fatal(err)
			}
		}, 20, []string{"altered@2", "altered@3", "link@4"}, "altered"},
		{"the newest rows deleted (the tail truncated) are written again from the stream", func(t *testing.T, st *store.ClickHouse) {
			mutate(t, st, "ALTER TABLE events DELETE WHERE seq > 8", func() bool { return count(t, st, store.Filter{}) == 8 })
		}, 20, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, ch)
			stop := e.sink(e.dsn)
			st := e.open(e.dsn)
			e.publish(simpleEvents(t, "a", 10)...)
			waitRows(t, st, 10, 15*time.Second)
			stop()
			c.tamper(t, st)

			e.sink(e.dsn) // a restart: it reads the head again
			e.publish(simpleEvents(t, "b", 10)...)
			waitRows(t, st, c.rows, 20*time.Second)
			for seq := uint64(11); seq <= 20; seq++ {
				if r := rowAt(t, st, seq); !strings.HasPrefix(r.Call, "b-") && r.Call != "c-evil" {
					t.Fatalf("row %d is %+v: the sink lost an event after the tampering", seq, r)
				}
			}
			rep := e.verify(st)
			var got []string
			for _, p := range rep.Problems {
				got = append(got, fmt.Sprintf("%s@%d", p.Kind, p.Seq))
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Fatalf("verify found %v, want %v:\n%+v", got, c.want, rep.Problems)
			}
			if len(c.want) > 0 && !strings.Contains(rep.Problems[0].Detail, c.detail) {
				t.Errorf("problem %q does not say %q", rep.Problems[0].Detail, c.detail)
			}
		})
	}
}
