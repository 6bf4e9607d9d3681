package console

import (
	"net"
	"testing"
)

// A push endpoint is dialed only at a public address: special-purpose
// ranges Go counts as global unicast (carrier-grade NAT, NAT64, 6to4, ...)
// reach inside a network, not a push service.
func TestPushDialsOnlyPublicAddresses(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		public bool
	}{
		{"142.250.74.10", true},
		{"2a00:1450:4001:80b::200a", true},
		{"10.0.0.1", false},
		{"127.0.0.1", false},
		{"169.254.169.254", false},
		{"100.64.0.1", false},
		{"100.127.255.254", false},
		{"198.18.0.1", false},
		{"192.0.0.8", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:100.64.0.1", false},
		{"64:ff9b::a00:1", false},
		{"2002:a00:1::1", false},
		{"2001:0:a00:1::1", false},
		{"fd00::1", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			if got := publicAddress(net.ParseIP(tc.addr)); got != tc.public {
				t.Fatalf("publicAddress(%s) = %v, want %v", tc.addr, got, tc.public)
			}
			err := pushDialer(false).Control("tcp", net.JoinHostPort(tc.addr, "443"), nil)
			if (err == nil) != tc.public {
				t.Fatalf("dialing %s: %v, want allowed=%v", tc.addr, err, tc.public)
			}
		})
	}
}
