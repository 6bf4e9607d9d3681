package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// bootstrapConsole creates the first admin and the admin API token of an
// `airlock dev` installation (once; later starts reuse them) and returns the
// lines dev prints about the console. Every console session of an earlier
// run ends (API tokens stay: no browser sends them). The password appears only on the
// start that created the user: it is stored as a bcrypt hash. It adds the
// admin to its groups in deps' approval.groups, so that the approval service
// (built from deps afterwards) lets the admin decide what the default policy
// asks of "group:reviewers".
func bootstrapConsole(ctx context.Context, deps *svc.Deps, dataDir, httpAddr string) (string, error) {
	if deps.Config.Console.WebPush.VAPIDPrivateKeyFile == "" {
		// Web Push on: its key pair is made once and kept with dev's other keys.
		file, err := console.DevVAPIDKey(dataDir)
		if err != nil {
			return "", fmt.Errorf("prepare the console's Web Push key: %w", err)
		}
		deps.Config.Console.WebPush.VAPIDPrivateKeyFile = file
	}
	// Sessions of an earlier run end: a cookie an open tab sent to whoever
	// listened on the port while dev was down must decide nothing now.
	admin, err := console.Bootstrap(ctx, *deps, dataDir, console.BootstrapOptions{EndSessions: true})
	if err != nil {
		return "", fmt.Errorf("prepare the console: %w", err)
	}
	groups := map[string][]string{}
	for g, members := range deps.Config.Approval.Groups {
		groups[g] = slices.Clone(members)
	}
	for _, g := range admin.Groups {
		if !slices.Contains(groups[g], admin.User) {
			groups[g] = append(groups[g], admin.User)
		}
	}
	deps.Config.Approval.Groups = groups
	text := fmt.Sprintf("  console   http://%s   %s\n", httpAddr, signInText(admin))
	// The command names the data dir, not only the token: the CLI finds
	// the console it belongs to there (console.url).
	text += fmt.Sprintf("  API token %s   (airlock approvals list%s)\n", admin.TokenFile, dataArg(dataDir))
	return text, nil
}

// signInText says how to sign in as the first admin: with the password made
// just now, the one the configuration gives, or, on a later start, where
// the password was and what to do without it.
func signInText(admin console.FirstAdmin) string {
	switch {
	case admin.Password != "":
		return fmt.Sprintf("sign in as %s with password %s\n            (shown only now: write it down; it is stored as a bcrypt hash)", admin.User, admin.Password)
	case admin.Configured:
		return fmt.Sprintf("sign in as %s with the password console.users gives it", admin.User)
	}
	return fmt.Sprintf("sign in as %s (password printed at the first start)\n"+
		"            (lost it? configure an admin of your own in console.users of a config file, its hash from `airlock users hash-password`,\n"+
		"            and start again with it: airlock dev --config FILE, or go tool task up -- --config FILE)", admin.User)
}
