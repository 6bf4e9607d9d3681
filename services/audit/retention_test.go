package audit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/chtest"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/bus"
)

// monthRows are sealed rows stored in the given months, one after another.
func monthRows(t *testing.T, key *record.Key, months ...time.Month) []store.Row {
	t.Helper()
	var rows []store.Row
	for i, m := range months {
		rows = append(rows, store.Row{Seq: uint64(i + 1), EventID: fmt.Sprintf("e%d", i+1), Type: "approved", Agent: "bot", Call: fmt.Sprintf("c%d", i),
			ActorType: "human", ActorID: "alice", Decision: "approve", Time: time.Date(2025, m, 10+i, 0, 0, 0, 0, time.UTC)})
	}
	key.Sealer().Chain(rows, record.GenesisHash)
	return rows
}

func TestDroppingOldMonthsIsRecordedAndTheChainVerifiesFromTheFirstKeptRow(t *testing.T) {
	ch := chtest.Shared(t)
	ctx := context.Background()
	key, _, err := record.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenWriter(ctx, ch.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows := monthRows(t, key, time.January, time.January, time.February, time.March, time.March)
	if err := st.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	plan, err := st.PlanDrop(ctx, time.Date(2025, time.March, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(plan.Partitions, ",") != "202501,202502" || plan.Rows != 3 || plan.FirstKept != 4 || plan.LastDrop != 3 || plan.Anchor != rows[2].Hash {
		t.Fatalf("plan %+v", plan)
	}
	// What `airlock audit drop-before` publishes first, as the sink would store it.
	ev := &airlockv1.Event{EventId: "_audit.pruned.202503.4", AgentId: "_system", CallId: "_audit", Time: nil,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "olga", Channel: "cli"},
		Body: &airlockv1.Event_AuditPruned{AuditPruned: &airlockv1.AuditPruned{Partitions: plan.Partitions, Rows: plan.Rows,
			FirstKeptSeq: plan.FirstKept, AnchorHash: plan.Anchor, LastDroppedSeq: plan.LastDrop, Before: "2025-03"}}}
	msg, err := bus.Encode(ev, "airlock/cli", "")
	if err != nil {
		t.Fatal(err)
	}
	pruned := record.Build(record.Msg{Seq: 6, Time: time.Date(2025, time.March, 20, 0, 0, 0, 0, time.UTC), Subject: msg.Subject, Header: msg.Header, Data: msg.Data})
	key.Sealer().Seal(&pruned, rows[4].Hash)
	if err := st.Insert(ctx, []store.Row{pruned}); err != nil {
		t.Fatal(err)
	}
	if pruned.DecidedBy != "human:olga" || !strings.Contains(pruned.Reason, "202501,202502") {
		t.Errorf("audit_pruned row %+v does not say who dropped what", pruned)
	}
	if err := st.Drop(ctx, plan); err != nil {
		t.Fatal(err)
	}
	rep, err := st.Verify(ctx, store.VerifyOptions{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Count != 3 || rep.FirstSeq != 4 || rep.PrunedBefore != 4 {
		t.Fatalf("verify after the drop: %+v", rep)
	}

	t.Run("a drop that would leave nothing is refused", func(t *testing.T) {
		if _, err := st.PlanDrop(ctx, time.Date(2025, time.December, 1, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "every row") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("months that interleave in sequence with kept ones are refused", func(t *testing.T) {
		other, err := store.OpenWriter(ctx, ch.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if err := other.Insert(ctx, monthRows(t, key, time.May, time.April)); err != nil {
			t.Fatal(err)
		}
		if _, err := other.PlanDrop(ctx, time.Date(2025, time.May, 1, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "interleave") {
			t.Fatalf("err %v", err)
		}
	})
}
