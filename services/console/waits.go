package console

// maxWaitsPerAgent bounds the long-polls (GET /api/v1/calls/{id}?wait=) one
// agent holds open on a console process at once: each holds a subscription
// and a goroutine, and one agent's token must not be able to exhaust them.
const maxWaitsPerAgent = 64

// maxBodiesPerAgent bounds the submits and reports (POST /api/v1/calls,
// .../report) one agent's token has being read and handled on a console
// process at once. Each holds a body of up to twice limits.max_request_bytes
// and its copies while it is read, framed and published: without a bound,
// one token sending slowly on many connections held as many bodies. A
// request over the bound is refused before its body is read. Sixteen leave
// room for an agent whose workers submit in parallel (each submit is
// answered in milliseconds) and bound a token at about 9 MiB of bodies at
// the default limits.max_request_bytes (16 x 576 KiB).
const maxBodiesPerAgent = 16
