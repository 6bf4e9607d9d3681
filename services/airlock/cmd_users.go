package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/console"
)

func newUsersCmd(_ *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Console users: make password hashes for the configuration",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "hash-password",
		Short: "Read a password on stdin and print its bcrypt hash for console.users[].password_hash",
		Long: `Reads one line (the password) from stdin and prints its bcrypt hash, e.g.

  printf '%s\n' "$PASSWORD" | airlock users hash-password

Put the hash in the configuration:

  console:
    users:
      - name: alice
        password_hash: $2a$10$...
        roles: [reviewer]
        groups: [reviewers]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				fmt.Fprint(os.Stderr, "password (echoed; prefer piping it in): ")
			}
			line, err := bufio.NewReader(os.Stdin).ReadString('\n')
			if err != nil && line == "" {
				return fmt.Errorf("read the password from stdin: %w", err)
			}
			h, err := console.HashPassword(strings.TrimRight(line, "\r\n"))
			if err != nil {
				return err
			}
			fmt.Println(h)
			return nil
		},
	})
	return cmd
}
