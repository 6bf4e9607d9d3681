package record_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/audit/record"
)

// trail is n rows as the sink writes them, and the rows the stream's events build.
func trail(t *testing.T, key *record.Key, n int) (stored, stream []record.Row) {
	t.Helper()
	for i := 0; i < n; i++ {
		stream = append(stream, record.Row{Seq: uint64(i + 1), EventID: fmt.Sprintf("e%d", i+1), Type: "approved", Agent: "bot",
			Call: fmt.Sprintf("c%d", i/2), ActorType: "human", ActorID: "alice", Decision: "approve", Time: time.Unix(1_700_000_000+int64(i), 0).UTC()})
	}
	stored = slices.Clone(stream)
	key.Sealer().Chain(stored, record.GenesisHash)
	return stored, stream
}

// unkeyed seals r the way someone without the key could: plain SHA-256.
func unkeyed(r *record.Row, prev string) {
	r.PrevHash = prev
	sum := sha256.Sum256(append([]byte(prev), record.AppendCanonicalFields(nil, r)...))
	r.Hash = hex.EncodeToString(sum[:])
}

func kinds(rep record.Report) []string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, fmt.Sprintf("%s@%d", p.Kind, p.Seq))
	}
	return out
}

func TestVerifyNamesEveryKindOfTampering(t *testing.T) {
	key, _, err := record.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := record.GenerateKey()
	const n = 8
	cases := []struct {
		name string
		// change edits the stored rows (already chained) and may adjust the stream range.
		change   func(stored []record.Row, rng *record.StreamRange) []record.Row
		noStream bool
		want     []string
		pending  uint64
	}{
		{"an untouched trail verifies", func(s []record.Row, _ *record.StreamRange) []record.Row { return s }, false, nil, 0},
		{"a rewritten reason is altered, and the columns are named", func(s []record.Row, _ *record.StreamRange) []record.Row {
			s[2].Reason = "nothing to see"
			return s
		}, false, []string{"altered@3"}, 0},
		{"a rewritten reason is found without the stream too", func(s []record.Row, _ *record.StreamRange) []record.Row {
			s[2].Reason = "nothing to see"
			return s
		}, true, []string{"altered@3"}, 0},
		{"a row re-sealed with plain SHA-256 after a change is still altered", func(s []record.Row, _ *record.StreamRange) []record.Row {
			s[2].ActorID = "mallory"
			unkeyed(&s[2], s[2].PrevHash)
			return s
		}, false, []string{"altered@3", "link@4"}, 0},
		{"a deleted row is missing and breaks the next link", func(s []record.Row, _ *record.StreamRange) []record.Row {
			return slices.Delete(s, 3, 4)
		}, false, []string{"missing@4", "link@5"}, 0},
		{"reordered rows (sequences swapped) are both altered", func(s []record.Row, _ *record.StreamRange) []record.Row {
			s[1].Seq, s[2].Seq = s[2].Seq, s[1].Seq
			sort.SliceStable(s, func(i, j int) bool { return s[i].Seq < s[j].Seq })
			return s
		}, false, []string{"altered@2", "altered@3", "link@4"}, 0},
		{"a forged approval at head+1 that the stream never issued is planted", func(s []record.Row, _ *record.StreamRange) []record.Row {
			f := s[n-1]
			f.Seq, f.EventID, f.ActorID, f.Call = n+1, "forged", "alice", "c-evil"
			unkeyed(&f, s[n-1].Hash)
			return append(s, f)
		}, false, []string{"future@9"}, 0},
		{"a forged approval at head+1 inside the stream's range but none of its events is forged", func(s []record.Row, rng *record.StreamRange) []record.Row {
			f := s[n-1]
			f.Seq, f.EventID, f.Call = n+1, "forged", "c-evil"
			unkeyed(&f, s[n-1].Hash)
			rng.Last++
			return append(s, f)
		}, false, []string{"forged@9"}, 0},
		{"a far-future row is planted", func(s []record.Row, _ *record.StreamRange) []record.Row {
			f := s[0]
			f.Seq = 1_000_000_000
			unkeyed(&f, s[n-1].Hash)
			return append(s, f)
		}, false, []string{"future@1000000000"}, 0},
		{"a forged twin of an existing row is found beside the real one", func(s []record.Row, _ *record.StreamRange) []record.Row {
			f := s[4]
			f.Call, f.ActorID = "c-evil", "bob"
			unkeyed(&f, s[4].PrevHash)
			return slices.Insert(s, 5, f)
		}, false, []string{"altered@5"}, 0},
		{"the tail deleted after the sink acknowledged it is missing", func(s []record.Row, _ *record.StreamRange) []record.Row {
			return s[:n-2]
		}, false, []string{"missing@7", "missing@8"}, 0},
		{"events not yet acknowledged are pending, not missing", func(s []record.Row, rng *record.StreamRange) []record.Row {
			rng.Acked = n - 2
			return s[:n-2]
		}, false, nil, 2},
		{"the oldest rows removed without a pruning record break the start", func(s []record.Row, _ *record.StreamRange) []record.Row {
			return s[3:]
		}, false, []string{"start@4", "missing@1", "missing@2", "missing@3"}, 0},
		{"the oldest rows removed without a pruning record break the start without the stream too", func(s []record.Row, _ *record.StreamRange) []record.Row {
			return s[3:]
		}, true, []string{"start@4"}, 0},
		{"a trail sealed with another key is altered throughout", func(s []record.Row, _ *record.StreamRange) []record.Row {
			other.Sealer().Chain(s, record.GenesisHash)
			return s
		}, true, []string{"altered@1", "altered@2", "altered@3", "altered@4", "altered@5", "altered@6", "altered@7", "altered@8"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stored, stream := trail(t, key, n)
			rng := record.StreamRange{First: 1, Last: n, Acked: n}
			stored = c.change(stored, &rng)
			var src func(func(record.Row) bool)
			if !c.noStream {
				src = slices.Values(stream)
			}
			rep := record.Verify(key, slices.Values(stored), src, rng)
			got := kinds(rep)
			if strings.Join(got, " ") != strings.Join(c.want, " ") || rep.OK != (len(c.want) == 0) || rep.Pending != c.pending {
				t.Fatalf("problems %v (ok %v, pending %d), want %v (pending %d)\n%+v", got, rep.OK, rep.Pending, c.want, c.pending, rep.Problems)
			}
		})
	}
}

