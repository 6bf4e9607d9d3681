package violation

import (
	"strings"

	"github.com/airlock-gate/airlock/services/shared/subject"
)

// jsOps names JetStream API operations ($JS.API.<op>.<stream>…) in words,
// longest first so that CONSUMER.DURABLE.CREATE is not read as CONSUMER.
var jsOps = []struct{ op, words string }{
	{"CONSUMER.DURABLE.CREATE.", "create a durable consumer on stream"},
	{"CONSUMER.LEADER.STEPDOWN.", "move the leader of a consumer on stream"},
	{"CONSUMER.MSG.NEXT.", "pull messages from a consumer on stream"},
	{"CONSUMER.CREATE.", "create a consumer on stream"},
	{"CONSUMER.DELETE.", "delete a consumer on stream"},
	{"CONSUMER.INFO.", "read a consumer's state on stream"},
	{"CONSUMER.PAUSE.", "pause a consumer on stream"},
	{"CONSUMER.UNPIN.", "unpin a consumer on stream"},
	{"CONSUMER.LIST.", "list the consumers of stream"},
	{"CONSUMER.NAMES.", "list the consumers of stream"},
	{"STREAM.LEADER.STEPDOWN.", "move the leader of stream"},
	{"STREAM.MSG.DELETE.", "delete a message of stream"},
	{"STREAM.MSG.GET.", "read a message of stream"},
	{"STREAM.CREATE.", "create stream"},
	{"STREAM.UPDATE.", "change stream"},
	{"STREAM.DELETE.", "delete stream"},
	{"STREAM.PURGE.", "purge stream"},
	{"STREAM.INFO.", "read the state of stream"},
	{"STREAM.SNAPSHOT.", "snapshot stream"},
	{"STREAM.RESTORE.", "restore stream"},
	{"DIRECT.GET.", "read messages directly from stream"},
}

// Target says in words what a refused subject is for, so that an auditor
// reading the event need not know airlock's or JetStream's subject spaces.
// It names what the subject claims to be, from its tokens only.
func Target(subj string) string {
	if api, ok := strings.CutPrefix(subj, "$JS.API."); ok {
		for _, o := range jsOps {
			if rest, ok := strings.CutPrefix(api, o.op); ok {
				stream, more, _ := strings.Cut(rest, ".")
				t := "JetStream API: " + o.words + " " + stream
				if o.op == "DIRECT.GET." && more != "" {
					t += ", subject " + more + whose(more)
				}
				return t
			}
		}
		return "JetStream API: " + strings.ToLower(api)
	}
	tok := strings.Split(subj, ".")
	switch {
	case strings.HasPrefix(subj, "$KV.") && len(tok) >= 3:
		return "KV bucket " + tok[1] + ", key " + strings.Join(tok[2:], ".")
	case strings.HasPrefix(subj, "$JS.ACK.") && len(tok) >= 4:
		return "acknowledgement of consumer " + tok[3] + " on stream " + tok[2]
	case strings.HasPrefix(subj, "$SRV."):
		return "service discovery"
	case strings.HasPrefix(subj, "_INBOX"):
		return "a reply inbox"
	case strings.HasPrefix(subj, subject.APIPrefix+".") && len(tok) >= 4:
		return "airlock API " + strings.Join(tok[2:], ".")
	case strings.HasPrefix(subj, subject.RequestsPrefix+".") && len(tok) >= 3:
		return "the intake of agent " + tok[2]
	case subj == subject.AgentCancel(tok[min(2, len(tok)-1)]):
		return "the cancel of agent " + tok[2] + "'s calls"
	case subj == subject.AgentEvents(tok[min(2, len(tok)-1)]):
		return "the read of agent " + tok[2] + "'s stored events"
	}
	if w := whose(subj); w != "" {
		return strings.TrimPrefix(w, ", ")
	}
	return ""
}

// whose names the agent whose events or republished events subj is on.
func whose(subj string) string {
	tok := strings.Split(subj, ".")
	if len(tok) < 3 || tok[0] != "airlock" {
		return ""
	}
	switch tok[1] {
	case "evt":
		return ", events of agent " + tok[2]
	case "out":
		return ", republished events of agent " + tok[2]
	}
	return ""
}
