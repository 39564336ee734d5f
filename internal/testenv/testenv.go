// Package testenv holds the helpers tests use to ask what this machine can
// do, and to skip, with the reason, when it cannot.
//
// A skip is silent trouble in CI: a test that needs root, FUSE, Docker or
// QEMU and skips there tests nothing. So when SEALBENCH_TEST_DISALLOW_SKIP is
// set (.ci/run sets it), every skip made through this package fails the test
// instead, with the same reason.
package testenv

import (
	"bytes"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// DisallowSkipEnv is the environment variable that turns skips into failures.
const DisallowSkipEnv = "SEALBENCH_TEST_DISALLOW_SKIP"

// Skip skips the test with the reason, or fails it when skips are disallowed.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(DisallowSkipEnv) != "" {
		t.Fatalf("required test cannot run (%s is set): "+format, append([]any{DisallowSkipEnv}, args...)...)
	}
	t.Skipf(format, args...)
}

// NeedRoot skips unless the test runs as root.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (running as uid %d)", os.Geteuid())
	}
}

// NeedFUSE skips unless /dev/fuse can be opened for reading and writing.
func NeedFUSE(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		Skip(t, "needs /dev/fuse: %v", err)
		return
	}
	f.Close()
}

// NeedCommand skips unless name is on PATH, and returns its path.
func NeedCommand(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skip(t, "needs %s on PATH: %v", name, err)
	}
	return p
}

// Short skips in -short mode. Unlike the others it never fails: -short is
// asked for on purpose, so the skip is not a surprise.
func Short(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped in -short mode: %s", why)
	}
}

// ModuleRoot returns the directory of the repository's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside the sealbench module")
	}
	return filepath.Dir(gomod)
}

// StartSelf starts this test binary again as a helper process: it runs
// no test, so its TestMain becomes what env (added to this process's
// environment) asks for. Its stderr is this process's; its stdout is the
// reader returned, to read before waiting for it.
func StartSelf(t testing.TB, env ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// ShortTempDir makes a directory directly under os.TempDir, named
// prefix and a random suffix, and removes it when the test and the
// cleanups registered after this call are done. Its path is short, for the
// unix sockets made under it (at most 107 bytes), which a t.TempDir path,
// named after the test, can outgrow.
func ShortTempDir(t testing.TB, prefix string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Tool returns the tool $env names, or else path, where the Makefile
// builds it (`make tools`, into internal/toolcache's directory); it skips
// when there is neither.
func Tool(t testing.TB, path, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if _, err := os.Stat(path); err != nil {
		Skip(t, "needs %s: run `make tools` (or set %s): %v", filepath.Base(path), env, err)
	}
	return path
}

// NeedDocker skips unless the docker CLI is on PATH and a daemon answers it
// (at $DOCKER_HOST, or the default socket; .ci/run starts one with
// scripts/dockerd), and returns the CLI's path.
func NeedDocker(t testing.TB) string {
	t.Helper()
	docker := NeedCommand(t, "docker")
	if out, err := exec.Command(docker, "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		Skip(t, "needs a Docker daemon (start one with `scripts/dockerd start` and set DOCKER_HOST): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return docker
}

// NeedDockerRuntime skips unless the Docker daemon (NeedDocker) has the OCI
// runtime name: "runsc" comes from `make gvisor-tools`, which scripts/dockerd
// then adds when it starts.
func NeedDockerRuntime(t testing.TB, name string) {
	t.Helper()
	docker := NeedDocker(t)
	out, err := exec.Command(docker, "info", "--format", "{{range $k, $v := .Runtimes}}{{$k}} {{end}}").CombinedOutput()
	if err != nil || !slices.Contains(strings.Fields(string(out)), name) {
		Skip(t, "needs the Docker daemon to have the runtime %s (has: %s; `make gvisor-tools`, then restart scripts/dockerd): %v", name, strings.TrimSpace(string(out)), err)
	}
}

// update is the -update flag of every test binary that links this
// package.
var update = flag.Bool("update", false, "rewrite the golden files in testdata (Golden) instead of comparing with them")

// Update reports whether the test binary runs with -update: a test that
// writes fixtures beside its golden files writes them too.
func Update() bool { return *update }

// Golden compares got with the golden file testdata/name, after rewriting
// the file with got when the test binary runs with -update.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading golden file %s (run with -update to create it): %v", p, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended)\ngot:\n%s\nwant:\n%s", p, got, want)
	}
}

// Deps lists the packages outside the standard library that pkg links
// (`go list -deps`), itself included, as built for goos with CGO_ENABLED=0.
// It is how the dependency tests hold the import rules docs/architecture.md
// states.
func Deps(t testing.TB, goos, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg)
	cmd.Dir = ModuleRoot(t)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s (%s): %v", pkg, goos, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 1 {
		t.Fatalf("go list -deps %s listed %v: the check is not looking at the right thing", pkg, deps)
	}
	return deps
}

// Forbidden returns the deps that one of the patterns names: a pattern
// ending in "/" names every package under it, any other names one package.
func Forbidden(deps []string, patterns ...string) []string {
	var bad []string
	for _, d := range deps {
		for _, p := range patterns {
			if d == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(d, p)) {
				bad = append(bad, d)
				break
			}
		}
	}
	return bad
}

// OnlyDeps fails t when pkg, built for linux and for darwin, links a
// package outside the standard library that allowed does not name.
func OnlyDeps(t testing.TB, pkg string, allowed ...string) {
	t.Helper()
	for _, goos := range []string{"linux", "darwin"} {
		for _, d := range Deps(t, goos, pkg) {
			ok := false
			for _, a := range allowed {
				ok = ok || d == a
			}
			if !ok {
				t.Errorf("%s (%s) links %s", pkg, goos, d)
			}
		}
	}
}
