package runner

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runner/cells"
)

// layerfsd picks the bundle's daemon for the Sandbox's architecture: a
// prefix for `"$L " + daemonapi.Shell(cmd)`.
const layerfsd = `case $(uname -m) in x86_64) a=amd64;; aarch64) a=arm64;; *) a=$(uname -m);; esac; L=` + BundleDir + `/bin/linux-$a/layerfsd; `

// Where a sample's Store, workspaces and outputs live in its Sandbox. The
// overlays' data files (scratch) and the native reference's directories
// are made side by side: on ext4 what creating a file costs depends on
// where its directory lands (here 30 µs in one block group, 700 µs in
// another), so LayerFS and native must be neighbours for their ratio to
// mean anything.
const (
	storeDir   = WorkDir + "/store"
	baseDir    = WorkDir + "/base"
	outDir     = WorkDir + "/out"
	scratchDir = WorkDir + "/scratch"
)

// Both sides number their directories alike: 1 for the warm-up, 2 for the
// timed run (workspace 3 is the base Layer's check).
func workspaceDir(n string) string { return WorkDir + "/ws" + n }
func controlPath(n string) string  { return WorkDir + "/ctl" + n }
func nativeDir(n string) string    { return scratchDir + "/native" + n }

// outFile is where side's body runs write stream (stdout or stderr).
func outFile(side, stream string) string { return outDir + "/" + side + "." + stream }

// layerFSFirst says whether LayerFS's timed run goes before native's in
// round r of cell on target. The two take turns round after round, so
// that whatever going first or second costs falls on each side equally
// often; which side starts is drawn from the run's seed, per target and
// cell, as one bit of a SHA-256 (FNV's bits hardly depend on the last
// byte, the one that tells C06 from C07).
func layerFSFirst(seed uint64, target, cell string, r int) bool {
	h := sha256.Sum256(append(binary.BigEndian.AppendUint64(nil, seed), target+"\x00"+cell...))
	start := int(h[0] & 1)
	return (r+start)%2 == 0
}

// step is one phase of a sample: what the status line says, and the work.
type step struct {
	phase string
	run   func(context.Context) error
}

// sampler is one sample under way: its Sandbox, its cell and what it has
// recorded so far. Each phase of the cache protocol is one method.
type sampler struct {
	sb        *sandbox
	cell      *cells.Cell
	s         *manifests.Sample
	native    bool               // a native reference runs beside LayerFS
	baseLayer string             // the Layer id the base was imported as
	verified  cells.Verification // the verifier's result
	// nativeExecWallNs is the native timed run's exec wall time: an
	// ineligible sample's exec overhead is the native run's.
	nativeExecWallNs int64
}

