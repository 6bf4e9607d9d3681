package record

import (
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"
)

// Problem kinds that Verify reports.
const (
	// ProblemAltered: a stored row's hash does not match its contents: it
	// was changed after the audit service wrote it.
	ProblemAltered = "altered"
	// ProblemForged: a stored row that the audit service never wrote (its
	// hash is not the key's) and that is no event of the stream.
	ProblemForged = "forged"
	// ProblemMissing: an event the stream holds and the audit service has
	// acknowledged is not stored (deleted, or never written).
	ProblemMissing = "missing"
	// ProblemExtra: an authentic row whose event the stream no longer holds
	// although it still retains that range.
	ProblemExtra = "extra"
	// ProblemFuture: a row beyond the last event the stream has issued.
	ProblemFuture = "future"
	// ProblemLink: an authentic row that does not follow the authentic row
	// before it: rows between them were removed (or reordered).
	ProblemLink = "link"
	// ProblemStart: the oldest row is not the start of the chain and no
	// audit_pruned record accounts for the rows before it.
	ProblemStart = "start"
	// ProblemMismatch: an authentic row that differs from the stream's
	// event (written by another version of airlock, or the key leaked).
	ProblemMismatch = "mismatch"
)

// MaxProblems caps how many problems a report lists (the count goes on).
const MaxProblems = 1000

// Problem is one thing Verify found wrong, named by sequence.
type Problem struct {
	Seq     uint64 `json:"seq"`
	EventID string `json:"event_id,omitempty"`
	Kind    string `json:"kind"`
	Detail  string `json:"detail"`
}

// StreamRange is what the events stream holds when verifying: its first
// and last sequence, and the highest sequence the audit service has
// acknowledged (everything up to it must be stored).
type StreamRange struct {
	First, Last, Acked uint64
}

