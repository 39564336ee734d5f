//go:build !sealbench_bundle

package cmd

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealbench/sealbench/bundle/sign"
	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/host"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runner/cells"
)

// defaultSamples is how many samples run takes per cell and target: the
// fewest for which a paired bootstrap 95% interval means something.
const defaultSamples = 5

// maxSamples bounds --samples: more is a typo, not a run.
const maxSamples = 1000

// runFlags are the flags of `sealbench run`.
type runFlags struct {
	targets, engine, name string
	bundle, key, expect   string
	signKey               string
	out, cells            string
	native, keep          bool
	fuseURing             bool
	samples               int
	seed                  uint64
	source                string
	vm                    vmSettings
	kube                  kubeSettings
	debs                  debSettings
	ssh                   sshSettings
}

func newRunCmd(g *global) *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run --target local[,docker...] [--bundle DIR]",
		Short: "Provision targets, run the twelve cells on them, report, tear down and audit",
		Long: `Run the cells under the cache protocol on one or more targets, from one
verified bundle, and leave nothing behind.

With --target, the run provisions each target (as ` + "`sealbench provision`" + ` does),
runs the cells on all of them in one seeded random interleaving, writes the run
directory, prints the report (exact counts first, timings second), then tears
down everything it made and audits that nothing is left: on success, on
failure and on Ctrl-C, unless --keep. With no --bundle it seals one from the
source tree around the working directory with a throw-away key, and says so.
With --engine instead, it drives an Engine that already exists (a target left
up by ` + "`sealbench provision`" + `, or a dockerd), loading the Sandbox image
into it when it lacks it.

A target may be on another host: docker@ssh://USER@HOST[:PORT] (named
docker-HOST, or NAME=docker@ssh://...) is that host's dockerd (its sessions'
DOCKER_HOST, or /var/run/docker.sock), reached over one SSH connection per
host: host keys checked against known_hosts (--ssh-known-hosts), keys only
(your agent, or --ssh-identity), the host recorded in the run's hosts.json
before it is connected to. Its socket is forwarded into the run directory
(or carried by ` + "`docker system dial-stdio`" + ` there when the host's sshd forwards
no sockets); everything made there is in the ledger with the host, and
teardown and the audit reach it over SSH. local@ssh://root@HOST[:PORT]
(named local-HOST) is the bundle's stand-in on that host: copied over the
same connection into $SEALBENCH_STATE_DIR/runs/<run>/ there (default
/var/lib/sealbench), re-hashed as written and checked there against the
verified manifest before it runs, then started as root (root login
required) and its socket forwarded back (` + "`standin dial`" + ` where the host's sshd
forwards no sockets). Each remote host's targets are sampled by the bundle's
runner on that host, beside its Engine: the runner for the host's platform
copied into the run's directory there, re-hashed and checked as the stand-in
is, given a plan of that host's targets (their Engines' sockets there, its own
seed, the host's lock: /run/lock/sealbench.lock or SEALBENCH_LOCK as the
host's sessions set it) and started over SSH, its progress shown here; the
hosts run at once, and their samples and pins come back (hashed on both
sides) into this run's results. Their pins say transport "socket" and name
the host as runnerHost. A host lost mid-run has its samples that did not
come back recorded as failed ("host ssh://... lost: ..."), the others go
on, and the run exits 1; ` + "`sealbench teardown --run ID`" + ` finishes there
when the host is back.

The samples are taken by the bundle's own runner, not by this binary: after
verifying the bundle and bringing the targets up, run copies the bundle's
runner for this host (bin/<os>-<arch>/sealbench) into the run's directory,
checking its SHA-256 against the signed manifest as it copies (a runner that
changed since verification is refused before any sample), writes a plan
(plan.json: Engines, image, cells, seed, samples, results directory, ledger)
and starts the copy (` + "`sealbench sample --plan`" + `), showing its progress and
forwarding Ctrl-C to it. pins.json records the digest of the runner that ran.

Per cell and sample: a fresh Sandbox from the pinned image (its id checked);
sha256sum -c of the bundle inside it with the image's own tools; a Disposable
Store with the cell's base imported; then the cache protocol (version 2,
docs/measurements.md): each side's untimed warm-up in an earlier directory,
its output removed right after it (LayerFS's unmount discards it), then the
timed windows one after another in fresh directories, each after a sync, a
wait for the kernel's dirty pages to drain and a prefault that leaves every
side the same freshly freed memory. With --native the sides are LayerFS, the
same body on a plain directory beside it, and that again (the A/A check: the
protocol's own noise); they take turns in every position, as the seed
decides. The body runs as uid 65534 with no capabilities, timed on the
Sandbox's clock; then LayerFS's telemetry, the verifier, Commit and unmount.
One attempt per step; a failed cell is kept as failed. A cell the target
cannot run (C12 on gvisor: gVisor's FUSE cannot mmap(2) a file, and git maps
its files) is kept as ineligible, saying why in one line, after its native
reference ran; the report lists it as not supported by this backend, and it
is not a failure. A host-wide lock keeps samples from overlapping. Every
Sandbox is recorded in the run's ledger before it is created. The results
directory gets samples.jsonl (each sample fsync'd as it completes), pins.json
and report.md.

--sign-key KEY (a private key, as seal's --key; --key is the public key the
bundle is verified with) signs the results at the end, after the teardown and
the audit: results.sigstore.json in the results directory, a Sigstore bundle
(v0.3, DSSE) holding an in-toto Statement whose subjects are samples.jsonl and
pins.json (report.md is derived: re-render it any time), with a predicate
recording the run id, the bundle id and manifest digest, each target's identity
pins, the seed, cells and sample counts, and the audit's verdict. report.md is
then written again saying the results are signed; ` + "`sealbench report --key PUB`" + `
checks them, ` + "`--require-signed`" + ` refuses them unsigned or altered. Without
--sign-key the report says the run is unsigned. The key and its password are
checked before anything runs (exit 3).

--fuse-uring turns the host's FUSE over io_uring on for the run (the fuse
module's enable_uring, off by default): it is recorded in the run's ledger
before it is written, and teardown puts it back as it was (unless someone
changed it again meanwhile: then it is left, with a warning). The parameter is
kernel-wide, so docker's Sandboxes on this host get it too; a VM target (lima, qemu)
runs its own kernel, which it does not reach. Without the flag the parameter is
left alone. Either way every target's pins say what it was: fuseURing "on",
"off", or "n/a" for a target on another kernel; each sample says which
transport served it. It needs root and a kernel with FUSE over io_uring (6.14+,
CONFIG_FUSE_IO_URING), and is refused otherwise (exit 3).

--samples defaults to 5 per cell and target, interleaved in the seeded random
order: enough for a paired bootstrap 95% interval on every ratio (with 5 pairs
the interval can exclude 1.0 when every pair agrees on a direction; fewer
cannot show much). --samples 1 is a quick look, with no intervals.

Exit codes for run: 0 every sample passed and nothing is left; 1 a sample
failed, or the audit found leftovers; 3 bad input; 4 provisioning, the run or
the teardown failed; 130 interrupted (torn down all the same).`,
		Example: `  # Everything in one go: seal with a throw-away key, run on the stand-in and dockerd.
  sudo sealbench run --target local,docker --native

  # A sealed bundle, three cells, a fixed seed, one sample each: a quick look.
  sudo sealbench run --target local --bundle out/build-linux-0123456789ab \
    --key keys/sealbench.pub --id build-linux-0123456789ab --cells C01,C06,C12 --samples 1 --seed 7

  # The large-file cells against the plain directory, five samples, intervals.
  sudo sealbench run --target local,docker --native --cells C06,C07,C08,C11

  # LayerFS over FUSE over io_uring for this run: enable_uring on, then back as it was.
  sudo sealbench run --target local,docker --native --fuse-uring

  # Signed results: results.sigstore.json, checked by report --key.
  SEALBENCH_PASSWORD= sudo -E sealbench run --target local --sign-key keys/sealbench.key --out out/signed
  sealbench report out/signed --key keys/sealbench.pub --require-signed

  # Pods of a Kubernetes cluster beside the stand-in, their RuntimeClass gvisor:
  sudo sealbench run --target local,kubernetes:gvisor --kubeconfig ~/.kube/config \
    --kube-containerd /run/containerd/containerd.sock --native

  # Two nodes of a cluster, sampled in parallel, the image pulled from your registry:
  sealbench run --target kubernetes@node-1,kubernetes@node-2 \
    --kube-image registry.example.com:5000/sealbench/sandbox

  # An Engine that is already up: a target left by provision, or a dockerd.
  sealbench run --engine unix:///run/sealbench-dockerd/docker.sock --name docker \
    --bundle out/build-linux-0123456789ab`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runCells(c.Context(), g, &f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.targets, "target", "", "targets to provision and run on, comma-separated: "+strings.Join(provision.Names(), ", ")+", each as KIND, kubernetes:RUNTIMECLASS, [NAME=]kubernetes[:RUNTIMECLASS]@NODE or [NAME=]KIND@ssh://USER@HOST[:PORT]")
	fl.StringVar(&f.engine, "engine", "", "run on this Engine API endpoint instead (unix:///path/to/socket)")
	fl.StringVar(&f.name, "name", "target", "with --engine: the target's name in the results")
	fl.StringVar(&f.bundle, "bundle", "", "verified bundle directory (its Sandbox image is <bundle>.image/); default: seal one")
	fl.StringVar(&f.key, "key", filepath.Join(defaultKeyDir(), sign.PublicKeyFile), "public key to verify the bundle with")
	fl.StringVar(&f.signKey, "sign-key", "", "private key to sign the results with (results.sigstore.json, after the audit); password from $"+sign.PasswordEnv)
	fl.StringVar(&f.expect, "id", "", "pin the bundle: refuse any other (build-linux-<hash>)")
	fl.StringVar(&f.source, "source", "", "with no --bundle: the source tree to seal (default: the one around the working directory)")
	fl.StringVar(&f.out, "out", "", "results directory, a new one: never an earlier run's nor inside the bundle (default out/runs/<run id>)")
	fl.StringVar(&f.cells, "cells", "", "cells to run, e.g. C01,C06 (default all twelve)")
	fl.BoolVar(&f.native, "native", false, "also run each body on a plain directory in the same Sandbox")
	fl.BoolVar(&f.keep, "keep", false, "leave the targets up after the run (take them down with sealbench teardown --run ID)")
	fl.BoolVar(&f.fuseURing, "fuse-uring", false, "turn the host's enable_uring (FUSE over io_uring, kernel-wide) on for the run; recorded, and put back at teardown")
	fl.IntVar(&f.samples, "samples", defaultSamples, "samples per cell and target, interleaved in a seeded random order (1: a quick look, no intervals)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the interleaving (0: one from the clock; recorded in pins.json)")
	f.vm.flags(fl)
	f.kube.flags(fl, true)
	f.debs.flags(fl)
	f.ssh.flags(fl)
	return c
}

