package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ids"
)

// EnsureSeed returns the public key of the nkey user whose seed is in file,
// creating the file (mode 0600) with a new seed when it does not exist.
func EnsureSeed(file string) (string, error) {
	if pub, err := SeedPublicKey(file); !errors.Is(err, os.ErrNotExist) {
		return pub, err
	}
	seed, pub, err := newUser()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(file), err)
	}
	if err := os.WriteFile(file, append(seed, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("write nkey seed %s: %w", file, err)
	}
	return pub, nil
}

// SeedPublicKey returns the public key of the nkey user whose seed is in
// file, and writes nothing: a missing file is an error wrapping
// os.ErrNotExist (EnsureSeed creates it).
func SeedPublicKey(file string) (string, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read nkey seed %s: %w", file, err)
	}
	return publicOf(raw, file)
}

func newUser() (seed []byte, pub string, err error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", fmt.Errorf("create nkey: %w", err)
	}
	if seed, err = kp.Seed(); err != nil {
		return nil, "", fmt.Errorf("nkey seed: %w", err)
	}
	if pub, err = kp.PublicKey(); err != nil {
		return nil, "", fmt.Errorf("nkey public key: %w", err)
	}
	return seed, pub, nil
}

func publicOf(seed []byte, where string) (string, error) {
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return "", fmt.Errorf("%s does not hold an nkey seed: %w", where, err)
	}
	return kp.PublicKey()
}

// Credential is an agent's credential file: who it is, where airlock's NATS
// is, and the nkey seed it authenticates with. The server's configuration
// holds only the public key, with the agent's permissions.
type Credential struct {
	Agent string `json:"agent"`
	URL   string `json:"url"`
	Seed  string `json:"seed"`
	// TLS, when the server serves TLS with a private CA or asks for a
	// client certificate: {"ca_file", "cert_file", "key_file"}, each
	// relative to the credential file's directory unless absolute.
	TLS config.TLS `json:"tls,omitzero"`
}

// PublicKey of the credential's nkey.
func (c Credential) PublicKey() (string, error) {
	return publicOf([]byte(c.Seed), "credential of "+c.Agent)
}

// ReadCredential reads an agent credential file.
func ReadCredential(file string) (Credential, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return Credential{}, fmt.Errorf("read agent credential: %w", err)
	}
	var c Credential
	if err := json.Unmarshal(raw, &c); err != nil {
		return Credential{}, fmt.Errorf("agent credential %s is not JSON like {\"agent\",\"url\",\"seed\"}: %w", file, err)
	}
	if err := ids.ValidateAgent(c.Agent); err != nil {
		return Credential{}, fmt.Errorf("agent credential %s: %w", file, err)
	}
	if _, err := c.PublicKey(); err != nil {
		return Credential{}, err
	}
	if err := c.TLS.Validate("tls"); err != nil {
		return Credential{}, fmt.Errorf("agent credential %s: %w", file, err)
	}
	for _, p := range []*string{&c.TLS.CAFile, &c.TLS.CertFile, &c.TLS.KeyFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(filepath.Dir(file), *p)
		}
	}
	return c, nil
}

// NewCredential creates an agent credential file (mode 0600) for agent,
// refusing to overwrite one.
func NewCredential(file, agent, url string) (Credential, error) {
	if err := ids.ValidateAgent(agent); err != nil {
		return Credential{}, err
	}
	seed, _, err := newUser()
	if err != nil {
		return Credential{}, err
	}
	c := Credential{Agent: agent, URL: url, Seed: string(seed)}
	data, _ := json.MarshalIndent(c, "", "  ")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return Credential{}, fmt.Errorf("create %s: %w", filepath.Dir(file), err)
	}
	// Whole or not at all: a dev renders its accounts from every credential
	// it finds, and one read half-written was taken as empty.
	if err := writeWhole(file, append(data, '\n'), 0o600, false); err != nil {
		if errors.Is(err, os.ErrExist) {
			return Credential{}, fmt.Errorf("agent %s already has a credential at %s", agent, file)
		}
		return Credential{}, fmt.Errorf("write agent credential: %w", err)
	}
	return c, nil
}

// CredentialSuffix ends every agent credential file name: <agent>.creds.json.
const CredentialSuffix = ".creds.json"

// AgentCredentials reads every agent credential in dir, sorted by agent.
func AgentCredentials(dir string) ([]Credential, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read agent credentials in %s: %w", dir, err)
	}
	var out []Credential
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), CredentialSuffix) {
			continue
		}
		c, err := ReadCredential(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out, nil
}

// KeyPair is the credential's nkey, for signing the server's challenge.
func (c Credential) KeyPair() (nkeys.KeyPair, error) {
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(c.Seed)))
	if err != nil {
		return nil, fmt.Errorf("credential of %s does not hold an nkey seed: %w", c.Agent, err)
	}
	return kp, nil
}

// PublicKeysFile is the env file WriteServiceKeys writes next to the seeds.
const PublicKeysFile = "public-keys.env"

// WriteServiceKeys makes sure dir holds an nkey seed per service role and
// the admin (<role>.nk, kept when present) and writes dir/PublicKeysFile:
// one AIRLOCK_<ROLE>_NKEY=<public key> line per role, the variables the
// shipped nats-server configuration reads. It returns those lines.
func WriteServiceKeys(dir string) ([]string, error) {
	var lines []string
	for _, role := range append([]string{RoleAdmin}, ServiceRoles...) {
		pub, err := EnsureSeed(filepath.Join(dir, role+".nk"))
		if err != nil {
			return nil, err
		}
		lines = append(lines, strings.TrimPrefix(EnvVar(role), "$")+"="+pub)
	}
	body := "# Public nkeys of airlock's service users, read by nats-server (deploy/nats/airlock.conf).\n" + strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, PublicKeysFile), []byte(body), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Join(dir, PublicKeysFile), err)
	}
	return lines, nil
}
