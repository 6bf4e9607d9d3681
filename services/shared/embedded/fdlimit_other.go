//go:build !unix

package embedded

// openFileLimit is unknown here: nats-server's max_connections stays as
// configured.
func openFileLimit() uint64 { return 0 }
