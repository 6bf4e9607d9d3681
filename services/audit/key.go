package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// ErrNoKey is returned by LoadKey when neither audit.key nor audit.key_file is set.
var ErrNoKey = errors.New("no audit key: set audit.key_file (or AIRLOCK_AUDIT_KEY_FILE) to a file holding 64 hex characters, e.g. from `airlock audit keygen`, or AIRLOCK_AUDIT_KEY to the key itself")

// LoadKey reads the audit key from configuration: audit.key (hex) wins over
// audit.key_file. A key file that others can read is refused: whoever reads
// it can forge the trail.
func LoadKey(c config.Audit) (*record.Key, error) {
	if c.Key != "" {
		k, err := record.ParseKey(c.Key)
		if err != nil {
			return nil, fmt.Errorf("audit.key: %w", err)
		}
		return k, nil
	}
	if c.KeyFile == "" {
		return nil, ErrNoKey
	}
	text, err := seal.ReadSecretFile("audit key file", c.KeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (create one with `airlock audit keygen --out %s`)", err, c.KeyFile)
	}
	if err != nil {
		return nil, err
	}
	k, err := record.ParseKey(text)
	if err != nil {
		return nil, fmt.Errorf("audit key file %s: %w", c.KeyFile, err)
	}
	return k, nil
}

// EnsureKeyFile creates path with a new random key (mode 0600) when it does
// not exist yet, and reports whether it did. An existing file is kept.
func EnsureKeyFile(path string) (created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("audit key file %s: %w", path, err)
	}
	return true, WriteKeyFile(path)
}

// WriteKeyFile writes a new random key to path (mode 0600), refusing to
// overwrite an existing file: losing a key makes its trail unverifiable.
func WriteKeyFile(path string) error {
	_, text, err := record.GenerateKey()
	if err != nil {
		return err
	}
	if err := seal.CreateSecretFile(path, text+"\n"); err != nil {
		return fmt.Errorf("audit key file: %w", err)
	}
	return nil
}
