package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/shared/config"
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
	st, err := os.Stat(c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("audit key file %s: %w (create one with `airlock audit keygen --out %s`)", c.KeyFile, err, c.KeyFile)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("audit key file %s can be read by others (mode %04o): run `chmod 600 %s`", c.KeyFile, st.Mode().Perm(), c.KeyFile)
	}
	raw, err := os.ReadFile(c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("audit key file %s: %w", c.KeyFile, err)
	}
	k, err := record.ParseKey(string(raw))
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
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("audit key file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write audit key file %s: %w (an existing key is never overwritten)", path, err)
	}
	if _, err := f.WriteString(text + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("write audit key file %s: %w", path, err)
	}
	return f.Close()
}
