package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Seed 002: one pending confirmation per session. A rule with
// queue_per_thread holds a thread's later calls until its earlier one is
// decided: each such call is created queued (not announced, not
// decidable), and a thread's queued calls are released one at a time, the
// one airlock received first (requested_seq, a stream sequence the agent
// cannot choose) first. A queued call still expires at its own deadline and
// can still be canceled; the queue is listed with every pending call.

// InQueue reports whether rec's call waits its turn in its thread's queue.
func InQueue(rec *airlockv1.ApprovalRecord) bool {
	return rec.GetDecision().GetQueuePerThread() && rec.GetCall().GetThreadId() != ""
}

// QueueKey names the queue of a thread: one agent's thread (threads are
// named by agents, so a thread id never reaches another agent's queue).
// It is also the key of the queue's lock in the approvals bucket; agent
// ids never start with "_", so it never collides with a record's key.
func QueueKey(rec *airlockv1.ApprovalRecord) string {
	return QueueKeyOf(rec.GetCall().GetAgentId(), rec.GetCall().GetThreadId())
}

// QueueKeyOf is QueueKey of agent's thread.
func QueueKeyOf(agent, thread string) string { return queueKeyPrefix + agent + "." + thread }

const queueKeyPrefix = "_queue."

// A queue's lock holds the key of the call whose turn it is. Once the
// thread has nothing pending the lock is retired: rewritten with the ended
// records' retention as its TTL, holding its last holder's key after
// retiredMark. The mark tells every reader that the turn is free and that
// the lock already expires, so the sweeper, which retires the locks a
// release cut short left, retires each once (a KV entry does not show its
// TTL, and a rewrite at every sweep would push its expiry back for ever).
// No call's key starts with "_" (agent ids never do), so no holder reads
// as retired; and a replica that predates the mark reads a retired lock
// as naming a call no longer in the bucket: a free turn, as it is.
const retiredMark = "_retired."

// RetiredLock is the value of a retired queue lock whose last holder is holder.
func RetiredLock(holder string) []byte { return []byte(retiredMark + holder) }

// LockHolder reads a queue lock's value: the key of the call it names, and
// whether the lock is retired (RetiredLock).
func LockHolder(value []byte) (holder string, retired bool) {
	return strings.CutPrefix(string(value), retiredMark)
}

// QueueAgent names the agent whose thread a queue's lock (QueueKey) is:
// the lock is its bytes in the bucket, counted toward its share. ok is
// false for a key that is no queue's lock. Agent ids hold no ".".
func QueueAgent(key string) (agent string, ok bool) {
	rest, ok := strings.CutPrefix(key, queueKeyPrefix)
	if !ok {
		return "", false
	}
	agent, _, ok = strings.Cut(rest, ".")
	return agent, ok && agent != ""
}

// Turn says which of a thread's pending calls (recs, fresh) is released
// next: none when one of them is released already (its turn is not over),
// else the first received. ok is false when there is nothing to release.
func Turn(recs []*airlockv1.ApprovalRecord) (next *airlockv1.ApprovalRecord, ok bool) {
	var queued []*airlockv1.ApprovalRecord
	for _, r := range recs {
		if r.GetState() != Pending {
			continue
		}
		if !r.GetQueued() {
			return nil, false
		}
		queued = append(queued, r)
	}
	if len(queued) == 0 {
		return nil, false
	}
	return slices.MinFunc(queued, func(a, b *airlockv1.ApprovalRecord) int {
		return cmp.Or(cmp.Compare(a.GetRequestedSeq(), b.GetRequestedSeq()), cmp.Compare(RefOf(a).Key(), RefOf(b).Key()))
	}), true
}

// Release is rec released from its queue: announced and decidable. nil
// when it is no longer pending or not queued.
func Release(rec *airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord {
	if rec.GetState() != Pending || !rec.GetQueued() {
		return nil
	}
	next := proto.Clone(rec).(*airlockv1.ApprovalRecord)
	next.Queued = false
	return next
}

// waiting is the sentence for a decision on a queued call.
func waiting(rec *airlockv1.ApprovalRecord) string {
	return fmt.Sprintf("call %s waits behind an earlier call of thread %s: decide that one first (one confirmation per thread at a time); nothing changed",
		rec.GetCall().GetCallId(), rec.GetCall().GetThreadId())
}
