package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// DropPlan is what dropping the months before Before would remove, and
// where the chain then starts.
type DropPlan struct {
	Before     time.Time // first day of the first month kept (UTC)
	Partitions []string  // YYYYMM partitions to drop, oldest first
	Rows       uint64    // distinct rows they hold
	LastDrop   uint64    // highest sequence dropped
	FirstKept  uint64    // lowest sequence kept
	Anchor     string    // prev_hash of the first kept row: the hash of the last dropped row
}

// PlanDrop works out DropPlan for dropping every whole month before
// before's month. It refuses a plan that would leave no row (the chain
// would have nothing to continue from) or whose months interleave in
// sequence with the kept ones (a clock that went backwards): the chain
// could then not be verified from the first kept row.
func (c *ClickHouse) PlanDrop(ctx context.Context, before time.Time) (DropPlan, error) {
	before = time.Date(before.Year(), before.Month(), 1, 0, 0, 0, 0, time.UTC)
	month := uint32(before.Year()*100 + int(before.Month()))
	p := DropPlan{Before: before}
	rows, err := c.conn.Query(ctx, "SELECT DISTINCT toString(toYYYYMM(ts)) AS m FROM events WHERE toYYYYMM(ts) < ? ORDER BY m", month)
	if err != nil {
		return p, fmt.Errorf("list audit partitions: %w", err)
	}
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return p, fmt.Errorf("list audit partitions: %w", err)
		}
		p.Partitions = append(p.Partitions, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return p, fmt.Errorf("list audit partitions: %w", err)
	}
	if len(p.Partitions) == 0 {
		return p, nil
	}
	if err := c.conn.QueryRow(ctx, "SELECT count(), max(seq) FROM events FINAL WHERE toYYYYMM(ts) < ?", month).Scan(&p.Rows, &p.LastDrop); err != nil {
		return p, fmt.Errorf("count the rows to drop: %w", err)
	}
	var kept uint64
	if err := c.conn.QueryRow(ctx, "SELECT count(), min(seq) FROM events FINAL WHERE toYYYYMM(ts) >= ?", month).Scan(&kept, &p.FirstKept); err != nil {
		return p, fmt.Errorf("find the first kept row: %w", err)
	}
	if kept == 0 {
		return p, fmt.Errorf("dropping everything before %s would remove every row of the audit trail: keep at least the current month", before.Format("2006-01"))
	}
	if p.LastDrop > p.FirstKept {
		return p, fmt.Errorf("rows of the months before %s (up to seq %d) interleave with kept rows (from seq %d): choose an earlier month", before.Format("2006-01"), p.LastDrop, p.FirstKept)
	}
	first, err := c.Query(ctx, Filter{AfterSeq: p.FirstKept - 1, Limit: 1})
	if err != nil {
		return p, err
	}
	if len(first) != 1 {
		return p, fmt.Errorf("the first kept row (seq %d) could not be read", p.FirstKept)
	}
	p.Anchor = first[0].PrevHash
	return p, nil
}

// Drop drops the plan's partitions. Record the plan (an audit_pruned event)
// first: verify accepts the first kept row as the chain's start only when
// such a record vouches for it.
func (c *ClickHouse) Drop(ctx context.Context, p DropPlan) error {
	for _, part := range p.Partitions {
		if _, err := strconv.Atoi(part); err != nil {
			return fmt.Errorf("partition %q is not YYYYMM", part)
		}
		if err := c.conn.Exec(ctx, "ALTER TABLE events DROP PARTITION "+part); err != nil {
			return fmt.Errorf("drop audit partition %s: %w (the rows before it may already be gone; run drop-before again)", part, err)
		}
	}
	return nil
}
