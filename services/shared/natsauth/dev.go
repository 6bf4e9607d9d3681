package natsauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// Dev is where `airlock dev` keeps the credentials it generates under its
// data dir: nkey seeds for its own services and the operator CLI, one
// credential file per agent, the two seal keys, and the rendered accounts
// configuration of its embedded NATS server. Everything is mode 0600.
type Dev struct{ DataDir string }

// FirstAgent is the agent `airlock dev` creates on its first start.
const FirstAgent = "bot"

// devRoles are the service users `airlock dev` runs: its services, the
// operator CLI, and the MCP gateway (a front-end with its own user, as in
// production, also when `airlock gateway --stdio` is launched by a client).
var devRoles = []string{RoleDev, RoleAdmin, RoleGateway}

// SeedFile is the nkey seed of a service role ("dev", "admin", "gateway").
func (d Dev) SeedFile(role string) string { return filepath.Join(d.DataDir, "keys", role+".nk") }

// DecisionKeyFile and FrontendKeyFile are the seal keys.
func (d Dev) DecisionKeyFile() string { return filepath.Join(d.DataDir, "keys", "decision.key") }
func (d Dev) FrontendKeyFile() string { return filepath.Join(d.DataDir, "keys", "frontend.key") }

// OneTapKeyFile MACs the one-tap links of approval mails (email.one_tap),
// made when they are enabled without a key of their own.
func (d Dev) OneTapKeyFile() string { return filepath.Join(d.DataDir, "keys", "onetap.key") }

// AgentsDir holds one <agent>.creds.json per agent.
func (d Dev) AgentsDir() string { return filepath.Join(d.DataDir, "agents") }

// CredentialFile is an agent's credential file.
func (d Dev) CredentialFile(agent string) string {
	return filepath.Join(d.AgentsDir(), agent+CredentialSuffix)
}

// GatewayTokenFile is the bearer token of a gateway endpoint `airlock dev`
// configures for an agent.
func (d Dev) GatewayTokenFile(endpoint string) string {
	return filepath.Join(d.DataDir, "gateway", endpoint+".token")
}

// URLFile holds the URL of the embedded NATS server while `airlock dev`
// runs, so that `airlock agents add` can wait for it to take a new agent.
func (d Dev) URLFile() string { return filepath.Join(d.DataDir, "nats.url") }

// ConsoleURLFile holds the console's public URL while `airlock dev` runs,
// so that `airlock call` links to where the console really listens (its
// --http address), not to the default.
func (d Dev) ConsoleURLFile() string { return filepath.Join(d.DataDir, "console.url") }

// LockFile is held (flock) by the `airlock dev` that runs on the data dir,
// so that a second one refuses to start instead of sharing its NATS store.
func (d Dev) LockFile() string { return filepath.Join(d.DataDir, "dev.lock") }

// ConfigFile is the embedded server's accounts configuration.
func (d Dev) ConfigFile() string { return filepath.Join(d.DataDir, "nats-accounts.conf") }

// LoadedFile is a copy of ConfigFile as the running embedded server last
// loaded it (at its start and after each reload): `airlock agents add`
// waits until it names a new agent before connecting as that agent, so that
// no connection is refused (and logged as an authentication error, which
// reads like an attack) while the server still runs on the accounts before.
func (d Dev) LoadedFile() string { return filepath.Join(d.DataDir, "nats-accounts.loaded") }

// MarkLoaded records conf, the accounts configuration the server has just
// loaded, in LoadedFile.
func (d Dev) MarkLoaded(conf []byte) error {
	tmp := d.LoadedFile() + ".tmp"
	if err := os.WriteFile(tmp, conf, 0o600); err != nil {
		return fmt.Errorf("record the accounts loaded: %w", err)
	}
	if err := os.Rename(tmp, d.LoadedFile()); err != nil {
		return fmt.Errorf("record the accounts loaded: %w", err)
	}
	return nil
}

// Loaded says whether the running server has loaded the user whose public
// nkey is pub; marked is false when no server recorded what it loaded (an
// airlock dev from before LoadedFile, or none running).
func (d Dev) Loaded(pub string) (loaded, marked bool) {
	conf, err := os.ReadFile(d.LoadedFile())
	if err != nil {
		return false, false
	}
	return bytes.Contains(conf, []byte(pub)), true
}

// Ensure creates what is missing: service seeds, seal keys and, the first
// time (no agents dir yet), a credential for FirstAgent that connects to
// url. It then renders ConfigFile.
func (d Dev) Ensure(cfg config.Config, url string) error {
	for _, role := range devRoles {
		if _, err := EnsureSeed(d.SeedFile(role)); err != nil {
			return err
		}
	}
	for _, f := range []string{d.DecisionKeyFile(), d.FrontendKeyFile()} {
		if _, err := seal.Ensure(f); err != nil {
			return err
		}
	}
	if _, err := os.Stat(d.AgentsDir()); os.IsNotExist(err) {
		if _, err := NewCredential(d.CredentialFile(FirstAgent), FirstAgent, url); err != nil {
			return err
		}
	}
	_, err := d.Render(cfg)
	return err
}

