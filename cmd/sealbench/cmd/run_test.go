//go:build !sealbench_bundle

package cmd

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
)

// TestRunOnLocalAndDocker is the whole chain on real targets: seal this
// tree with its Sandbox image, provision local, run cells with --native on
// it and on dockerd, check every sample passed its verifier with the same
// exact counts on both, that a report compares them, then tear down and
// audit.
func TestRunOnLocalAndDocker(t *testing.T) {
	testenv.Short(t, "seals a bundle and runs cells on two targets")
	testenv.NeedRoot(t)
	testenv.NeedFUSE(t)
	testenv.NeedCommand(t, "apt-get")
	docker := testenv.NeedDocker(t)
	t.Setenv("SEALBENCH_PASSWORD", "")
	keys, out := t.TempDir(), t.TempDir()
	state, err := os.MkdirTemp("", "sbr-") // short: the stand-in's socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	t.Setenv(provision.StateDirEnv, state)
	if code, _, stderr := run(t, "keygen", "--out", keys); code != ExitOK {
		t.Fatalf("keygen: %s", stderr)
	}
	code, stdout, stderr := run(t, "seal", "--json", "--key", filepath.Join(keys, "sealbench.key"), "--out", out, "--source", testenv.ModuleRoot(t))
	if code != ExitOK {
		t.Fatalf("seal: exit %d\n%s", code, stderr)
	}
	var sealed struct {
		Name, Dir string
		Image     struct{ Ref string }
	}
	json.Unmarshal([]byte(stdout), &sealed)
	pub := filepath.Join(keys, "sealbench.pub")

	code, stdout, stderr = run(t, "provision", "local", "--bundle", sealed.Dir, "--key", pub, "--json")
	if code != ExitOK {
		t.Fatalf("provision local: exit %d\n%s", code, stderr)
	}
	var p struct{ Run, Endpoint string }
	json.Unmarshal([]byte(stdout), &p)
	t.Cleanup(func() { run(t, "teardown", "--run", p.Run) })
	t.Cleanup(func() { exec.Command(docker, "rmi", "--force", sealed.Image.Ref).Run() })

	cells := "C01,C09,C11,C12"
	dockerHost := os.Getenv("DOCKER_HOST")
	if dockerHost == "" {
		dockerHost = "unix:///var/run/docker.sock"
	}
	dirs := map[string]string{}
	for name, engine := range map[string]string{"local": p.Endpoint, "docker": dockerHost} {
		dirs[name] = filepath.Join(t.TempDir(), name)
		code, stdout, stderr := run(t, "run", "--engine", engine, "--name", name, "--bundle", sealed.Dir, "--key", pub,
			"--id", sealed.Name, "--cells", cells, "--native", "--seed", "1", "--out", dirs[name])
		if code != ExitOK {
			t.Fatalf("run on %s: exit %d\n%s\n%s", name, code, stdout, stderr)
		}
		f, err := os.Open(filepath.Join(dirs[name], "samples.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		samples, err := manifests.ReadSamples(f)
		f.Close()
		if err != nil || len(samples) != 4 {
			t.Fatalf("%s: %d samples, %v", name, len(samples), err)
		}
		for _, s := range samples {
			if s.Status != manifests.StatusOK || s.Verifier != manifests.VerifierPass || s.CommandNs <= 0 || s.NativeNs == nil ||
				s.MountNs <= 0 || s.FUSETotal() == 0 || s.Files == 0 {
				t.Errorf("%s %s: %+v", name, s.Cell, s)
			}
		}
		if _, err := os.Stat(filepath.Join(dirs[name], "report.md")); err != nil {
			t.Errorf("%s: no report.md: %v", name, err)
		}
	}
	// One report over both: the files and bytes each cell left are the same
	// work on both targets.
	code, stdout, stderr = run(t, "report", "--format", "json", "--baseline", "docker", dirs["docker"], dirs["local"])
	var rep struct {
		Differences []struct {
			Cell, Count string
			Values      map[string]string
		}
	}
	if code != ExitOK || json.Unmarshal([]byte(stdout), &rep) != nil {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	for _, d := range rep.Differences {
		if d.Count == "files" || d.Count == "bytes" || d.Count == "result" {
			t.Errorf("the two targets did different work: %s %s: %v", d.Cell, d.Count, d.Values)
		}
	}
	code, _, stderr = run(t, "teardown", "--run", p.Run)
	if code != ExitOK {
		t.Errorf("teardown: %s", stderr)
	}
	if code, stdout, _ := run(t, "audit", "--run", p.Run); code != ExitOK {
		t.Errorf("audit after the run: exit %d\n%s", code, stdout)
	}
}
