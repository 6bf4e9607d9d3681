package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// The CLI states a grant's whole scope — argument values, the person it is
// limited to, whether other arguments may be given — as the console does.
func TestTheCLIStatesAGrantsWholeScope(t *testing.T) {
	gr := &airlockv1.StandingGrant{
		Id: "grant_1", AgentId: "laptop", Server: "claude", Tool: "Bash",
		CommandPrefixes:     map[string]string{"/command": "npm test"},
		OnBehalfOf:          "dana",
		OnlyListedArguments: true,
		LimitedUses:         true, UsesLeft: 3,
		ExpiresAt: timestamppb.Now(),
		CreatedBy: &airlockv1.Actor{Id: "dana"},
	}
	got := grantScope(gr)
	for _, want := range []string{"agent laptop", "claude__Bash", "npm test", "on behalf of dana only", "no other argument", "3 use(s)", "created by dana"} {
		if !strings.Contains(got, want) {
			t.Errorf("grant scope %q does not say %q", got, want)
		}
	}
}
