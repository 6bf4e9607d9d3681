package freeport

import (
	"net"
	"strconv"
	"testing"
)

// A picked port can be listened on, and lies below the ephemeral range
// where this machine has one to stay below (outgoing connections take
// ports from that range).
func TestAPickedPortIsFreeAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := belowEphemeral()
	for range 20 {
		p, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if hi > lo && (p < lo || p >= hi) {
			t.Fatalf("picked %d, want a port in [%d, %d), below the ephemeral range", p, lo, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("picked %d, which cannot be listened on: %v", p, err)
		}
		l.Close()
	}
}
