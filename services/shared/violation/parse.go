// Package violation turns the permission violations of an embedded NATS
// server into audit events: every publish, subscription or reply subject
// NATS refuses a connection is recorded on the events stream as an
// unauthorized_attempt naming the identity the server authenticated, the
// subject and what it is, within bounds an agent's loop cannot exceed.
//
// nats-server reports a violation only through its logger (Errorf), so the
// Logger here is the server's logger: it reads those lines and hands them
// to a Recorder without waiting, and passes the server's other warnings and
// errors to slog. A NATS server airlock does not run (the stock image in
// production) logs the same lines itself; see ARCHITECTURE.md.
package violation

import (
	"strconv"
	"strings"
	"time"
)

// Kinds of violations: the action of the event.
const (
	Publish   = "publish"
	Subscribe = "subscribe"
	// Reply: a publish with a reply subject the user may not receive on.
	Reply = "reply"
)

// Violation is one refusal as the server logged it.
type Violation struct {
	Kind    string
	Subject string
	// Source is the connection's address (ip:port) and CID its id on this
	// server, both written by the server.
	Source string
	CID    uint64
	// Label is the server's "ACCOUNT/nkey:U…" label of the connection's
	// authenticated user and ClientName what the client called itself
	// ("v1.55.0:go:name"), both as the log line carries them. Label is only
	// a fallback: the Recorder asks the server who CID is.
	Label      string
	ClientName string
	At         time.Time
}

// The messages nats-server v2.15 logs, after the client's description
// (client.go: pubPermissionViolation, replySubjectViolation,
// subPermissionViolation, maxTokensViolation).
const (
	pubFormat   = "Publish Violation - Subject %q"
	replyFormat = "Publish Violation - Reply %q"
	subPrefix   = "Subscription Violation - Subject "
	subTokens   = "Subscription Violation Too Many Tokens - Subject "
)

// Parse reads a violation from the format and arguments of an Errorf call
// of the server, before formatting: the client's description is a prefix
// of the format ("ip:port - cid:N" then up to two quoted strings), and the
// subject is the argument (publish) or quoted in the format (subscribe).
// Anything else is not a violation. The client's own strings are quoted by
// the server, so a name the client chose cannot end the description early.
func Parse(format string, args []any) (Violation, bool) {
	var v Violation
	rest, ok := v.description(format)
	if !ok {
		return Violation{}, false
	}
	switch {
	case rest == pubFormat && len(args) == 1:
		v.Kind, v.Subject = Publish, argString(args[0])
	case rest == replyFormat && len(args) == 1:
		v.Kind, v.Subject = Reply, argString(args[0])
	case len(args) == 0 && (strings.HasPrefix(rest, subPrefix) || strings.HasPrefix(rest, subTokens)):
		q := strings.TrimPrefix(strings.TrimPrefix(rest, subPrefix), subTokens)
		quoted, err := strconv.QuotedPrefix(q)
		if err != nil {
			return Violation{}, false
		}
		v.Kind, v.Subject = Subscribe, unquote(quoted)
	default:
		return Violation{}, false
	}
	return v, v.Subject != ""
}

// description reads "ip:port - cid:N[ - "name"][ - "ACCOUNT/user"] - " off
// the front of format into v, and returns what follows.
func (v *Violation) description(format string) (string, bool) {
	conn, rest, ok := strings.Cut(format, " - ")
	if !ok {
		return "", false
	}
	id, rest, ok := strings.Cut(rest, " - ")
	if !ok {
		return "", false
	}
	n, found := "", false
	for _, p := range []string{"cid:", "wid:"} { // plain and websocket clients
		if n, found = strings.CutPrefix(id, p); found {
			break
		}
	}
	cid, err := strconv.ParseUint(n, 10, 64)
	if !found || err != nil {
		return "", false
	}
	// The server escapes % in the address, as the description becomes part
	// of a format.
	v.Source, v.CID = strings.ReplaceAll(conn, "%%", "%"), cid
	var quoted []string
	for strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", false
		}
		quoted = append(quoted, unquote(q))
		if rest, ok = strings.CutPrefix(rest[len(q):], " - "); !ok {
			return "", false
		}
	}
	switch len(quoted) {
	case 1:
		// One string is the user label when it has that shape; either
		// way the Recorder asks the server who the connection is.
		if looksLikeLabel(quoted[0]) {
			v.Label = quoted[0]
		} else {
			v.ClientName = quoted[0]
		}
	case 2:
		v.ClientName, v.Label = quoted[0], quoted[1]
	}
	return rest, len(quoted) <= 2
}

// looksLikeLabel: "ACCOUNT/nkey:…", "ACCOUNT/user:…" and the like.
func looksLikeLabel(s string) bool {
	_, user, ok := strings.Cut(s, "/")
	return ok && (strings.HasPrefix(user, "nkey:") || strings.HasPrefix(user, "user:") || strings.HasPrefix(user, "jwt:") || user == "token")
}

func unquote(q string) string {
	s, err := strconv.Unquote(q)
	if err != nil {
		return q
	}
	return s
}

// argString copies the subject argument: the server passes a slice of its
// read buffer, which it reuses as soon as the log call returns.
func argString(a any) string {
	switch s := a.(type) {
	case []byte:
		return string(s)
	case string:
		return strings.Clone(s)
	}
	return ""
}