// runSample runs one cell once under the cache protocol in a fresh
// Sandbox: bundle check; a Disposable Store with the cell's base imported
// (an empty base owned by BodyUser otherwise), and the base copied into
// the native reference's two directories when asked; then each side in
// turn (see layerFSFirst). LayerFS: a warm-up mount, run and unmount; a
// fresh mount, the barrier and the timed body, telemetry, the verifier,
// Commit and unmount; for C11, the base Layer unchanged. Native: the
// warm-up run in one plain directory, the barrier and the timed body in
// a fresh one beside it. One attempt per step (an exec the Engine could not
// start is started again: see sandbox.exec): the first that fails ends the
// sample, which is kept as failed with its reason.
func runSample(ctx context.Context, c *engineConn, o EngineOptions, cellName string, round, order int, phase func(string)) manifests.Sample {
	s := manifests.Sample{
		FormatVersion: manifests.ResultsFormatVersion, RunID: o.RunID, BundleID: o.BundleID,
		Target: c.Target, Cell: cellName, Round: round, Order: order,
		Verifier: manifests.VerifierNotRun, FUSERequests: map[string]int64{},
		Load1: load1(), Start: time.Now().UTC(),
	}
	err := func() error {
		cell, err := cells.Lookup(cellName)
		if err != nil {
			return err
		}
		phase("creating the Sandbox")
		sb, remove, err := newSandbox(ctx, c, o, fmt.Sprintf("%s-%03d-%s", c.Target, order, strings.ToLower(cellName)))
		if err != nil {
			return err
		}
		defer remove()
		defer func() { s.EngineRestarts = sb.restarts }()
		sm := &sampler{sb: sb, cell: cell, s: &s, native: o.Native}
		steps := []step{
			{"sha256sum -c of the bundle", sm.checkBundle},
			{"setup", sm.setup},
		}
		layerFS := []step{
			{"warm-up", sm.warmUp},
			{"timed run", sm.timedRun},
			{"telemetry", sm.telemetry},
			{"verifier", sm.verify},
			{"commit and unmount", sm.commitAndUnmount},
		}
		if cellName == "C11" {
			// C11 overwrote the base file in the workspace: the base Layer
			// itself must still hold the original bytes.
			layerFS = append(layerFS, step{"commit and unmount", sm.checkBaseUnchanged})
		}
		native := []step{
			{"native warm-up", sm.nativeWarmUp},
			{"native timed run", sm.nativeTimedRun},
		}
		if why := unsupported(c.Identity, cell); why != "" {
			// LayerFS cannot run here: the sample says why, and the
			// native reference (and with it the exec overhead) runs all
			// the same.
			s.Status, s.Reason = manifests.StatusIneligible, why
			if o.Native {
				s.First = manifests.SideNative
				steps = append(steps, step{"native warm-up", sm.nativeWarmUp}, step{"native timed run", sm.nativeTimedRun})
			}
			for _, st := range steps {
				phase(st.phase)
				if err := st.run(ctx); err != nil {
					return err
				}
			}
			if sm.s.NativeNs != nil {
				s.CommandNs, s.ExecWallNs = *sm.s.NativeNs, sm.nativeExecWallNs
				s.ExecOverheadNs = s.ExecWallNs - s.CommandNs
			}
			return nil
		}
		switch {
		case !o.Native:
			steps = append(steps, layerFS...)
		case layerFSFirst(o.Seed, c.Target, cellName, round):
			s.First = manifests.SideLayerFS
			steps = append(append(steps, layerFS...), native...)
		default:
			s.First = manifests.SideNative
			steps = append(append(steps, native...), layerFS...)
		}
		for _, st := range steps {
			phase(st.phase)
			if err := st.run(ctx); err != nil {
				return err
			}
		}
		if !sm.verified.Pass {
			return fmt.Errorf("the verifier failed: %s", clip(sm.verified.Detail, 300))
		}
		return nil
	}()
	s.End = time.Now().UTC()
	switch {
	case err != nil:
		s.Status, s.Reason = manifests.StatusFailed, clip(err.Error(), 500)
	case s.Status == "":
		s.Status = manifests.StatusOK
	}
	return s
}

// unsupported says, in one line, why LayerFS cannot run cell on the
// target id describes, or "" when it can.
func unsupported(id *engine.Identity, cell *cells.Cell) string {
	if cell.MapsFiles && id.FUSE == manifests.FUSEGVisor {
		return "gVisor's FUSE cannot mmap(2) a file (ENOSYS), and " + cell.Name + "'s body maps files in the workspace (git)"
	}
	return ""
}

