package cells

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// Check is one verifier check: a POSIX sh script run in the workspace,
// with the body's standard output on its standard input, that must print
// Want (surrounding white space aside) and exit 0. It is the same in every
// suite, and so suite.json's.
type Check = manifests.SuiteCheck

// Verifier is a cell's verifier: checks that all must pass.
type Verifier struct {
	Cell   string  `json:"cell"`
	Checks []Check `json:"checks"`
}

// Verification is what a verifier found.
type Verification struct {
	Pass   bool
	Detail string // every failed check, "; "-separated; empty on a pass
	Files  int64  // regular files in the workspace
	Bytes  int64  // their total size
}

// Shell runs scripts in a workspace. Sh runs script with /bin/sh -c, the
// workspace as its working directory and stdin as its standard input, and
// returns its standard output. It MUST return a *ScriptError when the
// script ran and exited non-zero, and another error only when the script
// could not be run at all (or ctx ended).
type Shell interface {
	Sh(ctx context.Context, script string, stdin []byte) ([]byte, error)
}

// ScriptError says that a script ran and exited non-zero.
type ScriptError struct {
	ExitCode int
	Stderr   string
}

func (e *ScriptError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("exit status %d", e.ExitCode)
	}
	return fmt.Sprintf("exit status %d: %s", e.ExitCode, e.Stderr)
}

// Verify runs every check (never stopping at the first failure) and the
// inventory, and says what it found. It returns an error only when a check
// could not be run; a check that fails is a Verification with Pass false.
func (v Verifier) Verify(ctx context.Context, sh Shell, bodyStdout []byte) (Verification, error) {
	var failed []string
	for _, c := range v.Checks {
		out, err := sh.Sh(ctx, c.Script, bodyStdout)
		var se *ScriptError
		switch {
		case errors.As(err, &se):
			failed = append(failed, fmt.Sprintf("%s: %v", c.Name, se))
		case err != nil:
			return Verification{}, fmt.Errorf("verifying %s, check %q: %w", v.Cell, c.Name, err)
		case strings.TrimSpace(string(out)) != c.Want:
			failed = append(failed, fmt.Sprintf("%s: got %q, want %q", c.Name, clip(strings.TrimSpace(string(out)), 200), c.Want))
		}
	}
	res := Verification{Pass: len(failed) == 0, Detail: strings.Join(failed, "; ")}
	out, err := sh.Sh(ctx, inventoryScript, nil)
	if err != nil {
		return Verification{}, fmt.Errorf("verifying %s, counting files: %w", v.Cell, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return Verification{}, fmt.Errorf("verifying %s, counting files: unexpected output %q", v.Cell, clip(string(out), 200))
	}
	if res.Files, err = strconv.ParseInt(f[0], 10, 64); err == nil {
		res.Bytes, err = strconv.ParseInt(f[1], 10, 64)
	}
	if err != nil {
		return Verification{}, fmt.Errorf("verifying %s, counting files: %w", v.Cell, err)
	}
	return res, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// BodyScript is the script that runs the body file at path in the
// workspace with a fresh /bin/sh.
func BodyScript(path string) string { return "exec /bin/sh " + shellQuote(path) }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// LocalShell runs scripts with this machine's /bin/sh in Dir, with a small
// fixed environment, each bounded by Timeout. It is how a native
// reference runs, and how the registry test runs every cell.
type LocalShell struct {
	Dir string
}

var _ Shell = LocalShell{}

// Sh implements Shell.
func (l LocalShell) Sh(ctx context.Context, script string, stdin []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Dir = l.Dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C", "TZ=UTC"}
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("running a script in %s: %w", l.Dir, ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return stdout.Bytes(), &ScriptError{ExitCode: ee.ExitCode(), Stderr: clip(strings.TrimSpace(stderr.String()), 500)}
	}
	if err != nil {
		return nil, fmt.Errorf("running a script in %s: %w", l.Dir, err)
	}
	return stdout.Bytes(), nil
}
