package remote_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	_ "github.com/sealbench/sealbench/provision/targets"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

func specsOn(t *testing.T, h *sshtest.Host, kinds ...string) []remote.Spec {
	t.Helper()
	var list []string
	for _, k := range kinds {
		list = append(list, fmt.Sprintf("%s@ssh://%s@%s:%d", k, h.User, h.Addr, h.Port))
	}
	specs, err := remote.ParseSpecs(list)
	if err != nil {
		t.Fatal(err)
	}
	return specs
}

// TestDoctorLooksAtAHostOverSSH asks a fake host what it has, once for
// the two targets that name it, and says of each whether it could run
// there and why not.
func TestDoctorLooksAtAHostOverSSH(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	specs := specsOn(t, h, "local", "docker", "lima")
	r := remote.Doctor(context.Background(), specs, remote.Options{Identity: h.ClientKey, KnownHosts: h.KnownHosts})
	checks := map[string]provision.Check{}
	for _, c := range r.Checks {
		if c.Host != specs[0].Host.String() {
			t.Errorf("check %s is of host %q, want %s", c.Name, c.Host, specs[0].Host)
		}
		if _, dup := checks[c.Name]; dup {
			t.Errorf("check %s made twice: the host is looked at once", c.Name)
		}
		checks[c.Name] = c
		if !c.OK && c.Fix == "" {
			t.Errorf("check %s fails without saying what to do: %+v", c.Name, c)
		}
	}
	// The fake host is this machine: root (the tests run as root), Linux,
	// coreutils, /dev/fuse (asked for the local target).
	for _, name := range []string{remote.CheckSSH, remote.CheckLinux, remote.CheckRoot, remote.CheckSHA256Sum, remote.CheckFUSE} {
		if c, ok := checks[name]; !ok || !c.OK {
			t.Errorf("check %s: %+v (all: %+v)", name, c, r.Checks)
		}
	}
	if !strings.HasPrefix(checks[remote.CheckLinux].Detail, "Linux ") || checks[remote.CheckRoot].Detail != "logged in as uid 0" {
		t.Errorf("details: %+v", r.Checks)
	}
	if _, ok := checks[remote.CheckDockerd]; !ok {
		t.Errorf("no dockerd check, with a docker target on the host: %+v", r.Checks)
	}
	if len(r.Targets) != 3 {
		t.Fatalf("targets: %+v", r.Targets)
	}
	for _, tr := range r.Targets {
		reg, _ := provision.Lookup(strings.SplitN(tr.Target, "-", 2)[0])
		if tr.Host != specs[0].Host.String() {
			t.Errorf("%s: host %q", tr.Target, tr.Host)
		}
		if reg.Remote == nil && (tr.Ready || !strings.Contains(tr.Note, "cannot run "+reg.Name+" on a remote host")) {
			t.Errorf("%s is said ready, or without why not: %+v", tr.Target, tr)
		}
	}
	// The connection is closed: sshd's session process goes with it.
	var sessions []int
	for range 100 {
		if sessions = h.Sessions(); len(sessions) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(sessions) != 0 {
		t.Errorf("the doctor left its connection open: sessions %v", sessions)
	}
}

// TestDoctorSaysWhyAHostCannotBeReached: an unknown host key and a host
// that is not there are each a failed ssh check with what to do, and
// nothing more is looked at.
func TestDoctorSaysWhyAHostCannotBeReached(t *testing.T) {
	h := sshtest.Start(t, "127.0.0.2")
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := remote.Doctor(context.Background(), specsOn(t, h, "docker"), remote.Options{Identity: h.ClientKey, KnownHosts: empty})
	if len(r.Checks) != 1 || r.Checks[0].OK || r.Checks[0].Name != remote.CheckSSH ||
		!strings.Contains(r.Checks[0].Detail, h.KnownHostsLine()) || !strings.Contains(r.Checks[0].Fix, empty) {
		t.Errorf("unknown host key: %+v", r.Checks)
	}
	if len(r.Targets) != 1 || r.Targets[0].Ready {
		t.Errorf("a target on an unreachable host is ready: %+v", r.Targets)
	}

	specs := specsOn(t, h, "local")
	h.Stop()
	r = remote.Doctor(context.Background(), specs, remote.Options{Identity: h.ClientKey, KnownHosts: h.KnownHosts})
	if len(r.Checks) != 1 || r.Checks[0].OK || !strings.Contains(r.Checks[0].Detail, "connecting to") || !strings.Contains(r.Checks[0].Fix, "sshd listens on") {
		t.Errorf("a host that is not there: %+v", r.Checks)
	}
}