// Report is the outcome of Verify.
type Report struct {
	OK bool `json:"ok"`
	// Count is the rows read; Authentic those whose hash is the key's.
	Count     uint64 `json:"count"`
	Authentic uint64 `json:"authentic"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	// Head is the hash of the last authentic row.
	Head string `json:"head"`
	// Problems lists what is wrong, in sequence order (at most MaxProblems);
	// ProblemCount counts them all.
	Problems     []Problem `json:"problems,omitempty"`
	ProblemCount uint64    `json:"problem_count"`
	// StreamChecked says whether rows were compared with the stream, over
	// StreamFirst..StreamLast; Pending counts events the stream holds that
	// the audit service has not written yet (not a problem).
	StreamChecked bool   `json:"stream_checked"`
	StreamFirst   uint64 `json:"stream_first,omitempty"`
	StreamLast    uint64 `json:"stream_last,omitempty"`
	Pending       uint64 `json:"pending"`
	// PrunedBefore is the first sequence kept by the last audit_pruned that
	// vouches for the oldest row (0 when the chain starts at its genesis).
	PrunedBefore uint64 `json:"pruned_before,omitempty"`
}

// Verify checks stored rows (in sequence order) with the key, and, when
// stream is not nil, against the rows built from the stream's events over
// rng (in sequence order). It reports every row that is altered, forged,
// missing, extra, beyond the stream, or out of the chain.
func Verify(key *Key, stored iter.Seq[Row], stream iter.Seq[Row], rng StreamRange) Report {
	v := verifier{sealer: key.Sealer(), pruned: map[uint64]string{}, rep: Report{Head: GenesisHash}}
	var next func() (Row, bool)
	if stream != nil {
		var stop func()
		next, stop = iter.Pull(stream)
		defer stop()
		v.rep.StreamChecked, v.rep.StreamFirst, v.rep.StreamLast = true, rng.First, rng.Last
	}
	var cur *Row
	matched := false // cur has a stored row
	advance := func() {
		cur, matched = nil, false
		if next != nil {
			if r, ok := next(); ok {
				cur = &r
			}
		}
	}
	advance()
	var before []Row // stream events older than the oldest stored row
	for r := range stored {
		for cur != nil && cur.Seq < r.Seq {
			switch {
			case matched:
			case v.rep.Count == 0:
				before = append(before, *cur)
			default:
				v.problem(cur.Seq, cur.EventID, ProblemMissing, fmt.Sprintf("event seq %d (%s %s/%s) is in the stream but not in the audit store", cur.Seq, cur.Type, cur.Agent, cur.Call))
			}
			advance()
		}
		var fromStream *Row
		if cur != nil && cur.Seq == r.Seq {
			fromStream, matched = cur, true
		}
		v.add(r, fromStream, rng)
	}
	for ; cur != nil; advance() {
		if matched {
			continue
		}
		if cur.Seq <= rng.Acked || (v.rep.Count > 0 && cur.Seq <= v.rep.LastSeq) {
			v.problem(cur.Seq, cur.EventID, ProblemMissing, fmt.Sprintf("event seq %d (%s %s/%s) was acknowledged by the audit service but is not in the audit store", cur.Seq, cur.Type, cur.Agent, cur.Call))
			continue
		}
		v.rep.Pending++
	}
	v.finish(before)
	v.rep.OK = v.rep.ProblemCount == 0
	return v.rep
}

type verifier struct {
	sealer   *Sealer
	rep      Report
	started  bool
	prevHash string
	prevSeq  uint64
	// The rows of one sequence: the link in force before it, and whether
	// an authentic row holds it (a forged twin never becomes the link).
	groupSeq       uint64
	groupPrev      string
	groupAuthentic bool
	firstSeq       uint64
	first          string // prev_hash of the oldest authentic row
	pruned         map[uint64]string
}

func (v *verifier) problem(seq uint64, id, kind, detail string) {
	v.rep.ProblemCount++
	if len(v.rep.Problems) < MaxProblems {
		v.rep.Problems = append(v.rep.Problems, Problem{Seq: seq, EventID: id, Kind: kind, Detail: detail})
	}
}

func (v *verifier) add(r Row, fromStream *Row, rng StreamRange) {
	if v.rep.Count == 0 {
		v.rep.FirstSeq = r.Seq
	}
	if v.rep.Count == 0 || r.Seq != v.groupSeq {
		v.groupSeq, v.groupPrev, v.groupAuthentic = r.Seq, v.prevHash, false
	}
	v.rep.Count++
	v.rep.LastSeq = max(v.rep.LastSeq, r.Seq)
	authentic := v.sealer.Check(&r)
	inRange := v.rep.StreamChecked && r.Seq >= rng.First && r.Seq <= rng.Last
	var diff []string
	if fromStream != nil {
		diff = DifferentColumns(&r, fromStream)
	}
	switch {
	case v.rep.StreamChecked && r.Seq > rng.Last:
		v.problem(r.Seq, r.EventID, ProblemFuture, fmt.Sprintf("row seq %d is beyond the last event the stream has issued (%d): it was planted", r.Seq, rng.Last))
		return
	case !authentic && fromStream != nil && len(diff) > 0:
		v.problem(r.Seq, r.EventID, ProblemAltered, fmt.Sprintf("row seq %d (event %s) was altered: %s differ from the stream's event, and its hash is not the audit key's", r.Seq, r.EventID, strings.Join(diff, ", ")))
		v.standIn(r)
		return
	case !authentic && fromStream != nil:
		v.problem(r.Seq, r.EventID, ProblemAltered, fmt.Sprintf("row seq %d (event %s) has its hash or prev_hash rewritten: its contents match the stream but its hash is not the audit key's", r.Seq, r.EventID))
		v.standIn(r)
		return
	case !authentic && inRange:
		v.problem(r.Seq, r.EventID, ProblemForged, fmt.Sprintf("row seq %d (event %s) was forged: the stream holds no such event and its hash is not the audit key's", r.Seq, r.EventID))
		return
	case !authentic:
		v.problem(r.Seq, r.EventID, ProblemAltered, fmt.Sprintf("row seq %d (event %s) was altered or forged: its hash is not the audit key's hash of its contents", r.Seq, r.EventID))
		v.standIn(r)
		return
	case inRange && fromStream == nil:
		v.problem(r.Seq, r.EventID, ProblemExtra, fmt.Sprintf("row seq %d (event %s) is authentic but the stream no longer holds its event although it retains seq %d-%d", r.Seq, r.EventID, rng.First, rng.Last))
	case fromStream != nil && len(diff) > 0:
		v.problem(r.Seq, r.EventID, ProblemMismatch, fmt.Sprintf("row seq %d (event %s) carries the audit key's hash but %s differ from the stream's event: written by another airlock version, or the key is known to someone else", r.Seq, r.EventID, strings.Join(diff, ", ")))
	}
	v.rep.Authentic++
	switch {
	case v.groupAuthentic:
		v.problem(r.Seq, r.EventID, ProblemLink, fmt.Sprintf("two authentic rows carry seq %d: the chain was forked by two writers", r.Seq))
	case v.started && r.PrevHash != v.groupPrev:
		v.problem(r.Seq, r.EventID, ProblemLink, fmt.Sprintf("row seq %d does not follow row seq %d: its prev_hash %s is not that row's hash %s (rows between them were removed)", r.Seq, v.prevSeq, short(r.PrevHash), short(v.groupPrev)))
	}
	v.groupAuthentic = true
	if !v.started {
		v.started, v.firstSeq, v.first = true, r.Seq, r.PrevHash
	}
	v.prevHash, v.prevSeq, v.rep.Head = r.Hash, r.Seq, r.Hash
	if r.Type == "audit_pruned" {
		if seq, anchor, ok := prunedAnchor(r.Payload); ok {
			v.pruned[seq] = anchor
		}
	}
}

// standIn lets an altered row that holds a real sequence carry the link to
// the next row (its stored hash), so one altered row is one problem; a row
// beside an authentic one at the same sequence never does.
func (v *verifier) standIn(r Row) {
	if v.groupAuthentic {
		return
	}
	if !v.started {
		v.started, v.firstSeq, v.first = true, r.Seq, r.PrevHash
	}
	v.prevHash, v.prevSeq = r.Hash, r.Seq
}

// finish checks the chain's start: the genesis hash, or an anchor that an
// authentic audit_pruned row vouches for. Stream events older than the
// oldest row are missing unless such a record accounts for them.
func (v *verifier) finish(before []Row) {
	if !v.started {
		for _, r := range before {
			v.problem(r.Seq, r.EventID, ProblemMissing, fmt.Sprintf("event seq %d (%s %s/%s) is in the stream but not in the audit store", r.Seq, r.Type, r.Agent, r.Call))
		}
		return
	}
	vouched := v.first == GenesisHash
	if !vouched {
		if anchor, ok := v.pruned[v.firstSeq]; ok && anchor == v.first {
			vouched, v.rep.PrunedBefore = true, v.firstSeq
		}
	}
	if vouched {
		return
	}
	v.problem(v.firstSeq, "", ProblemStart, fmt.Sprintf("the oldest authentic row (seq %d) is not the start of the chain and no audit_pruned record accounts for the rows before it: they were removed", v.firstSeq))
	for _, r := range before {
		v.problem(r.Seq, r.EventID, ProblemMissing, fmt.Sprintf("event seq %d (%s %s/%s) is in the stream but not in the audit store", r.Seq, r.Type, r.Agent, r.Call))
	}
}

// prunedAnchor reads first_kept_seq and anchor_hash from an audit_pruned payload.
func prunedAnchor(payload string) (uint64, string, bool) {
	var p struct {
		AuditPruned struct {
			FirstKeptSeq string `json:"first_kept_seq"`
			AnchorHash   string `json:"anchor_hash"`
		} `json:"audit_pruned"`
	}
	if json.Unmarshal([]byte(payload), &p) != nil {
		return 0, "", false
	}
	seq, err := strconv.ParseUint(p.AuditPruned.FirstKeptSeq, 10, 64)
	return seq, p.AuditPruned.AnchorHash, err == nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}
