package console

// maxWaitsPerAgent bounds the long-polls (GET /api/v1/calls/{id}?wait=) one
// agent holds open on a console process at once: each holds a subscription
// and a goroutine, and one agent's token must not be able to exhaust them.
const maxWaitsPerAgent = 64