func TestVerifyAcceptsAPrunedStartThatAnAuditPrunedRowVouchesFor(t *testing.T) {
	key, _, _ := record.GenerateKey()
	stored, _ := trail(t, key, 6)
	pruned := record.Row{Seq: 7, EventID: "p", Type: "audit_pruned", Time: time.Unix(1_700_000_100, 0).UTC(),
		Payload: fmt.Sprintf(`{"audit_pruned":{"first_kept_seq":"4","anchor_hash":%q}}`, stored[2].Hash)}
	key.Sealer().Seal(&pruned, stored[5].Hash)
	kept := append(stored[3:], pruned)
	rep := record.Verify(key, slices.Values(kept), nil, record.StreamRange{})
	if !rep.OK || rep.PrunedBefore != 4 {
		t.Fatalf("report %+v: want OK with the start vouched for at seq 4", rep)
	}
	t.Run("a pruning record naming another anchor does not vouch", func(t *testing.T) {
		bad := pruned
		bad.Payload = `{"audit_pruned":{"first_kept_seq":"4","anchor_hash":"` + strings.Repeat("a", 64) + `"}}`
		key.Sealer().Seal(&bad, stored[5].Hash)
		rep := record.Verify(key, slices.Values(append(slices.Clone(stored[3:]), bad)), nil, record.StreamRange{})
		if rep.OK || rep.Problems[0].Kind != record.ProblemStart {
			t.Fatalf("report %+v: want a start problem", rep)
		}
	})
}

func TestSealerChecksOnlyItsOwnKey(t *testing.T) {
	key, text, _ := record.GenerateKey()
	again, err := record.ParseKey(" " + text + "\n")
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := record.GenerateKey()
	r := record.Row{Seq: 1, EventID: "e", Type: "approved", Time: time.Unix(1, 0)}
	key.Sealer().Seal(&r, record.GenesisHash)
	cases := []struct {
		name string
		ok   bool
	}{
		{"the same key parsed from its text checks the row", again.Sealer().Check(&r)},
		{"another key does not", !other.Sealer().Check(&r)},
		{"a key id differs between keys", key.ID() != other.ID() && key.ID() == again.ID()},
	}
	for _, c := range cases {
		if !c.ok {
			t.Errorf("%s: does not hold", c.name)
		}
	}
	if _, err := record.ParseKey("abcd"); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a short key: %v", err)
	}
}