// PointAgentsAt makes every agent credential under AgentsDir that names
// another port of this machine's loopback name url, where this dev's NATS
// listens now, and returns the agents rewritten. A credential records the
// URL of the start that wrote it: after a start on another port
// (--nats-port, or a start that failed because the port was taken), the
// SDK, `airlock call` and the hooks would dial the old one, reaching
// nothing or another airlock. A credential naming another host (set by
// hand: an agent in a container dials host.docker.internal) is left as
// it is, and so is anything but a regular file (a link is the operator's,
// and what it points at is not this dev's to write); each is replaced in
// one rename, keeping its mode and every field but url. What cannot be
// read or written is returned in skipped, for a warning: a credential
// dev cannot point is no reason not to start.
func (d Dev) PointAgentsAt(url string) (moved []string, skipped []error) {
	files, err := filepath.Glob(filepath.Join(d.AgentsDir(), "*"+CredentialSuffix))
	if err != nil {
		return nil, []error{err}
	}
	for _, file := range files {
		agent, err := pointAt(file, url)
		switch {
		case err != nil:
			skipped = append(skipped, err)
		case agent != "":
			moved = append(moved, agent)
		}
	}
	return moved, skipped
}

// pointAt rewrites the credential file to name url when it names another
// loopback port; it returns the agent when it did.
func pointAt(file, url string) (string, error) {
	fi, err := os.Lstat(file)
	if err != nil || !fi.Mode().IsRegular() {
		return "", err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read agent credential: %w", err)
	}
	var fields map[string]json.RawMessage // every field kept as stored
	var c Credential
	if err := json.Unmarshal(raw, &fields); err != nil || json.Unmarshal(raw, &c) != nil {
		return "", fmt.Errorf("agent credential %s is not JSON like {\"agent\",\"url\",\"seed\"}", file)
	}
	if c.URL == url || !onLoopback(c.URL) {
		return "", nil
	}
	fields["url"], _ = json.Marshal(url)
	data, _ := json.MarshalIndent(fields, "", "  ")
	if err := writeWhole(file, append(data, '\n'), fi.Mode().Perm(), true); err != nil {
		return "", fmt.Errorf("rewrite agent credential %s: %w", file, err)
	}
	return c.Agent, nil
}

// writeWhole puts data at file with mode perm as one step: it is written
// beside file under a name of its own, then renamed over file (replace) or
// linked to it, which fails when file exists. A reader (a dev rendering
// its accounts from every credential) sees the old file or the whole new
// one, never a part; a link planted at a fixed name is never followed.
func writeWhole(file string, data []byte, perm os.FileMode, replace bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".write-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a rename nothing is there; after a link, the second name
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if replace {
		return os.Rename(tmp.Name(), file)
	}
	return os.Link(tmp.Name(), file)
}

// onLoopback reports whether u names this machine's loopback (or no
// host), where airlock dev's NATS listens.
func onLoopback(u string) bool {
	parsed, err := neturl.Parse(u)
	if err != nil {
		return false
	}
	host := parsed.Hostname()
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Render writes ConfigFile from the seeds and the agent credentials present
// now, and reports whether its content changed (an agent was added or
// removed), in which case the server should reload it.
func (d Dev) Render(cfg config.Config) (bool, error) {
	spec := Spec{Config: cfg}
	users, err := d.Users()
	if err != nil {
		return false, err
	}
	for _, u := range users {
		if u.Agent != "" {
			spec.Agents = append(spec.Agents, u)
		} else {
			spec.Services = append(spec.Services, u)
		}
	}
	text, err := Accounts(spec)
	if err != nil {
		return false, err
	}
	text = "# Generated by `airlock dev` from " + d.DataDir + "/keys and " + d.AgentsDir() + "; do not edit.\n" + text
	if old, err := os.ReadFile(d.ConfigFile()); err == nil && bytes.Equal(old, []byte(text)) {
		return false, nil
	}
	if err := os.WriteFile(d.ConfigFile(), []byte(text), 0o600); err != nil {
		return false, fmt.Errorf("write %s: %w", d.ConfigFile(), err)
	}
	return true, nil
}

// Users are the NATS users of the dev credentials present now: its
// service roles and every agent credential. It only reads (it answers
// lookups, such as who a permission violation was): a missing service seed
// is an error, which Ensure, where `airlock dev` sets up, prevents.
func (d Dev) Users() ([]User, error) {
	var users []User
	for _, role := range devRoles {
		pub, err := SeedPublicKey(d.SeedFile(role))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: start `airlock dev` on %s to create it", err, d.DataDir)
		}
		if err != nil {
			return nil, err
		}
		users = append(users, User{Role: role, NKey: pub})
	}
	creds, err := AgentCredentials(d.AgentsDir())
	if err != nil {
		return nil, err
	}
	for _, c := range creds {
		pub, err := c.PublicKey()
		if err != nil {
			return nil, err
		}
		users = append(users, User{Agent: c.Agent, NKey: pub})
	}
	return users, nil
}

// Apply points cfg at the dev credentials: the services' nkey and the seal keys.
func (d Dev) Apply(cfg *config.Config, role string) {
	cfg.NATS.NkeySeedFile = d.SeedFile(role)
	if cfg.Security.DecisionKey == "" && cfg.Security.DecisionKeyFile == "" {
		cfg.Security.DecisionKeyFile = d.DecisionKeyFile()
	}
	if cfg.Security.FrontendKey == "" && cfg.Security.FrontendKeyFile == "" {
		cfg.Security.FrontendKeyFile = d.FrontendKeyFile()
	}
}
