package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// storedEvent is one message of the events stream.
type storedEvent struct {
	Seq         uint64
	Time        time.Time
	Type        string
	Agent, Call string
	Rev         uint32
	EventID     string
	Ev          *airlockv1.Event // nil when it does not decode
}

// verifyResult is what `airlock audit verify` said.
type verifyResult struct {
	OK     bool   `json:"ok"`
	Output string `json:"output"`
}

// observed is everything the checks read once the load is over.
type observed struct {
	Events     []storedEvent
	CH         map[uint64]string // seq → event id, every row of ClickHouse
	CollectErr string
	Approvals  []*airlockv1.ApprovalRecord
	Execs      []execution
	BadSigs    int64
	Calls      []callRecord
	Faults     []faultResult
	Verify     verifyResult
	// CHTwice: sequences ClickHouse returned more than once.
	CHTwice []string
	// Replicas: what each ClickHouse replica holds on its own, when there
	// are several (the sink's view above is whichever answers first).
	Replicas []replicaView
	// PermissionViolations: process → log lines in which NATS refused it something.
	PermissionViolations map[string][]string
	// StaleReplies: process → replies NATS refused after the process
	// reconnected (splitViolations).
	StaleReplies map[string][]string
	// MCP: the tools/calls MCP clients made through the gateway replicas;
	// MCPSessions: the sessions they started.
	MCP         []mcpRecord
	MCPSessions int
	// MCPReviewErrs: approvals of the MCP clients' asked calls that failed.
	MCPReviewErrs []string
}

// replicaView is one ClickHouse replica's rows and its audit verify.
type replicaView struct {
	Name   string
	CH     map[uint64]string
	Twice  []string
	Verify verifyResult
}

// settle waits until the trail is complete: every started call ended and
// ClickHouse holds the whole stream (or the deadline passes; the checks then
// report what is missing). It says what it waited for last.
func (l *layout) settle(ctx context.Context, within time.Duration) string {
	deadline := time.Now().Add(within)
	status := "not checked"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var evs []storedEvent
		if err := l.readStreamOnce(ctx, func(e storedEvent) { evs = append(evs, e) }); err != nil {
			status = "the events stream could not be read: " + err.Error()
		} else if open := openExecutions(evs); open > 0 {
			status = fmt.Sprintf("%d started calls have not ended", open)
		} else {
			last := uint64(0)
			if len(evs) > 0 {
				last = evs[len(evs)-1].Seq
			}
			status = l.chBehind(ctx, last)
			if status == "" {
				return "settled"
			}
		}
		time.Sleep(time.Second)
	}
	return "not settled: " + status
}

// chBehind says which ClickHouse (each replica, when there are several)
// does not yet hold events up to last; "" when all do.
func (l *layout) chBehind(ctx context.Context, last uint64) string {
	dsns := []string{l.dsn}
	if len(l.chs) > 1 {
		dsns = dsns[:0]
		for i := range l.chs {
			dsns = append(dsns, l.replicaDSN(i))
		}
	}
	for i, dsn := range dsns {
		name := "ClickHouse"
		if len(dsns) > 1 {
			name = fmt.Sprintf("ClickHouse replica r%d", i+1)
		}
		head, err := chHead(ctx, dsn)
		switch {
		case err != nil:
			return name + " could not be read: " + err.Error()
		case head < last:
			return fmt.Sprintf("%s holds events up to seq %d of %d", name, head, last)
		}
	}
	return ""
}

