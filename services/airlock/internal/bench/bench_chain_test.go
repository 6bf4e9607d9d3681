package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestTheWorkChainDoesEachPieceAtItsPlace: the p50 verdict's chain does
// each piece of a call's work where a call does it — the request encoded
// before anything is stored, the decision's work before the decision is
// stored, the claim's before `started`, the end's before the end, the
// agent's decoding once the end is stored — each once per call.
func TestTheWorkChainDoesEachPieceAtItsPlace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := startTestServer(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// Each piece notes its stage and how many events the chain's stream
	// held when it ran.
	type seen struct {
		at     workStage
		stored uint64
	}
	var (
		mu   sync.Mutex
		done []seen
	)
	names := map[workStage]string{atSubmit: "submit", atDecide: "decide", atClaim: "claim", atEnd: "end", atReceive: "receive"}
	var work []workPiece
	for _, at := range []workStage{atSubmit, atDecide, atClaim, atEnd, atReceive} {
		work = append(work, workPiece{name: names[at], at: at, do: func() error {
			s, err := js.Stream(ctx, "SPECWORK_EVT")
			if err != nil {
				return err
			}
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			done = append(done, seen{at, info.State.Msgs})
			return nil
		}})
	}
	op, _, stop, err := newChainRig(ctx, ns.URL(), make([]byte, 512), specWorkWrites, work)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const calls = 3
	for range calls {
		if err := op(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Stored before each stage of call k: 3k events, then the decision,
	// started and the end one by one.
	var want []seen
	for k := range uint64(calls) {
		want = append(want, seen{atSubmit, 3 * k}, seen{atDecide, 3 * k}, seen{atClaim, 3*k + 1}, seen{atEnd, 3*k + 2}, seen{atReceive, 3*k + 3})
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(done, want) {
		t.Fatalf("stages and events stored when each ran:\n got %s\nwant %s", fmt.Sprint(done), fmt.Sprint(want))
	}
}

// A party's work failing fails the call, the agent's own on the end too
// (the reply still arrives then).
func TestTheWorkChainFailsACallWhosePartyFailed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := startTestServer(t)
	for _, at := range []workStage{atDecide, atReceive} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			work := []workPiece{{name: "fails", at: at, do: func() error { return errors.New("broken") }}}
			writes := specWorkWrites
			if at == atReceive {
				writes = specCallWorkWrites // a rig of its own: the streams are per writes
			}
			op, _, stop, err := newChainRig(ctx, ns.URL(), make([]byte, 512), writes, work)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if err := op(ctx); err == nil || !strings.Contains(err.Error(), "broken") {
				t.Fatalf("a call whose %v work failed returned %v; want its failure", at, err)
			}
		})
	}
}
