package approval

import (
	"bytes"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// entry is one record as the index holds it: the fields lists filter,
// order and count by, and the record as lists carry it (calls.Abridged),
// protobuf-encoded, decoded only when a page or the sweeper hands it out.
// A decoded record is some forty objects for the collector to walk at
// every cycle; the bytes are one it never looks into — with 100,000
// pending calls the index was half the process's heap, and the collector
// walked it every few seconds.
type entry struct {
	// data is the abridged record, protobuf.
	data []byte
	// ref names the record's call and callKey is its ref.CallKey(); they
	// share the key's bytes when, as always, the key is the ref's.
	ref                  callref.Ref
	callKey              string
	thread, tool, server string
	state                airlockv1.ApprovalState
	risk                 airlockv1.Risk
	// inQueue: the call's rule takes one call of a thread at a time;
	// queued: it waits for its turn.
	inQueue, queued bool
	// announcer names the replica announcing the call (takeOver).
	announcer        string
	created, updated int64 // unix nanoseconds
	// size is the record's stored bytes (the value, arguments and all).
	size int
}

// newEntry encodes full, a record read from the bucket under key (raw, as
// stored), as the index holds it.
func newEntry(key string, raw []byte, full *airlockv1.ApprovalRecord) (*entry, error) {
	rec := calls.Abridged(full)
	// A copy: the watch's buffer also holds the message's headers.
	data := bytes.Clone(raw)
	if rec != full {
		var err error
		if data, err = proto.Marshal(rec); err != nil {
			return nil, fmt.Errorf("encode the listed form: %w", err)
		}
	}
	ref := domain.RefOf(rec)
	callKey := ref.CallKey()
	if ref.Key() == key {
		callKey = key[:len(callKey)]
		ref.Agent, ref.Call = callKey[:len(ref.Agent)], callKey[len(ref.Agent)+1:]
	}
	c := rec.GetCall()
	return &entry{
		data: data, ref: ref, callKey: callKey, thread: c.GetThreadId(), tool: c.GetTool(), server: c.GetServer(),
		state: rec.GetState(), risk: rec.GetDecision().GetRisk(), inQueue: domain.InQueue(rec), queued: rec.GetQueued(), announcer: rec.GetAnnouncer(),
		created: rec.GetCreatedAt().AsTime().UnixNano(), updated: rec.GetUpdatedAt().AsTime().UnixNano(),
	}, nil
}

// record decodes the entry's record. The index encoded it itself, so it
// decodes; were it not to — a defect — the failure is logged on log with the
// record's key, and the record is reduced to its call and state rather than
// a list failing.
func (e *entry) record(log *slog.Logger) *airlockv1.ApprovalRecord {
	rec := &airlockv1.ApprovalRecord{}
	if err := proto.Unmarshal(e.data, rec); err != nil {
		log.Error("an indexed approval record does not decode; it is handed out reduced to its call and state",
			"key", e.ref.Key(), "state", e.state, "err", err)
		return &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: e.ref.Agent, CallId: e.ref.Call, Revision: e.ref.Rev, ThreadId: e.thread, Tool: e.tool, Server: e.server}, State: e.state}
	}
	return rec
}

func (e *entry) pending() bool { return e.state == domain.Pending }
