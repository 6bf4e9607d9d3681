package policy

// AsksWaitingForGrants is how many asks wait now for the grants in force
// to catch up with the grants bucket: a test starts the watch only once an
// ask waits, so that the wait, not luck, brings the grant.
func AsksWaitingForGrants(e *Engine) int { return len(e.grantWaiters) }
