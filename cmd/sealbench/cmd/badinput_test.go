//go:build !sealbench_bundle

package cmd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/bundle/attest"
	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/internal/testenv"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// badFixture is what the bad-input table works on, all under Root: a key
// pair, a small signed bundle and its tar (no build: one cell body), the
// same tar damaged in each way a copy can damage it, keys of the wrong
// kind, a run's results, a tree that is not sealbench's, a plain file.
type badFixture struct {
	Root, State                  string
	Priv, Pub, P384, EmptyKey    string
	Bundle, Tar, Name            string
	CutTar, AppendedTar, GzTar   string
	TamperedTar, EmptyTar        string
	Run, RunLink, NotSource, Nil string // Nil: an empty directory, to stand in
	File                         string
	Source                       string // this sealbench tree
	Fifo, FifoRun                string // a fifo no one writes; a run whose samples.jsonl is one
}

func newBadFixture(t *testing.T) *badFixture {
	t.Helper()
	const pw = "bad-input-password"
	t.Setenv(sign.PasswordEnv, pw)
	root := t.TempDir()
	fx := &badFixture{Root: root, State: shortStateDir(t), Source: testenv.ModuleRoot(t)}
	p := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	write := func(rel string, b []byte) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p(rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p(rel)
	}
	var err error
	if fx.Priv, fx.Pub, err = sign.WriteKeyPair(p("keys"), []byte(pw), false); err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadPrivateKey(fx.Priv, []byte(pw))
	if err != nil {
		t.Fatal(err)
	}
	k384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	pem384, _ := cryptoutils.MarshalPublicKeyToPEM(k384.Public())
	fx.P384 = write("keys/p384.pub", pem384)
	fx.EmptyKey = write("keys/empty.pub", nil)

	// The bundle: one cell body, assembled and signed as seal does.
	out := p("out")
	os.MkdirAll(out, 0o755)
	staged, err := os.MkdirTemp(out, ".seal-")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(staged, "cells"), 0o755)
	os.WriteFile(filepath.Join(staged, "cells", "C01.sh"), []byte("echo one\n"), 0o644)
	res, err := bundle.Assemble(staged, out, manifests.BundleSource{
		Module: bundle.Module, Version: "0.1.0+g0123456789ab", Commit: "0123456789abcdef0123456789abcdef01234567",
		Time: time.Unix(1700000000, 0).UTC(), GoVersion: runtime.Version(), BuildFlags: []string{"-trimpath"},
		BuildEnv: []string{"CGO_ENABLED=0"}, Platforms: []string{"linux/" + runtime.GOARCH},
	}, signer, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	fx.Bundle, fx.Tar, fx.Name = res.Dir, res.Tar, res.Name

	// The tar, damaged: cut between two entries (no end marker), a second
	// archive appended, gzipped, a cell body changed, empty.
	whole, err := os.ReadFile(fx.Tar)
	if err != nil {
		t.Fatal(err)
	}
	// The header of manifest.sig, the last entry, starts with its name.
	lastHeader := bytes.Index(whole, []byte(fx.Name+"/"+manifests.SignatureFile+"\x00"))
	fx.CutTar = write("bad/cut/"+fx.Name+".tar", whole[:lastHeader])
	var extra bytes.Buffer
	tw := tar.NewWriter(&extra)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fx.Name + "/cells/C99.sh", Mode: 0o644, Size: 3})
	tw.Write([]byte("id\n"))
	tw.Close()
	fx.AppendedTar = write("bad/appended/"+fx.Name+".tar", append(bytes.Clone(whole), extra.Bytes()...))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(whole)
	zw.Close()
	fx.GzTar = write("bad/gz/"+fx.Name+".tar", gz.Bytes())
	i := bytes.Index(whole, []byte("echo one"))
	tampered := bytes.Clone(whole)
	tampered[i] = 'E'
	fx.TamperedTar = write("bad/tampered/"+fx.Name+".tar", tampered)
	fx.EmptyTar = write("bad/empty/"+fx.Name+".tar", nil)

	// A run's results, and a symlink to it (another spelling of its files).
	for _, n := range []string{manifests.SamplesFile, manifests.PinsFile} {
		b, err := os.ReadFile(filepath.Join(reportRun, n))
		if err != nil {
			t.Fatal(err)
		}
		fx.Run = filepath.Dir(write("runs/run-a/"+n, b))
	}
	fx.RunLink = p("runs/link")
	if err := os.Symlink(fx.Run, fx.RunLink); err != nil {
		t.Fatal(err)
	}
	fx.NotSource = filepath.Dir(write("other/go.mod", []byte("module example.com/other\n")))
	fx.Nil = p("nowhere")
	os.MkdirAll(fx.Nil, 0o755)
	fx.File = write("a-file", []byte("not a directory\n"))
	fx.Fifo = p("fifo")
	fx.FifoRun = p("runs/fifo-run")
	os.MkdirAll(fx.FifoRun, 0o755)
	for _, f := range []string{fx.Fifo, filepath.Join(fx.FifoRun, manifests.SamplesFile)} {
		if err := syscall.Mkfifo(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pins, _ := os.ReadFile(filepath.Join(fx.Run, manifests.PinsFile))
	write("runs/fifo-run/"+manifests.PinsFile, pins)
	return fx
}

// TestBadInput runs every command with each class of bad input a user
// gives (missing, wrong type, empty, truncated, tampered, too long, hostile
// path, out-of-range number, conflicting flags) and checks that each is
// refused early and clearly: the documented exit code, stderr naming the
// problem and the next step (a hint), and nothing created or changed in
// the state directory, the inputs or the output directories. Add to it as
// commands grow.
func TestBadInput(t *testing.T) {
	fx := newBadFixture(t)
	src := fx.Source
	long := "build-linux-" + strings.Repeat("a", 300)
	// A run made here and torn down: its directory is gone, the history
	// names it.
	const tornDown = "20200101T000000-aaaaaa"
	if err := os.WriteFile(filepath.Join(fx.State, runs.HistoryFile), []byte(tornDown+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name   string
		args   []string
		code   int
		want   []string // in stderr, beside "hint:"
		not    []string // not in stderr
		dir    string   // the working directory, when not this package's
		absent []string // paths outside Root that must not appear
	}
	tests := []tc{
		// keygen
		{name: "keygen --out a file", args: []string{"keygen", "--out", fx.File}, code: ExitUnusable, want: []string{"is a file", "directory"}},
		{name: "keygen over a key pair", args: []string{"keygen", "--out", filepath.Dir(fx.Priv)}, code: ExitUnusable, want: []string{"--force"}},

		// seal
		{name: "seal --out a file", args: []string{"seal", "--key", fx.Priv, "--source", src, "--out", fx.File}, code: ExitUnusable, want: []string{"is a file"}},
		{name: "seal --out under a file", args: []string{"seal", "--key", fx.Priv, "--source", src, "--out", filepath.Join(fx.File, "x")}, code: ExitUnusable, want: []string{"which is a file"}},
		{name: "seal --image-arch out of range", args: []string{"seal", "--key", fx.Priv, "--source", src, "--out", filepath.Join(fx.Root, "sealed"), "--image-arch", "sparc"},
			code: ExitUnusable, want: []string{`"sparc"`, "--image-arch takes", "--no-image"}, not: []string{"--lock"}},
		{name: "seal --source not sealbench", args: []string{"seal", "--key", fx.Priv, "--source", fx.NotSource, "--out", filepath.Join(fx.Root, "sealed")},
			code: ExitUnusable, want: []string{"not a sealbench source tree", "example.com/other", "--source"}},
		{name: "seal --source hostile path", args: []string{"seal", "--key", fx.Priv, "--source", "../../../../../../../../../etc", "--out", filepath.Join(fx.Root, "sealed")},
			code: ExitUnusable, want: []string{"not a sealbench source tree", "--source"}},
		{name: "seal outside a source tree", args: []string{"seal", "--key", fx.Priv, "--out", filepath.Join(fx.Root, "sealed")}, dir: fx.Nil,
			code: ExitUnusable, want: []string{"no go.mod", "checkout"}},
		{name: "seal --out inside the cell bodies", args: []string{"seal", "--key", fx.Priv, "--source", src, "--out", filepath.Join(src, bundle.CellsSourceDir, "out")},
			code: ExitUnusable, want: []string{"inside", "--out"}, absent: []string{filepath.Join(src, bundle.CellsSourceDir, "out")}},
		{name: "seal with a missing key", args: []string{"seal", "--key", filepath.Join(fx.Root, "absent.key"), "--source", src, "--out", filepath.Join(fx.Root, "sealed")},
			code: ExitUnusable, want: []string{"absent.key", "keygen"}},

		// inputs that must be regular files: refused, never waited on (a
		// fifo no one writes would block a reader forever) or read forever
		{name: "seal --key a fifo", args: []string{"seal", "--key", fx.Fifo, "--source", src, "--out", filepath.Join(fx.Root, "sealed")}, code: ExitUnusable,
			want: []string{fx.Fifo + " is a named pipe (fifo)", "check --key"}},
		{name: "seal --key a directory", args: []string{"seal", "--key", fx.Nil, "--source", src, "--out", filepath.Join(fx.Root, "sealed")}, code: ExitUnusable,
			want: []string{"is a directory", "check --key"}},
		{name: "verify --key a fifo", args: []string{"verify", fx.Bundle, "--key", fx.Fifo}, code: ExitUnusable, want: []string{"is a named pipe (fifo)", "check --key"}},
		{name: "verify --key a character device", args: []string{"verify", fx.Bundle, "--key", os.DevNull}, code: ExitUnusable, want: []string{"is a character device", "check --key"}},
		{name: "verify a fifo as the bundle", args: []string{"verify", fx.Fifo, "--key", fx.Pub}, code: ExitUnusable, want: []string{"neither a bundle directory nor a bundle tar"}},
		{name: "report --key a fifo", args: []string{"report", fx.Run, "--key", fx.Fifo, "--out", filepath.Join(fx.Nil, "r.md")}, code: ExitUnusable, want: []string{"is a named pipe (fifo)"}},
		{name: "report a fifo", args: []string{"report", fx.Fifo}, code: ExitUnusable, want: []string{"is a named pipe (fifo)", "RESULTS are"}},
		{name: "report a run whose samples are a fifo", args: []string{"report", fx.FifoRun}, code: ExitUnusable, want: []string{manifests.SamplesFile + " is a named pipe (fifo)", "RESULTS are"}},
		{name: "run --sign-key a fifo", args: []string{"run", "--target", "docker", "--bundle", fx.Bundle, "--key", fx.Pub, "--sign-key", fx.Fifo}, code: ExitUnusable,
			want: []string{"is a named pipe (fifo)"}},
		{name: "sample --plan a fifo", args: []string{"sample", "--plan", fx.Fifo}, code: ExitUnusable, want: []string{"is a named pipe (fifo)", "plan.json"}},
		{name: "sample --plan missing", args: []string{"sample", "--plan", filepath.Join(fx.Root, "absent.json")}, code: ExitUnusable, want: []string{"absent.json", "plan.json"}},
		{name: "image vm --lock a fifo", args: []string{"image", "vm", "--lock", fx.Fifo}, code: ExitUnusable, want: []string{"is a named pipe (fifo)", "--lock takes"}},
		{name: "image vm --lock missing", args: []string{"image", "vm", "--lock", filepath.Join(fx.Root, "absent.json")}, code: ExitUnusable, want: []string{"absent.json", "--lock takes"}},
		{name: "image export-debs --lock a fifo", args: []string{"image", "export-debs", "--out", filepath.Join(fx.Nil, "debs"), "--lock", fx.Fifo}, code: ExitUnusable,
			want: []string{"is a named pipe (fifo)", "--lock takes"}},
		// directories as outputs: a fifo is named for what it is, and left so
		{name: "seal --out a fifo", args: []string{"seal", "--key", fx.Priv, "--source", src, "--out", fx.Fifo}, code: ExitUnusable,
			want: []string{"is a named pipe (fifo); it takes a directory"}},
		{name: "keygen --out a fifo", args: []string{"keygen", "--out", fx.Fifo}, code: ExitUnusable, want: []string{"is a named pipe (fifo); it takes a directory"}},
		{name: "run --out a fifo", args: []string{"run", "--target", "docker", "--out", fx.Fifo, "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"is a named pipe (fifo); it takes a directory"}},

		// verify
		{name: "verify BUNDLE", args: []string{"verify", fx.Bundle, "--key", fx.Pub}, code: ExitOK},
		{name: "verify two bundles", args: []string{"verify", "--bundle", fx.Bundle, fx.Tar, "--key", fx.Pub}, code: ExitUnusable, want: []string{"two bundles"}},
		{name: "verify no bundle", args: []string{"verify", "--key", fx.Pub}, code: ExitUnusable, want: []string{"--bundle is required", "--bundle"}},
		{name: "verify a tar cut between entries", args: []string{"verify", fx.CutTar, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"truncated", "copy the tar again"}, not: []string{"unsigned", "--key"}},
		{name: "verify a tar with an archive appended", args: []string{"verify", fx.AppendedTar, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"follow the end-of-archive marker", "as seal wrote it"}},
		{name: "verify a gzipped tar", args: []string{"verify", fx.GzTar, "--key", fx.Pub}, code: ExitUnusable, want: []string{"gzip-compressed", "gunzip"}},
		{name: "verify an empty tar", args: []string{"verify", fx.EmptyTar, "--key", fx.Pub}, code: ExitUnusable, want: []string{"empty", "copy the tar again"}},
		{name: "verify a tampered tar", args: []string{"verify", fx.TamperedTar, "--key", fx.Pub}, code: ExitMismatch, want: []string{"cells/C01.sh", "do not use it"}},
		{name: "verify with a P-384 key", args: []string{"verify", fx.Bundle, "--key", fx.P384}, code: ExitUnusable, want: []string{"unsupported curve", "P-256", "keygen"}},
		{name: "verify with an empty key", args: []string{"verify", fx.Bundle, "--key", fx.EmptyKey}, code: ExitUnusable, want: []string{"no PEM block"}},
		{name: "verify --id too long", args: []string{"verify", fx.Bundle, "--key", fx.Pub, "--id", long}, code: ExitUnusable, want: []string{"not a bundle name", "--id takes"}},
		{name: "verify a hostile path", args: []string{"verify", "../../../../../../../../../etc", "--key", fx.Pub}, code: ExitUnusable, want: []string{"not a bundle", "bundle directory"}},

		// image
		{name: "image --out a file", args: []string{"image", "--bundle", fx.Bundle, "--key", fx.Pub, "--out", fx.File}, code: ExitUnusable, want: []string{"is a file", "directory"}},
		{name: "image --out inside the bundle", args: []string{"image", "--bundle", fx.Bundle, "--key", fx.Pub, "--out", filepath.Join(fx.Bundle, "img")},
			code: ExitUnusable, want: []string{"inside the bundle", "outside the bundle"}},
		{name: "image --bundle a tar", args: []string{"image", "--bundle", fx.Tar, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"is a file", "extract it"}, not: []string{"or its .tar"}},
		{name: "image --bundle missing", args: []string{"image", "--bundle", filepath.Join(fx.Root, "absent"), "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"no such file", "bundle directory"}, not: []string{"or its .tar"}},
		{name: "image --arch out of range", args: []string{"image", "--bundle", fx.Bundle, "--key", fx.Pub, "--arch", "sparc"}, code: ExitUnusable, want: []string{`"sparc"`, "--arch takes"}},
		{name: "image --variant unknown", args: []string{"image", "--bundle", fx.Bundle, "--key", fx.Pub, "--variant", "sandbox-go"}, code: ExitUnusable,
			want: []string{`no Sandbox image variant "sandbox-go"`, "--variant takes sandbox or sandbox-tools"}},

		{name: "image vm --size out of range", args: []string{"image", "vm", "--size", "-1G"}, code: ExitUnusable, want: []string{"--size", "4G"}},
		{name: "image vm --size too small", args: []string{"image", "vm", "--size", "10M"}, code: ExitUnusable, want: []string{"out of range", "2G to 4T"}},
		{name: "image vm --size not a size", args: []string{"image", "vm", "--size", "lots"}, code: ExitUnusable, want: []string{"not a size"}},
		{name: "image lock --out a file", args: []string{"image", "lock", "--out", fx.File}, code: ExitUnusable, want: []string{"is a file"}},
		{name: "image lock --images unknown", args: []string{"image", "lock", "--out", fx.Root, "--images", "sandbox-go"}, code: ExitUnusable,
			want: []string{`no image named "sandbox-go"`, "--images takes sandbox, sandbox-tools, vm or all"}},
		{name: "image export-debs --out a file", args: []string{"image", "export-debs", "--out", fx.File}, code: ExitUnusable, want: []string{"is a file"}},

		// run (fast paths only: every one is refused before a bundle is opened)
		{name: "run --engine not a URL", args: []string{"run", "--engine", "notaurl", "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"not an Engine URL", "unix:///"}},
		{name: "run --engine a relative socket", args: []string{"run", "--engine", "unix://engine.sock", "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"absolute", "unix:///"}},
		{name: "run --vm-cpus negative", args: []string{"run", "--target", "docker", "--vm-cpus", "-3", "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"--vm-cpus -3 is out of range", "--vm-cpus takes"}},
		{name: "run --vm-memory negative", args: []string{"run", "--target", "docker", "--vm-memory", "-1", "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"--vm-memory -1 is out of range", "MiB"}},
		{name: "run --samples too many", args: []string{"run", "--target", "docker", "--samples", "100000", "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"--samples 100000 is out of range", "--samples takes"}},
		{name: "run --samples not a number", args: []string{"run", "--target", "docker", "--samples", "five"}, code: ExitUnusable, want: []string{"--samples", "--help"}},
		{name: "run --out a file", args: []string{"run", "--target", "docker", "--out", fx.File, "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable, want: []string{"is a file"}},
		{name: "run --out an earlier run's results", args: []string{"run", "--target", "docker", "--out", fx.Run, "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"already holds a run's results", "a new directory"}},
		{name: "run --out inside the bundle", args: []string{"run", "--target", "docker", "--out", filepath.Join(fx.Bundle, "results"), "--bundle", fx.Bundle, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"inside the bundle"}},
		{name: "run --name too long", args: []string{"run", "--engine", "unix:///x.sock", "--name", strings.Repeat("a", 300)}, code: ExitUnusable, want: []string{"is not a target name"}},
		{name: "run --target empty", args: []string{"run", "--target", ","}, code: ExitUnusable, want: []string{`target "": empty`, "targets:"}},
		{name: "run --target a remote lima", args: []string{"run", "--target", "lima@ssh://root@gpu1"}, code: ExitUnusable,
			want: []string{"lima cannot run on a remote host", "targets that run on a remote host: local, docker"}},
		{name: "run --target a parameter docker does not take", args: []string{"run", "--target", "docker:runsc"}, code: ExitUnusable,
			want: []string{"docker takes nothing after a ':'", "targets that take one: kubernetes:RUNTIMECLASS"}},
		{name: "run --target a name after a kind that takes none", args: []string{"run", "--target", "local@gpu1"}, code: ExitUnusable,
			want: []string{`target "local@gpu1": local takes no name after its '@' (a cluster's node, a docker context); after its '@' comes a host`, "local@ssh://root@gpu1"}},
		{name: "run --target a node target named as a kind", args: []string{"run", "--target", "docker=kubernetes@w1"}, code: ExitUnusable,
			want: []string{"its name docker is a target kind's"}},
		{name: "run --target two node targets of one name", args: []string{"run", "--target", "kubernetes@w1,kubernetes:gvisor@w1"}, code: ExitUnusable,
			want: []string{"are both named kubernetes-w1", "name one (NAME=kubernetes:gvisor@w1)"}},
		{name: "run --target a RuntimeClass that is no name", args: []string{"run", "--target", "kubernetes:Run_C"}, code: ExitUnusable,
			want: []string{`"Run_C" after kubernetes: is not a parameter`}},
		{name: "run --kubeconfig missing", args: []string{"run", "--target", "kubernetes", "--kubeconfig", filepath.Join(fx.Root, "absent.kubeconfig")}, code: ExitUnusable,
			want: []string{"--kubeconfig", "absent.kubeconfig", "a kubeconfig file you can read"}},
		{name: "run --kube-warm-pool too large", args: []string{"run", "--target", "agent-sandbox-warm", "--kube-warm-pool", "9"}, code: ExitUnusable,
			want: []string{"--kube-warm-pool 9 is not from 1 to 8", "how many Sandboxes the warm pool keeps ready"}},
		{name: "run --kube-image no reference", args: []string{"run", "--target", "kubernetes", "--kube-image", "Registry/Not A Repo"}, code: ExitUnusable,
			want: []string{"--kube-image", "not a repository", "takes a registry repository"}},
		{name: "run --kube-containerd relative", args: []string{"run", "--target", "kubernetes", "--kube-containerd", "run/containerd.sock"}, code: ExitUnusable,
			want: []string{"--kube-containerd", "not an absolute path"}},
		{name: "run --target a password", args: []string{"run", "--target", "docker@ssh://root:pw@gpu1"}, code: ExitUnusable,
			want: []string{"never sends a password", "--ssh-identity"}},
		{name: "run --target a named local target", args: []string{"run", "--target", "fast=docker"}, code: ExitUnusable,
			want: []string{"named by its kind", "fast=docker@ssh://"}},
		{name: "run --target no user", args: []string{"run", "--target", "docker@ssh://gpu1"}, code: ExitUnusable, want: []string{"no user", "ssh://USER@gpu1"}},
		{name: "run --ssh-identity missing", args: []string{"run", "--target", "docker", "--ssh-identity", filepath.Join(fx.Root, "absent_ed25519")}, code: ExitUnusable,
			want: []string{"--ssh-identity", "absent_ed25519", "a file you can read"}},
		{name: "run --ssh-known-hosts a directory", args: []string{"run", "--target", "docker", "--ssh-known-hosts", fx.Root}, code: ExitUnusable,
			want: []string{"--ssh-known-hosts", "not a regular file"}},
		{name: "run --cells out of range", args: []string{"run", "--target", "docker", "--cells", "C13"}, code: ExitUnusable, want: []string{"C13", "C01 to C12"}},
		{name: "run --source not sealbench", args: []string{"run", "--target", "docker", "--source", fx.NotSource}, dir: fx.Nil, code: ExitUnusable,
			want: []string{"not a sealbench source tree", "--bundle"}},
		{name: "run outside a source tree", args: []string{"run", "--target", "docker"}, dir: fx.Nil, code: ExitUnusable,
			want: []string{"no source tree to seal", "--bundle"}},
		{name: "run --target and --engine", args: []string{"run", "--target", "docker", "--engine", "unix:///x.sock"}, code: ExitUnusable, want: []string{"not both"}},
		{name: "run --bundle a tar", args: []string{"run", "--target", "docker", "--bundle", fx.Tar, "--key", fx.Pub}, code: ExitUnusable,
			want: []string{"is a file", "extract it"}, not: []string{"or its .tar"}},
		{name: "run --id too long", args: []string{"run", "--target", "docker", "--bundle", fx.Bundle, "--key", fx.Pub, "--id", long}, code: ExitUnusable, want: []string{"not a bundle name"}},
		{name: "run --sign-key a public key", args: []string{"run", "--target", "docker", "--bundle", fx.Bundle, "--key", fx.Pub, "--sign-key", fx.Pub}, code: ExitUnusable,
			want: []string{"this is a public key"}},
		{name: "run --sign-key missing", args: []string{"run", "--target", "docker", "--bundle", fx.Bundle, "--key", fx.Pub, "--sign-key", filepath.Join(fx.Nil, "absent.key")}, code: ExitUnusable,
			want: []string{"reading private key"}},

		// provision
		{name: "provision --vm-cpus negative", args: []string{"provision", "docker", "--bundle", fx.Bundle, "--key", fx.Pub, "--vm-cpus", "-3"}, code: ExitUnusable, want: []string{"--vm-cpus -3"}},
		{name: "provision no bundle", args: []string{"provision", "docker"}, code: ExitUnusable, want: []string{"--bundle is required", "--bundle out/"}},
		{name: "provision no target", args: []string{"provision", "--bundle", fx.Bundle}, code: ExitUnusable, want: []string{"arg(s)", "--help"}},

		// report: the output never replaces an input
		{name: "report --require-signed without --key", args: []string{"report", fx.Run, "--require-signed", "--out", filepath.Join(fx.Nil, "r.md")}, code: ExitUnusable,
			want: []string{"--require-signed needs --key"}},
		{name: "report --key a private key", args: []string{"report", fx.Run, "--key", fx.Priv, "--out", filepath.Join(fx.Nil, "r.md")}, code: ExitUnusable,
			want: []string{"this is a private key"}},
		{name: "report --out the samples", args: []string{"report", fx.Run, "--out", filepath.Join(fx.Run, manifests.SamplesFile)}, code: ExitUnusable,
			want: []string{"which this command reads", "report."}},
		{name: "report --out the pins", args: []string{"report", fx.Run, "--format", "json", "--out", filepath.Join(fx.Run, manifests.PinsFile)}, code: ExitUnusable,
			want: []string{"which this command reads"}},
		{name: "report --out the pins beside a samples file", args: []string{"report", filepath.Join(fx.Run, manifests.SamplesFile), "--out", filepath.Join(fx.Run, manifests.PinsFile)},
			code: ExitUnusable, want: []string{"which this command reads"}},
		{name: "report --out the results attestation", args: []string{"report", fx.Run, "--out", filepath.Join(fx.Run, attest.ResultsFile)}, code: ExitUnusable,
			want: []string{"which this command reads"}},
		{name: "report --out the samples by another path", args: []string{"report", fx.Run, "--out", filepath.Join(fx.RunLink, manifests.SamplesFile)}, code: ExitUnusable,
			want: []string{"which this command reads"}},
		{name: "report --out a directory", args: []string{"report", fx.Run, "--out", fx.Run}, code: ExitUnusable, want: []string{"is a directory"}},
		{name: "report an empty samples file", args: []string{"report", fx.EmptyKey}, code: ExitUnusable, want: []string{"RESULTS are"}},

		// audit, teardown
		{name: "audit an unknown run", args: []string{"audit", "--run", "20200101T000000-abcdef", "--target", "local"}, code: ExitUnusable,
			want: []string{"run 20200101T000000-abcdef is unknown", "check the id"}, not: []string{"nothing left"}},
		{name: "audit a run torn down", args: []string{"audit", "--run", tornDown, "--target", "local"}, code: ExitOK},
		{name: "audit a run id too long", args: []string{"audit", "--run", strings.Repeat("2", 300)}, code: ExitUnusable, want: []string{"--run", "run ids look like"}},
		{name: "report a hostile path", args: []string{"report", "../../../../../../../../../etc"}, code: ExitUnusable, want: []string{"has no samples.jsonl", "RESULTS are"}},
		{name: "audit a hostile run id", args: []string{"audit", "--run", "../../etc"}, code: ExitUnusable, want: []string{"--run", "run ids look like"}},
		{name: "teardown a hostile run id", args: []string{"teardown", "--run", "../../etc"}, code: ExitUnusable, want: []string{"--run", "run ids look like"}},
		{name: "teardown --run and --all", args: []string{"teardown", "--run", "20200101T000000-abcdef", "--all"}, code: ExitUnusable, want: []string{"exactly one"}},

		// anything
		{name: "an unknown command", args: []string{"frobnicate"}, code: ExitUnusable, want: []string{"unknown command", "--help"}},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			if tt.dir != "" {
				t.Chdir(tt.dir)
			}
			before := testenv.Snapshot(t, fx.Root, fx.State)
			// A command that waits on a fifo (a regression) is let go
			// after a while, so that it fails on what it printed
			// instead of hanging the whole test binary.
			done := make(chan struct{})
			go func() {
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					for _, f := range []string{fx.Fifo, filepath.Join(fx.FifoRun, manifests.SamplesFile)} {
						if w, err := os.OpenFile(f, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
							w.Close()
						}
					}
				}
			}()
			code, stdout, stderr := run(t, tt.args...)
			close(done)
			if code != tt.code {
				t.Errorf("%s: exit %d, want %d\n%s%s", strings.Join(tt.args, " "), code, tt.code, stdout, stderr)
			}
			if tt.code != ExitOK && !strings.Contains(stderr, "\nhint: ") {
				t.Errorf("%s: no hint at the next step:\n%s", strings.Join(tt.args, " "), stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("%s: stderr lacks %q:\n%s", strings.Join(tt.args, " "), w, stderr)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(stderr, w) {
					t.Errorf("%s: stderr says %q:\n%s", strings.Join(tt.args, " "), w, stderr)
				}
			}
			if d := testenv.SnapshotDiff(before, testenv.Snapshot(t, fx.Root, fx.State)); len(d) > 0 {
				t.Errorf("%s changed what it was given:\n  %s", strings.Join(tt.args, " "), strings.Join(d, "\n  "))
			}
			for _, p := range tt.absent {
				if _, err := os.Lstat(p); err == nil {
					os.RemoveAll(p)
					t.Errorf("%s created %s", strings.Join(tt.args, " "), p)
				}
			}
		})
	}
}

// TestReportEscapesTools: the pins' tool versions come from the machine
// that ran; the Markdown report prints them as text, never as Markdown or
// HTML of their own.
func TestReportEscapesTools(t *testing.T) {
	dir := runWithGitVersion(t, "2.39.5\n# injected <script>alert(1)</script> [link](http://x) *bold*")
	code, stdout, stderr := run(t, "report", dir)
	if code != ExitOK {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	for _, bad := range []string{"\n# injected", "<script>", "[link](", "*bold*"} {
		if strings.Contains(stdout, bad) {
			t.Errorf("the Markdown report prints a tool version unescaped (%q):\n%s", bad, stdout[:min(len(stdout), 2000)])
		}
	}
}

// TestHelpFlagValues: no flag's usage text holds a back-quoted word, which
// pflag would print as the flag's value name (`run --help` showed
// "--keep sealbench teardown --run ID", as if --keep took a value).
func TestHelpFlagValues(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.Contains(f.Usage, "`") || (f.Value.Type() == "bool" && name != "") {
				t.Errorf("%s --%s: usage %q shows the value name %q", c.CommandPath(), f.Name, f.Usage, name)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(&global{stdout: io.Discard, stderr: io.Discard}))
	_, stdout, _ := run(t, "run", "--help")
	if !strings.Contains(stdout, "--keep   ") {
		t.Errorf("run --help does not show --keep as a bool:\n%s", stdout)
	}
}

func TestCheckDiskSize(t *testing.T) {
	for _, ok := range []string{"4G", "2G", "2048M", "1T", "4T", "3221225472"} {
		if err := checkDiskSize(ok); err != nil {
			t.Errorf("--size %s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "G", "1G", "5T", "-4G", "4GG", "4g", "4.5G", "99999999999999999999T"} {
		if checkDiskSize(bad) == nil {
			t.Errorf("--size %q accepted", bad)
		}
	}
}

// runWithGitVersion copies the report fixture's run into a new directory
// with the pins' tools saying git is version: text a results file brings.
func runWithGitVersion(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{manifests.SamplesFile, manifests.PinsFile} {
		b, err := os.ReadFile(filepath.Join(reportRun, n))
		if err != nil {
			t.Fatal(err)
		}
		if n == manifests.PinsFile {
			var pins map[string]any
			if err := json.Unmarshal(b, &pins); err != nil {
				t.Fatal(err)
			}
			pins["tools"] = map[string]string{"git": version}
			if b, err = json.Marshal(pins); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