func runCells(ctx context.Context, g *global, f *runFlags) error {
	var names []string
	far := map[string]remote.Spec{}
	switch {
	case f.engine != "" && f.targets != "":
		return usageErrorf("--target provisions targets; --engine drives one that is up", "pass --target or --engine, not both")
	case f.engine == "" && f.targets == "":
		return usageErrorf("sealbench run --target local,docker (or --engine unix:///path/to/socket)", "--target or --engine is required")
	case f.targets != "":
		specs, err := host.CheckTargets(strings.Split(f.targets, ","))
		if err != nil {
			return err
		}
		names = host.Names(specs)
		for _, s := range specs {
			if s.Host != nil || s.Param != "" || s.Node != "" {
				far[s.Name] = s
			}
		}
	default:
		if err := engine.CheckEndpoint(f.engine); err != nil {
			return usageErrorf("--engine takes unix:///path/to/docker.sock or tcp://host:port", "--engine: %v", err)
		}
		if !manifests.ValidTargetName(f.name) {
			return usageErrorf("a name such as docker or my-engine", "--name %q is not a target name (lowercase letters, digits, '-')", f.name)
		}
	}
	if err := f.vm.check(); err != nil {
		return err
	}
	if err := f.kube.check(); err != nil {
		return err
	}
	if err := f.ssh.check(); err != nil {
		return err
	}
	if f.out != "" {
		if err := checkRunOut(f.out, f.bundle); err != nil {
			return err
		}
	}
	cellList, err := cells.Parse(f.cells)
	if err != nil {
		return usageErrorf("cells are C01 to C12, comma-separated", "%v", err)
	}
	if f.samples < 1 || f.samples > maxSamples {
		return usageErrorf(fmt.Sprintf("--samples takes 1 to %d (default %d)", maxSamples, defaultSamples), "--samples %d is out of range", f.samples)
	}
	if f.fuseURing {
		if err := host.CheckFUSEURing(names, f.engine); err != nil {
			return err
		}
	}
	if err := f.debs.check(); err != nil {
		return err
	}
	if err := host.CheckBundleArgs(f.bundle, f.expect, "a run executes the bundle's binaries"); err != nil {
		return err
	}
	var signer *sign.Signer
	if f.signKey != "" {
		// The key is checked (and its password asked for) before anything
		// runs: a run must not end unable to sign what it took.
		pw, err := readPassword(g, false)
		if err != nil {
			return err
		}
		if signer, err = sign.LoadPrivateKey(f.signKey, pw); err != nil {
			return err
		}
	}
	if f.seed == 0 {
		f.seed = uint64(time.Now().UnixNano())
	}
	p := newProgress(g.stderr, "run")
	defer p.Close()
	b, err := host.OpenBundle(ctx, host.BundleOptions{Dir: f.bundle, Source: f.source, Key: f.key, Expect: f.expect, Debs: f.debs.host(), Log: p.Logf})
	if err != nil {
		return err
	}
	o, err := host.Run(ctx, host.RunOptions{
		Bundle: b, Targets: names, Specs: far, SSH: f.ssh.host(), Engine: f.engine, Name: f.name, VM: f.vm.host(f.kube),
		Cells: cellList, Samples: f.samples, Seed: f.seed, Native: f.native, Out: f.out, Keep: f.keep, FUSEURing: f.fuseURing,
		SignKey: signer, Log: p.Logf, Status: p.Status,
		Report: func(md string) {
			if !g.json {
				p.Close()
				fmt.Fprint(g.stdout, md)
			}
		},
	})
	p.Close()
	switch {
	case o == nil:
		return err
	case g.json && err != nil:
		return &detailError{err, "run", o} // one JSON document: the error, with the outcome in it
	case g.json:
		return writeJSON(g.stdout, o)
	case o.Samples > 0:
		fmt.Fprintf(g.stdout, "\nrun %s: %d samples, %d failed; results in %s\n", o.Run, o.Samples, o.Failed, o.Dir)
		if o.Attestation != "" {
			fmt.Fprintf(g.stdout, "results signed: %s\n", o.Attestation)
		}
	}
	return err
}
