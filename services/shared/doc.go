// Package shared is the plumbing every airlock service uses, written once:
// ids and subjects (ids, subject), envelopes (envelope), canonical argument
// digests (canon), configuration (config), the NATS connection and
// provisioning (bus), the embedded server (embedded), logs, metrics and
// health (obs), durable consumers (consume), request validation (ingress),
// typed errors (apierr) and the dependencies a service is built from (svc).
package shared
