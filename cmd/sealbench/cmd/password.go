//go:build !sealbench_bundle

package cmd

import (
	"bytes"
	"fmt"
	"os"

	"golang.org/x/term"

	"github.com/sealbench/sealbench/bundle/sign"
)

// readPassword takes the private key's password from $SEALBENCH_PASSWORD
// (which may be empty), or asks on the terminal. It never prints it.
func readPassword(g *global, confirm bool) ([]byte, error) {
	if pw, ok := os.LookupEnv(sign.PasswordEnv); ok {
		return []byte(pw), nil
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return nil, usageErrorf("set "+sign.PasswordEnv+" (an empty value is allowed) when there is no terminal to ask on",
			"no password for the private key: %s is not set and stdin is not a terminal", sign.PasswordEnv)
	}
	fmt.Fprint(g.stderr, "Password for the private key: ")
	pw, err := term.ReadPassword(fd)
	fmt.Fprintln(g.stderr)
	if err != nil {
		return nil, fmt.Errorf("reading password: %w", err)
	}
	if confirm {
		fmt.Fprint(g.stderr, "Password again: ")
		again, err := term.ReadPassword(fd)
		fmt.Fprintln(g.stderr)
		if err != nil {
			return nil, fmt.Errorf("reading password: %w", err)
		}
		if !bytes.Equal(pw, again) {
			return nil, usageErrorf("", "the two passwords differ")
		}
	}
	return pw, nil
}
