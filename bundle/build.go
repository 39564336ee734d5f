package bundle

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sealbench/sealbench/internal/toolexec"
)

// versionVar is the variable -X sets in every shipped binary.
const versionVar = Module + "/internal/version.Version"

// buildEnv is the environment every shipped binary is built with, apart
// from GOOS and GOARCH: pinned so that the user's own settings (GOFLAGS,
// GOAMD64, GOEXPERIMENT, a workspace) cannot change the bytes.
var buildEnv = []string{
	"CGO_ENABLED=0",
	"GOFLAGS=",
	"GOWORK=off",
	"GOEXPERIMENT=",
	"GOAMD64=v1",
	"GOARM64=v8.0",
	"GOTOOLCHAIN=local",
}

// buildFlags returns the go build flags for a shipped binary.
func buildFlags(version string) []string {
	return []string{
		"-trimpath",
		"-buildvcs=false",
		"-mod=readonly",
		"-tags=" + ShippedBuildTags,
		"-ldflags=-buildid= -s -w -X " + versionVar + "=" + version,
	}
}

// goVersion asks the go command which Go it is.
func goVersion(ctx context.Context, goBin, root string) (string, error) {
	cmd := toolexec.Command(ctx, goBin, "env", "GOVERSION")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), buildEnv...)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("asking %s for its version: %w", goBin, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildPlatform builds every Part for one platform into dir.
func buildPlatform(ctx context.Context, goBin, root string, p Platform, flags, extraEnv []string, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := append([]string{"build"}, flags...)
	args = append(args, "-o", dir+string(filepath.Separator))
	parts := PartsFor(p)
	for _, part := range parts {
		args = append(args, part.Package)
	}
	// The go command and the compilers it starts die with seal, however
	// it ends.
	cmd := toolexec.Command(ctx, goBin, args...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), extraEnv...), buildEnv...)
	cmd.Env = append(cmd.Env, "GOOS="+p.OS, "GOARCH="+p.Arch)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building for %s: go %s: %w\n%s", p, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	// go build names each binary after its package directory; make sure
	// each part came out under its own name.
	for _, part := range parts {
		if _, err := os.Stat(filepath.Join(dir, part.Name)); err != nil {
			return fmt.Errorf("building for %s: %s did not produce %s: %w", p, part.Package, part.Name, err)
		}
	}
	return nil
}
