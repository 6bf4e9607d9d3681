package tests

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// TestAnAgentsWildcardDirectGetsCostNoMoreThanItsCallsEvents (h-bounds
// review): an agent may Direct Get the last event of any subject under
// airlock.evt.<agent>.> (subject form), and the key may be a wildcard — the
// SDK itself reads `airlock.evt.<agent>.<call>.>`. A key such as
// `airlock.evt.<agent>.*.zzz` makes the server match it against the
// stream's whole subject index of that agent (filestore loadLastLocked:
// psim.Match, under the stream's read lock) on every request: its cost
// grows with the agent's history in the stream (at its budget, 36,000
// calls an hour for 90 days), and nothing bounds how often the agent asks.
// The history here (100,000 calls) is written by the operator, standing
// for the agent's past calls; the requests are the agent's own.
func TestAnAgentsWildcardDirectGetsCostNoMoreThanItsCallsEvents(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "")
	dev.Agent(t, "bot") // the credential
	_, js := dev.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stream := config.Default().Stream.Name

	cred, err := natsauth.ReadCredential(dev.Creds("bot"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := airlock.Dial(ctx, cred, dev.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	get := func(key string) (time.Duration, error) {
		start := time.Now()
		_, err := nc.Request("$JS.API.DIRECT.GET."+stream+"."+key, nil, 10*time.Second)
		return time.Since(start), err
	}
	median := func(key string, n int) time.Duration {
		var ds []time.Duration
		for range n {
			d, err := get(key)
			if err != nil {
				t.Fatalf("direct get %s: %v", key, err)
			}
			ds = append(ds, d)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	const history = 100000
	var wildAt20k time.Duration
	for i := 0; i < history; i++ {
		if _, err := js.PublishAsync(fmt.Sprintf("airlock.evt.bot.h%d.notified", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if i%2000 == 1999 {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal("the history was not stored")
			}
		}
		if i == 19999 {
			wildAt20k = median("airlock.evt.bot.*.zzz", 20)
		}
	}
	<-js.PublishAsyncComplete()
	literal := median("airlock.evt.bot.h5.notified", 50)
	oneCall := median("airlock.evt.bot.h5.>", 50)
	wild := median("airlock.evt.bot.*.zzz", 20)

	// Another writer's stored publish, alone and while the agent asks.
	publish := func(n int) time.Duration {
		var ds []time.Duration
		for i := range n {
			start := time.Now()
			if _, err := js.Publish(ctx, fmt.Sprintf("airlock.evt.victim.v%d.notified", i), []byte("x")); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	quiet := publish(50)
	var conns []*nats.Conn
	for range 8 {
		// Each on a connection of its own (an agent may hold
		// limits.agent_connections): the server answers one connection's
		// Direct Gets one at a time.
		conn, err := airlock.Dial(ctx, cred, dev.NATSURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns = append(conns, conn)
	}
	// flood asks for key on every connection, back to back, while another
	// writer publishes 200 events; it returns their median and how many
	// gets were answered meanwhile.
	flood := func(key string) (median time.Duration, asked int64, took time.Duration) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var n atomic.Int64
		for _, conn := range conns {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := conn.Request("$JS.API.DIRECT.GET."+stream+"."+key, nil, 10*time.Second); err != nil && err != nats.ErrTimeout {
						return
					}
					n.Add(1)
				}
			})
		}
		time.Sleep(500 * time.Millisecond)
		start := time.Now()
		median = publish(200)
		took = time.Since(start)
		close(stop)
		wg.Wait()
		return median, n.Load(), took
	}
	control, controlAsked, controlTook := flood("airlock.evt.bot.h5.>")
	busy, asked, took := flood("airlock.evt.bot.*.zzz")
	t.Logf("the same flood of one call's Direct Gets: %d gets, another writer's publish %s (200 in %s)", controlAsked, control, controlTook.Round(time.Millisecond))
	t.Logf("agent bot with %d calls in the stream: Direct Get of a subject %s, of one call's subjects %s, of `airlock.evt.bot.*.zzz` %s (median; %s at 20,000 calls); %d such gets meanwhile; another writer's publish %s alone, %s while the agent asks (median, 200 publishes in %s)",
		history, literal, oneCall, wild, wildAt20k, asked, quiet, busy, took.Round(time.Millisecond))
	if wild > 5*oneCall+time.Millisecond {
		t.Errorf("one Direct Get the agent may send costs %s, %d times one of its call's", wild, wild/max(oneCall, 1))
	}
	if busy > 5*max(quiet, control)+time.Millisecond {
		t.Errorf("while one agent asks, another writer's publish takes %s instead of %s", busy, quiet)
	}
}
