package executor

import (
	"slices"
	"testing"
)

func TestAStdioServerInheritsOnlyWhatAProgramNeedsAndWhatItsEntryNames(t *testing.T) {
	airlocks := map[string]string{"PATH": "/usr/bin", "HOME": "/home/op", "LANG": "C.UTF-8",
		"HOOK_SECRET": "s3cret", "AIRLOCK_SECURITY_DECISION_KEY": "k", "GITHUB_TOKEN": "ghp_x"}
	lookup := func(k string) (string, bool) { v, ok := airlocks[k]; return v, ok }
	for _, tc := range []struct {
		name  string
		entry map[string]string
		want  []string
	}{
		{"no entry env", nil, []string{"HOME=/home/op", "PATH=/usr/bin", "LANG=C.UTF-8"}},
		{"a variable passed on by name", map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
			[]string{"HOME=/home/op", "PATH=/usr/bin", "LANG=C.UTF-8", "GITHUB_PERSONAL_ACCESS_TOKEN=ghp_x"}},
		{"literal values, an unset variable empty, sorted", map[string]string{"B": "two $UNSET", "A": "one"},
			[]string{"HOME=/home/op", "PATH=/usr/bin", "LANG=C.UTF-8", "A=one", "B=two "}},
		{"the entry overrides an inherited one (the last wins)", map[string]string{"PATH": "/opt/bin:$PATH"},
			[]string{"HOME=/home/op", "PATH=/usr/bin", "LANG=C.UTF-8", "PATH=/opt/bin:/usr/bin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := upstreamEnv(lookup, tc.entry); !slices.Equal(got, tc.want) {
				t.Fatalf("environment %q, want %q", got, tc.want)
			}
		})
	}
}