// awaitClickHouse waits until ClickHouse (each replica) holds events up to
// last, or within passes.
func (l *layout) awaitClickHouse(ctx context.Context, last uint64, within time.Duration) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline) && ctx.Err() == nil; {
		if l.chBehind(ctx, last) == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// openExecutions counts call revisions started but not ended.
func openExecutions(evs []storedEvent) int {
	open := map[string]bool{}
	for _, e := range evs {
		k := revKey(e.Agent, e.Call, e.Rev)
		switch e.Type {
		case subject.Started:
			open[k] = true
		case subject.Completed, subject.Failed:
			delete(open, k)
		}
	}
	return len(open)
}

func revKey(agent, call string, rev uint32) string { return fmt.Sprintf("%s/%s/%d", agent, call, rev) }

// retry calls f until it succeeds or within passes (a read right after a
// fault may find a stream without a leader for a few seconds).
func retry(ctx context.Context, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// readStream reads every event of the events stream as the operator.
func (l *layout) readStream(ctx context.Context) ([]storedEvent, error) {
	var out []storedEvent
	err := retry(ctx, 30*time.Second, func() error {
		out = nil
		return l.readStreamOnce(ctx, func(e storedEvent) { out = append(out, e) })
	})
	return out, err
}

func (l *layout) readStreamOnce(ctx context.Context, add func(storedEvent)) error {
	return store.ReadRange(ctx, l.js, l.cfg.Stream.Name, 1, 0, func(m record.Msg) error {
		e := storedEvent{Seq: m.Seq, Time: m.Time}
		if p, err := subject.Parse(m.Subject); err == nil {
			e.Agent, e.Call, e.Type = p.Agent, p.Call, p.Type
		}
		if ev, err := envelope.Decode(m.Data, m.Header); err == nil {
			e.Ev, e.EventID, e.Rev = ev, ev.GetEventId(), ev.GetRevision()
		}
		add(e)
		return nil
	})
}

// readClickHouse reads the sequence and event id of every audit row at
// dsn, and the sequences it returned more than once.
func readClickHouse(ctx context.Context, dsn string) (map[uint64]string, []string, error) {
	var out map[uint64]string
	var twice []string
	err := retry(ctx, 30*time.Second, func() error {
		c, err := store.Open(ctx, dsn)
		if err != nil {
			return err
		}
		defer c.Close()
		out, twice = map[uint64]string{}, nil
		return c.Each(ctx, store.Filter{}, func(r store.Row) error {
			if prev, ok := out[r.Seq]; ok {
				twice = append(twice, fmt.Sprintf("seq %d (%s and %s)", r.Seq, prev, r.EventID))
			}
			out[r.Seq] = r.EventID
			return nil
		})
	})
	return out, twice, err
}

// readApprovals reads every approval record's latest value.
func (l *layout) readApprovals(ctx context.Context) ([]*airlockv1.ApprovalRecord, error) {
	var out []*airlockv1.ApprovalRecord
	err := retry(ctx, 30*time.Second, func() error {
		var err error
		out, err = l.readApprovalsOnce(ctx)
		return err
	})
	return out, err
}

func (l *layout) readApprovalsOnce(ctx context.Context) ([]*airlockv1.ApprovalRecord, error) {
	kv, err := l.js.KeyValue(ctx, l.cfg.Buckets.Approvals)
	if err != nil {
		return nil, fmt.Errorf("approvals bucket: %w", err)
	}
	keys, err := bus.Keys(ctx, kv, ">")
	if err != nil {
		return nil, fmt.Errorf("approvals bucket: %w", err)
	}
	var out []*airlockv1.ApprovalRecord
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("approval %s: %w", k, err)
		}
		rec := &airlockv1.ApprovalRecord{}
		if err := proto.Unmarshal(e.Value(), rec); err != nil {
			return nil, fmt.Errorf("approval %s: %w", k, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// auditVerify runs `airlock audit verify` as the operator against the run's
// ClickHouse with the audit key, the way an auditor checks the trail. Kept
// behind this one function: what verify compares (the keyed chain,
// ClickHouse against the stream) is the audit command's business; it exits
// 1 naming each problem it finds.
func (l *layout) auditVerify(ctx context.Context, dsn string) verifyResult {
	cmd := exec.CommandContext(ctx, l.bin, "audit", "verify")
	cmd.Env = childEnv("AIRLOCK_CONFIG="+l.configFile(), "AIRLOCK_NATS_URL="+l.urls, "AIRLOCK_CLICKHOUSE_DSN="+dsn,
		"AIRLOCK_NATS_NKEY_SEED_FILE="+filepath.Join(l.keysDir, SeedFile(natsauth.RoleAdmin)),
		"AIRLOCK_AUDIT_KEY_FILE="+filepath.Join(l.keysDir, AuditKeyFile))
	out, err := cmd.CombinedOutput()
	return verifyResult{OK: err == nil, Output: strings.TrimSpace(string(out))}
}

// permissionViolations finds, in every process's log, what NATS refused it.
// A reply refused after the process reconnected is kept apart (stale): see
// splitViolations.
func (l *layout) permissionViolations() (violations, stale map[string][]string) {
	violations, stale = map[string][]string{}, map[string][]string{}
	for _, rs := range l.replicas {
		for _, p := range rs {
			v, s := splitViolations(p.logText())
			if len(v) > 0 {
				violations[p.name] = v
			}
			if len(s) > 0 {
				stale[p.name] = s
			}
		}
	}
	return violations, stale
}

// splitViolations sorts the Permissions Violation lines of one process's
// log (all its starts). A reply to an inbox refused after the process
// reconnected is stale, not a permission it lacks: NATS grants a responder
// its reply (allow_responses) on the connection the request came over, so a
// request that was delivered before the connection was lost and answered
// after the reconnect is refused by the new server; its caller has timed
// out and asks again. Every other refusal is a violation.
func splitViolations(log string) (violations, stale []string) {
	reconnected := false
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.HasPrefix(line, "=== "): // a new start: nothing is pending from before
			reconnected = false
		case strings.Contains(line, `msg="reconnected to NATS"`):
			reconnected = true
		case !strings.Contains(line, "Permissions Violation"):
		case reconnected && strings.Contains(line, "for Publish to") && strings.Contains(line, `"_INBOX.`):
			stale = append(stale, line)
		default:
			violations = append(violations, line)
		}
	}
	return violations, stale
}

// collect reads everything the checks need.
func (l *layout) collect(ctx context.Context, d *driver, faults []faultResult) observed {
	o := observed{Faults: faults, Calls: d.snapshot(), Execs: l.tools.executions(), BadSigs: l.tools.badSigs.Load()}
	o.MCP, o.MCPSessions, o.MCPReviewErrs = d.mcp.snapshot()
	o.PermissionViolations, o.StaleReplies = l.permissionViolations()
	var err error
	if o.Events, err = l.readStream(ctx); err != nil {
		o.CollectErr = "reading the events stream: " + err.Error()
	}
	// An event stored after settle looked (a late notification) is given the
	// same time to reach ClickHouse before it is read; if it never does, the
	// check says so.
	if n := len(o.Events); n > 0 {
		l.awaitClickHouse(ctx, o.Events[n-1].Seq, d.p.settleWithin)
	}
	if o.CH, o.CHTwice, err = readClickHouse(ctx, l.dsn); err != nil {
		o.CollectErr = strings.TrimPrefix(o.CollectErr+"; ", "; ") + "reading ClickHouse: " + err.Error()
	}
	for i := range l.chs {
		if len(l.chs) < 2 {
			break
		}
		v := replicaView{Name: fmt.Sprintf("ClickHouse replica r%d", i+1)}
		if v.CH, v.Twice, err = readClickHouse(ctx, l.replicaDSN(i)); err != nil {
			o.CollectErr = strings.TrimPrefix(o.CollectErr+"; ", "; ") + "reading " + v.Name + ": " + err.Error()
		}
		v.Verify = l.auditVerify(ctx, l.replicaDSN(i))
		o.Replicas = append(o.Replicas, v)
	}
	if o.Approvals, err = l.readApprovals(ctx); err != nil {
		o.CollectErr = strings.TrimPrefix(o.CollectErr+"; ", "; ") + err.Error()
	}
	o.Verify = l.auditVerify(ctx, l.dsn)
	return o
}

// writeJSON writes v as indented JSON (the machine-readable report).
func marshalJSON(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "  ")
	return append(b, '\n')
}
