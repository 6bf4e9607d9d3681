package embedded

// fdReserve is what the process keeps of its open file limit for all but
// NATS clients: JetStream's files, the HTTP servers, a local ClickHouse's
// connections, the services' own.
const fdReserve = 1024

// fitConnections lowers maxConn (nats-server's max_connections; 0 is its
// default, 64K) to leave fdReserve of fdLimit, the process's open file
// limit, so that clients filling it cannot take the descriptors the server
// and airlock's services need to go on. fdLimit 0 is unknown.
func fitConnections(maxConn int, fdLimit uint64) int {
	if fdLimit == 0 {
		return maxConn
	}
	room := 1
	if fdLimit > fdReserve+1 {
		room = int(min(fdLimit-fdReserve, 1<<30))
	}
	if maxConn <= 0 || maxConn > room {
		return room
	}
	return maxConn
}

// ConnectionBound is the connection bound an embedded server started now
// keeps for a configured maxConn (limits.bus_connections): lowered to fit
// the process's open file limit, as Start and Reload lower it.
func ConnectionBound(maxConn int) int { return fitConnections(maxConn, openFileLimit()) }
