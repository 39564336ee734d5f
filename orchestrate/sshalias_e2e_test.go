package orchestrate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision/provisiontest"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// TestProvisionOnALocalHostByItsSSHAlias: `local@ssh://bench` works from
// ~/.ssh/config alone: the alias's HostName, Port, User, IdentityFile and
// UserKnownHostsFile, no --ssh-* flag and no agent. The target is named
// after the alias, the ledger and hosts.json name the host it resolves
// to (hosts.json the alias too, and no key or known_hosts path of the
// flags), the ssh -L command it prints names the alias, and OpenSSH's ssh
// given that configuration makes the printed endpoint answer with it; a
// teardown with no flags reaches the host the same way and leaves nothing
// there.
func TestProvisionOnALocalHostByItsSSHAlias(t *testing.T) {
	sshtest.Need(t)
	hostState := testenv.ShortTempDir(t, "sbh-")
	h := sshtest.Start(t, "127.0.0.2", sshtest.SetEnv(runs.StateDirEnv, hostState))
	b := provisiontest.GetBundle(t)
	ctx := context.Background()
	opened := openBundle(t, b)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("Host bench\n    HostName %s\n    Port %d\n    User %s\n    IdentityFile %s\n    UserKnownHostsFile %s\n",
		h.Addr, h.Port, h.User, h.ClientKey, h.KnownHosts)
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", "")

	specs, err := orchestrate.CheckTargets([]string{"local@ssh://bench"})
	if err != nil {
		t.Fatal(err)
	}
	spec := specs[0]
	hostName := fmt.Sprintf("ssh://%s@%s:%d", h.User, h.Addr, h.Port)
	if spec.Name != "local-bench" || spec.Host.String() != hostName || spec.Host.Alias != "bench" {
		t.Fatalf("local@ssh://bench is %s on %s (alias %q); want local-bench on %s", spec.Name, spec.Host, spec.Host.Alias, hostName)
	}
	state := testenv.ShortTempDir(t, "sbh-")
	out, err := orchestrate.Provision(ctx, orchestrate.ProvisionOptions{Target: spec.Name, Remote: &spec, Bundle: opened, StateDir: state, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	// The forward it prints is for the user's ssh, which reads the same
	// configuration for the alias.
	if out.Host != hostName || out.Identity.Host != hostName || !strings.HasPrefix(out.Forward, "ssh ") || !strings.HasSuffix(out.Forward, " "+h.User+"@bench") {
		t.Errorf("provisioned %+v: want the stand-in up on %s, and a forward to %s@bench", out, hostName, h.User)
	}
	// OpenSSH's ssh reads the configuration of the home in the password
	// database, not $HOME's: -F gives it the test's.
	sshCmd := testenv.NeedCommand(t, "ssh")
	opts := []string{"-F", filepath.Join(home, ".ssh", "config"), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"}
	provisiontest.ForwardAnswers(t, sshCmd, opts, out.Forward, out.Endpoint, opened.Image.ID.String(), "bench")
	hosts, err := runs.ReadHosts(out.RunDir)
	if rec := hosts[hostName]; err != nil || rec.Alias != "bench" || rec.Identity != "" || rec.KnownHosts != "" {
		t.Errorf("hosts.json: %+v (%v); want %s by its alias bench, no paths of flags", hosts, err, hostName)
	}
	if left, _ := filepath.Glob(filepath.Join(runs.HostRunsDir(hostState), "*")); len(left) == 0 {
		t.Fatalf("nothing of the run on the host")
	}
	if _, err := orchestrate.Teardown(ctx, orchestrate.TeardownOptions{Run: out.Run, StateDir: state, Log: t.Logf}); err != nil {
		t.Fatalf("teardown with no ssh flags: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(runs.HostRunsDir(hostState), "*")); len(left) > 0 {
		t.Errorf("the host still holds %v", left)
	}
}