// runLayerfsd runs one layerfsd command with the container's grant, after
// the shell command pre when there is one (in the same exec), and decodes
// its --json answer with decode.
func runLayerfsd[T any](ctx context.Context, sb *sandbox, what, pre string, cmd daemonapi.Command, decode func([]byte) (*T, error)) (*T, error) {
	script := layerfsd + `"$L" ` + daemonapi.Shell(cmd)
	if pre != "" {
		script = layerfsd + pre + ` && "$L" ` + daemonapi.Shell(cmd)
	}
	r, err := sb.must(ctx, what, true, "/", script, nil)
	if err != nil {
		return nil, err
	}
	v, err := decode(r.stdout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// checkBundle checks the bundle in the image with the image's own tools.
func (sm *sampler) checkBundle(ctx context.Context) error {
	_, err := sm.sb.must(ctx, "checking the bundle with sha256sum -c", false, BundleDir, "sha256sum -c --quiet SHA256SUMS", nil)
	return err
}

// setup makes the directories and a Disposable Store, copies in the base
// file when the cell has one (into the native reference's directories
// too, as LayerFS's workspaces have it from the base Layer), and imports
// the base as a Layer.
func (sm *sampler) setup(ctx context.Context) error {
	// scratch holds the overlays' data (and the native directories):
	// made whether or not a native reference runs.
	dirs := baseDir + " " + outDir
	if sm.native {
		dirs += " " + nativeDir("1") + " " + nativeDir("2")
	}
	mk := `mkdir -p ` + scratchDir + ` ` + dirs + ` && chown 65534:65534 ` + dirs
	if _, err := runLayerfsd(ctx, sm.sb, "creating the Store", mk, daemonapi.InitCmd{Store: storeDir, Profile: daemonapi.ProfileDisposable}, daemonapi.DecodeInit); err != nil {
		return err
	}
	if sm.cell.Base != "" {
		files := baseDir + "/" + cells.BaseFile
		copyIn := `cat >` + files
		if sm.native {
			for _, n := range []string{"1", "2"} {
				copyIn += ` && cp ` + baseDir + `/` + cells.BaseFile + ` ` + nativeDir(n) + `/`
				files += ` ` + nativeDir(n) + `/` + cells.BaseFile
			}
		}
		if _, err := sm.sb.must(ctx, "copying in the base file", true, "/", copyIn+` && chown 65534:65534 `+files, cells.BaseReader); err != nil {
			return err
		}
	}
	l, err := runLayerfsd(ctx, sm.sb, "importing the base Layer", "", daemonapi.ImportCmd{Store: storeDir, From: baseDir, Message: "base"}, daemonapi.DecodeLayer)
	if err != nil {
		return err
	}
	sm.baseLayer = l.ID
	return nil
}

// mount mounts workspace n on the newest Layer, its overlay's data in
// scratch, and returns layerfsd's answer.
func (sm *sampler) mount(ctx context.Context, n string) (*daemonapi.ReadyInfo, error) {
	return runLayerfsd(ctx, sm.sb, "mounting workspace "+n, "mkdir -p "+workspaceDir(n),
		daemonapi.MountCmd{Store: storeDir, OverlayDir: scratchDir, Workspace: workspaceDir(n), Control: controlPath(n)}, daemonapi.DecodeReady)
}

// warmUp is the untimed identical run on an earlier mount, then its
// unmount, which discards its changes.
func (sm *sampler) warmUp(ctx context.Context) error {
	if _, err := sm.mount(ctx, "1"); err != nil {
		return err
	}
	if err := sm.warmUpBody(ctx, manifests.SideLayerFS, workspaceDir("1")); err != nil {
		return err
	}
	_, err := runLayerfsd(ctx, sm.sb, "unmounting the warm-up workspace", "", daemonapi.UnmountCmd{Control: controlPath("1")}, daemonapi.DecodeUnmount)
	return err
}

// timedRun mounts a fresh workspace (timed by the daemon), then runs the
// barrier and the timed body in it.
func (sm *sampler) timedRun(ctx context.Context) error {
	ready, err := sm.mount(ctx, "2")
	if err != nil {
		return err
	}
	sm.s.MountNs = ready.MountNs
	commandNs, execWallNs, err := sm.timedBody(ctx, manifests.SideLayerFS, workspaceDir("2"))
	if err != nil {
		return err
	}
	sm.s.CommandNs, sm.s.ExecWallNs = commandNs, execWallNs
	sm.s.ExecOverheadNs = sm.s.ExecWallNs - sm.s.CommandNs
	return nil
}

// nativeWarmUp is the native reference's untimed identical run, in its
// earlier directory.
func (sm *sampler) nativeWarmUp(ctx context.Context) error {
	if err := sm.warmUpBody(ctx, manifests.SideNative, nativeDir("1")); err != nil {
		return fmt.Errorf("native reference: %w", err)
	}
	return nil
}

// nativeTimedRun is the native reference's barrier and timed body, in a
// fresh directory beside the warm-up's and the overlays' data.
func (sm *sampler) nativeTimedRun(ctx context.Context) error {
	commandNs, execWallNs, err := sm.timedBody(ctx, manifests.SideNative, nativeDir("2"))
	if err != nil {
		return fmt.Errorf("native reference: %w", err)
	}
	sm.s.NativeNs, sm.nativeExecWallNs = &commandNs, execWallNs
	return nil
}

// bodyCmd runs the cell's body with its output in side's files.
func (sm *sampler) bodyCmd(side string) string {
	return `/bin/sh ` + BundleDir + `/cells/` + sm.cell.Body + ` >` + outFile(side, "stdout") + ` 2>` + outFile(side, "stderr")
}

// warmUpBody runs the body as BodyUser in dir, untimed, and records the
// phase. Its exit status is not looked at: the timed run's is.
func (sm *sampler) warmUpBody(ctx context.Context, side, dir string) error {
	if _, err := sm.sb.exec(ctx, false, dir, sm.bodyCmd(side), nil); err != nil {
		return fmt.Errorf("warm-up run: %w", err)
	}
	sm.s.Phases = append(sm.s.Phases, manifests.Phase{Side: side, Kind: manifests.PhaseWarmUp, Dir: dir})
	return nil
}

// timedBody runs the write-back barrier and then the body as BodyUser in
// dir, in one exec, timed on the Sandbox's clock; records the phase with
// its barrier; and fails when the body did. execWallNs is the exec's wall
// time here less the barrier's wait, so that the exec overhead stays the
// exec's own.
func (sm *sampler) timedBody(ctx context.Context, side, dir string) (commandNs, execWallNs int64, err error) {
	r, err := sm.sb.exec(ctx, false, dir, writeBack.timed(sm.bodyCmd(side)), nil)
	if err != nil {
		return 0, 0, fmt.Errorf("timed run: %w", err)
	}
	t, err := parseTimed(r.stdout)
	if err != nil {
		return 0, 0, err
	}
	sm.s.Phases = append(sm.s.Phases, manifests.Phase{Side: side, Kind: manifests.PhaseTimed, Dir: dir, Barrier: &t.barrier})
	if t.rc != 0 {
		stderr, _ := sm.sb.exec(ctx, false, "/", "cat "+outFile(side, "stderr"), nil)
		return 0, 0, fmt.Errorf("the body exited %d: %s", t.rc, clip(strings.TrimSpace(string(stderr.stdout)), 300))
	}
	return t.commandNs, r.wall.Nanoseconds() - t.barrier.WaitNs, nil
}

// telemetry reads the workspace's counts before the verifier, so that they
// cover the body alone and not the verifier's reads.
func (sm *sampler) telemetry(ctx context.Context) error {
	st, err := runLayerfsd(ctx, sm.sb, "reading telemetry", "", daemonapi.StatsCmd{Control: controlPath("2")}, daemonapi.DecodeStats)
	if err != nil {
		return err
	}
	for op, c := range st.Requests {
		sm.s.FUSERequests[op] = c.Count
	}
	sm.s.FUSETransport = st.Features.Transport
	sm.s.Statements, sm.s.StoreBytes, sm.s.OverlayBytes = st.SQLStatements, st.StoreUsage.DBBytes+st.StoreUsage.BlobBytes, st.OverlayBytes
	return nil
}

// verify runs the cell's verifier in the workspace, untimed. A verifier
// that fails is recorded, and the sample goes on (Commit, the native
// reference) before it fails.
func (sm *sampler) verify(ctx context.Context) error {
	stdout, err := sm.sb.must(ctx, "reading the body's output", false, "/", "cat "+outFile(manifests.SideLayerFS, "stdout"), nil)
	if err != nil {
		return err
	}
	v, err := sm.cell.Verifier().Verify(ctx, sandboxShell{sb: sm.sb, dir: workspaceDir("2")}, stdout.stdout)
	if err != nil {
		return err
	}
	sm.verified = v
	sm.s.Files, sm.s.Bytes = v.Files, v.Bytes
	sm.s.Verifier, sm.s.VerifierDetail = manifests.VerifierPass, ""
	if !v.Pass {
		sm.s.Verifier, sm.s.VerifierDetail = manifests.VerifierFail, v.Detail
	}
	return nil
}

// commitAndUnmount commits the workspace and unmounts it, both timed by
// the daemon.
func (sm *sampler) commitAndUnmount(ctx context.Context) error {
	cm, err := runLayerfsd(ctx, sm.sb, "committing", "", daemonapi.CommitCmd{Control: controlPath("2"), Message: sm.cell.Name}, daemonapi.DecodeCommit)
	if err != nil {
		return err
	}
	sm.s.CommitNs = cm.DurationNs
	um, err := runLayerfsd(ctx, sm.sb, "unmounting", "", daemonapi.UnmountCmd{Control: controlPath("2")}, daemonapi.DecodeUnmount)
	if err != nil {
		return err
	}
	sm.s.UnmountNs = um.DurationNs
	return nil
}

// checkBaseUnchanged mounts the base Layer itself and checks that it still
// holds the original base file.
func (sm *sampler) checkBaseUnchanged(ctx context.Context) error {
	mount := daemonapi.MountCmd{Store: storeDir, Workspace: workspaceDir("3"), Control: controlPath("3"), Layer: sm.baseLayer}
	unmount := daemonapi.UnmountCmd{Control: controlPath("3")}
	r, err := sm.sb.must(ctx, "checking the base Layer is unchanged", true, "/", layerfsd+`mkdir -p `+workspaceDir("3")+` && "$L" `+daemonapi.Shell(mount)+` >/dev/null && `+
		`sha256sum `+workspaceDir("3")+`/`+cells.BaseFile+`; rc=$?; "$L" `+daemonapi.Shell(unmount)+` >/dev/null; exit $rc`, nil)
	if err != nil {
		return err
	}
	if f := strings.Fields(string(r.stdout)); len(f) == 0 || "sha256:"+f[0] != cells.BaseDigest().String() {
		sm.s.Verifier, sm.s.VerifierDetail = manifests.VerifierFail, "the base Layer changed: its "+cells.BaseFile+" is "+clip(string(r.stdout), 80)
		sm.verified.Pass = false
	}
	return nil
}
