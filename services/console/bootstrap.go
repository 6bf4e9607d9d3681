package console

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// FirstAdmin is what Bootstrap did.
type FirstAdmin struct {
	// User is the admin the token belongs to.
	User string
	// Groups of the admin: a created admin is in "reviewers", the group the
	// default policy asks, so it can decide calls out of the box.
	Groups []string
	// Password is set only when Bootstrap created the user just now; it is
	// never stored in clear and cannot be shown again.
	Password string
	// Configured is true when User is an admin of console.users, whose
	// password the configuration gives (nothing was created).
	Configured bool
	// TokenFile holds an API token acting as User (for scripts and the CLI).
	TokenFile string
	// TokenCreated is true when the file was (re)written.
	TokenCreated bool
}

// BootstrapOptions are what the caller of Bootstrap chooses.
type BootstrapOptions struct {
	// EndSessions ends every console session stored in the bucket (API
	// tokens stay). `airlock dev` sets it: while dev is down, any local
	// process may listen on its console's port and collect the session
	// cookie an open tab sends there, and that cookie must decide nothing
	// on the next dev. A production console with replicas must not set it:
	// one replica starting would sign everyone out.
	EndSessions bool
}

// TokenFileName is the admin token's file in the data directory.
const TokenFileName = "admin.token"

// Bootstrap prepares a fresh `airlock dev` installation: when no configured
// user has the admin role, it creates the user "admin" with a random
// password (stored as a bcrypt hash in the console bucket; returned once),
// and it makes sure <dataDir>/admin.token holds a valid API token of the
// admin. Running it again changes nothing while the token is valid, but
// for the sessions opts.EndSessions ends.
func Bootstrap(ctx context.Context, deps svc.Deps, dataDir string, opts BootstrapOptions) (FirstAdmin, error) {
	kv, err := deps.JS.KeyValue(ctx, deps.Config.Buckets.Console)
	if err != nil {
		return FirstAdmin{}, fmt.Errorf("console bucket %s: %w", deps.Config.Buckets.Console, err)
	}
	st, err := newStore(kv, deps.Config.Console, time.Now)
	if err != nil {
		return FirstAdmin{}, err
	}
	if opts.EndSessions {
		if err := st.endAllSessions(ctx); err != nil {
			return FirstAdmin{}, err
		}
	}
	out := FirstAdmin{User: "admin", Groups: []string{"reviewers"}, TokenFile: filepath.Join(dataDir, TokenFileName)}
	configured := false
	for _, u := range deps.Config.Console.Users {
		if slices.Contains(u.Roles, config.RoleAdmin) {
			out.User, out.Groups, configured = u.Name, u.Groups, true
			out.Configured = true
			break
		}
	}
	if !configured {
		password := randomSecret(15)
		err := st.createUser(ctx, out.User, password, []string{config.RoleAdmin}, out.Groups)
		switch {
		case err == nil:
			out.Password = password
		case apierr.CodeOf(err) == apierr.Conflict:
		default:
			return out, err
		}
	}
	if raw, err := os.ReadFile(out.TokenFile); err == nil {
		if tok, err := st.token(ctx, strings.TrimSpace(string(raw))); err == nil && tok.Owner == out.User {
			return out, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return out, fmt.Errorf("read %s: %w", out.TokenFile, err)
	}
	secret, _, err := st.newToken(ctx, tokenRecord{Name: "admin.token (airlock dev)", Kind: TokenPersonal, Owner: out.User}, 0)
	if err != nil {
		return out, err
	}
	if err := os.WriteFile(out.TokenFile, []byte(secret+"\n"), 0o600); err != nil {
		return out, fmt.Errorf("write %s: %w", out.TokenFile, err)
	}
	out.TokenCreated = true
	return out, nil
}

// HashPassword returns the bcrypt hash of password for console.users[].password_hash.
func HashPassword(password string) (string, error) {
	if len(password) < 12 {
		return "", fmt.Errorf("the password is %d characters long: use at least 12", len(password))
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}
