package main

import (
	"os/user"
	"testing"
)

// An operator command records who ran it: with $USER unset (a service
// account's shell, a container) an undo was recorded with no actor ("was
// undone already, by  at …"); the account the process runs as names it.
func TestOperatorCommandsRecordSomeoneAsTheActor(t *testing.T) {
	for _, tc := range []struct {
		name, by, user, want string
	}{
		{"by_is_taken_as_given", " carol ", "dave", "carol"},
		{"else_USER", "", "dave", "dave"},
		{"with_USER_unset_the_account_this_runs_as", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("USER", tc.user)
			got, err := operatorName(tc.by)
			if _, uerr := user.Current(); tc.by == "" && tc.user == "" && uerr != nil {
				// An account with no name (no passwd entry, no cgo): refused, never nobody.
				if err == nil {
					t.Fatalf("operatorName with no name anywhere: %q, want an error saying to give --by", got)
				}
				return
			}
			if err != nil || got == "" || (tc.want != "" && got != tc.want) {
				t.Fatalf("operatorName(%q) with USER=%q: %q, %v; want %q (or any name when empty)", tc.by, tc.user, got, err, tc.want)
			}
		})
	}
}
