//go:build !sealbench_bundle

package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/orchestrate"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runs"
	"github.com/sealbench/sealbench/sshx/sshtest"
)

// TestRunOnTwoHostsAndLocal is issue 20's main case, end to end through
// the command line with the real sealed bundle and Sandbox image: one
// `sealbench run --target local,local@ssh://...,docker@ssh://...` across
// this machine and two fake hosts (each its own sshd on its own loopback
// address, state directory and lock; the second with a dockerd of its
// own), reached with one identity and one known_hosts file. Each host's
// targets are sampled by the bundle's runner on that host; every
// verifier passes, the exact counts are equal on all three targets, the
// pins say where each target lives and where its runner ran, and the
// audit, here and on both hosts, finds nothing left.
func TestRunOnTwoHostsAndLocal(t *testing.T) {
	b := sealForRun(t)
	sshtest.Need(t)
	endpoint := testenv.PrivateDockerd(t)
	shortStateDir(t)
	s1, s2 := testenv.ShortTempDir(t, "sbh-"), testenv.ShortTempDir(t, "sbh-")
	h1 := sshtest.Start(t, "127.0.0.2", sshtest.SetEnv(runs.StateDirEnv, s1), sshtest.SetEnv(remote.LockEnv, filepath.Join(s1, "sealbench.lock")))
	h2 := sshtest.Start(t, "127.0.0.3", sshtest.SetEnv(runs.StateDirEnv, s2), sshtest.SetEnv(remote.LockEnv, filepath.Join(s2, "sealbench.lock")),
		sshtest.SetEnv("DOCKER_HOST", endpoint), sshtest.Authorize(h1))
	knownHosts := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(h1.KnownHostsLine()+"\n"+h2.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	targets := fmt.Sprintf("local,h1=local@ssh://%s@%s:%d,h2=docker@ssh://%s@%s:%d", h1.User, h1.Addr, h1.Port, h2.User, h2.Addr, h2.Port)
	out := t.TempDir()
	code, stdout, stderr := run(t, "run", "--json", "--target", targets, "--ssh-identity", h1.ClientKey, "--ssh-known-hosts", knownHosts,
		"--bundle", b.Dir, "--key", b.PubKey, "--id", b.Name, "--cells", "C01,C09", "--samples", "1", "--seed", "1", "--out", out)
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var o orchestrate.RunOutcome
	if err := json.Unmarshal([]byte(stdout), &o); err != nil {
		t.Fatalf("run --json: %v\n%s", err, stdout)
	}
	if o.Samples != 6 || o.Failed != 0 || o.Kept || len(o.Leftovers) != 0 || len(o.Targets) != 3 {
		t.Errorf("outcome: %+v", o)
	}
	samples, err := manifests.ReadSamplesFile(filepath.Join(out, "samples.jsonl"))
	if err != nil || len(samples) != 6 {
		t.Fatalf("%d samples, %v", len(samples), err)
	}
	byCell := map[string]map[string]manifests.Sample{}
	for _, s := range samples {
		if s.Status != manifests.StatusOK || s.Verifier != manifests.VerifierPass || s.Files == 0 || s.FUSETotal() == 0 {
			t.Errorf("%s %s: %+v", s.Target, s.Cell, s)
		}
		if byCell[s.Cell] == nil {
			byCell[s.Cell] = map[string]manifests.Sample{}
		}
		byCell[s.Cell][s.Target] = s
	}
	for cell, by := range byCell {
		l := by["local"]
		for _, name := range []string{"h1", "h2"} {
			r, ok := by[name]
			if !ok || r.Files != l.Files || r.Bytes != l.Bytes || r.Statements != l.Statements {
				t.Errorf("%s on %s did other work than on local: %+v, local %+v", cell, name, r, l)
			}
		}
	}
	var pins manifests.RunPins
	if b, err := os.ReadFile(filepath.Join(out, "pins.json")); err != nil || json.Unmarshal(b, &pins) != nil || len(pins.Targets) != 3 {
		t.Fatalf("pins.json: %v %+v", err, pins)
	}
	hosts := map[string]string{"local": "", "h1": fmt.Sprintf("ssh://%s@%s:%d", h1.User, h1.Addr, h1.Port), "h2": fmt.Sprintf("ssh://%s@%s:%d", h2.User, h2.Addr, h2.Port)}
	for _, p := range pins.Targets {
		want, ok := hosts[p.Name]
		if !ok || p.Host != want || p.RunnerHost != want || (p.Transport != "" && p.Transport != "socket") {
			t.Errorf("pins of %s: host %q, runner on %q, transport %q; want %q for both and a socket", p.Name, p.Host, p.RunnerHost, p.Transport, want)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), hosts["h1"]) || !strings.Contains(string(md), hosts["h2"]) {
		t.Errorf("report.md does not name both hosts (%v)", err)
	}
	// Nothing left: here, on each host's dockerd (the audit asks every host
	// the run used), and in each host's state directory.
	auditNothingLeft(t, "--ssh-identity", h1.ClientKey, "--ssh-known-hosts", knownHosts)
	for _, d := range []string{s1, s2} {
		if left, _ := filepath.Glob(filepath.Join(d, "remote", "*")); len(left) > 0 {
			t.Errorf("a host still holds %v", left)
		}
	}
}
