package runner

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
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
	storeDir    = WorkDir + "/store"
	baseDir     = WorkDir + "/base"
	outDir      = WorkDir + "/out"
	scratchDir  = WorkDir + "/scratch"
	prefaultDir = scratchDir + "/prefault" // the prefault's throwaway file, beside the windows' data
)

// Every side numbers its directories alike: an odd one for the warm-up,
// the next for the timed run. LayerFS's are workspaces 1 and 2
// (workspace 3 is the base Layer's check); the native reference's are
// native1 and native2, its A/A repeat's native3 and native4.
func workspaceDir(n string) string { return WorkDir + "/ws" + n }
func controlPath(n string) string  { return WorkDir + "/ctl" + n }
func nativeDir(n string) string    { return scratchDir + "/native" + n }

// nativeDirs are the native reference's directories, warm-up then timed,
// for side (SideNative or SideNativeRepeat).
func nativeDirs(side string) (warm, timed string) {
	if side == manifests.SideNativeRepeat {
		return nativeDir("3"), nativeDir("4")
	}
	return nativeDir("1"), nativeDir("2")
}

// outFile is where side's body runs write stream (stdout or stderr).
func outFile(side, stream string) string { return outDir + "/" + side + "." + stream }

// The prefault before a window whose body writes w bytes writes twice
// that, and a floor: twice covers a copy-up beside the data (C11) and the
// FUSE daemon's buffers; the floor what every body allocates besides (its
// processes, the daemon's heap).
const prefaultFloor = 32 << 20

func prefaultFor(c *cells.Cell) prefault {
	return prefault{dir: prefaultDir, bytes: 2*c.Writes + prefaultFloor}
}

// sideOrder is the order of the sides' timed runs in round r of cell on
// target. Three sides take manifests.BalancedOrders in turn, round after
// round: over six rounds each side runs in each position, and right after
// each other side, equally often, so that whatever going first costs, or
// whatever one window leaves the next, falls on every side alike; the
// sequence starts at a pair of mirror images, so that over any even
// number of rounds each two sides run in both orders, and each right after
// the other, equally often. Two sides alternate. Where the sequence starts
// is drawn from the run's seed, per target and cell, from a SHA-256 (FNV's
// bits hardly depend on the last byte, the one that tells C06 from C07).
func sideOrder(seed uint64, target, cell string, r int, sides []string) []string {
	h := sha256.Sum256(append(binary.BigEndian.AppendUint64(nil, seed), target+"\x00"+cell...))
	draw := binary.BigEndian.Uint64(h[:8])
	n := len(sides)
	if n != 3 {
		k := (r + int(draw%uint64(n))) % n
		return append(slices.Clone(sides[k:]), sides[:k]...)
	}
	order := manifests.BalancedOrders[(r+2*int(draw%3))%len(manifests.BalancedOrders)]
	return []string{sides[order[0]], sides[order[1]], sides[order[2]]}
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
	native    bool               // a native reference (and its repeat) runs beside LayerFS
	baseLayer string             // the Layer id the base was imported as
	transport string             // LayerFS's --fuse-transport (mountTransport); empty: layerfsd's default
	verified  cells.Verification // the verifier's result
	// nativeExecWallNs is the native timed run's exec wall time: an
	// ineligible sample's exec overhead is the native run's.
	nativeExecWallNs int64
}

// runSample runs one cell once under the cache protocol (version
// manifests.ProtocolVersion) in a fresh Sandbox: bundle check; a
// Disposable Store with the cell's base imported (an empty base owned by
// BodyUser otherwise), and the base copied into the native reference's
// directories when asked; then the sides (LayerFS, and with a native
// reference the native side and its A/A repeat) in the order sideOrder
// gives, in two passes. First each side's untimed warm-up, whose output
// goes away right after it (LayerFS's unmount discards its workspace's
// changes; native's directory is removed), and LayerFS's fresh mount.
// Then the timed windows, one after the other with nothing in between
// but each one's barrier and prefault: windows seconds apart share the
// machine's state (a noisy neighbour, the host's CPU) far better than
// windows a minute apart. Last, LayerFS's telemetry, verifier, Commit and
// unmount (for C11, the base Layer unchanged). One attempt per step (an
// exec the Engine could not start is started again: see sandbox.exec):
// the first that fails ends the sample, which is kept as failed with its
// reason.
func runSample(ctx context.Context, c *engineConn, o EngineOptions, cell *cells.Cell, round, order int, phase func(string)) manifests.Sample {
	cellName := cell.Name
	s := manifests.Sample{
		FormatVersion: manifests.ResultsFormatVersion, RunID: o.RunID, BundleID: o.BundleID,
		Target: c.Name, Cell: cellName, Suite: cell.Suite().Name, Round: round, Order: order, Protocol: manifests.ProtocolVersion,
		Verifier: manifests.VerifierNotRun, FUSERequests: map[string]int64{},
		Load1: load1(), Start: time.Now().UTC(),
	}
	err := func() error {
		phase("creating the Sandbox")
		requested := time.Now()
		sb, remove, err := newSandbox(ctx, c, o, fmt.Sprintf("%s-%03d-%s", c.Name, order, strings.ToLower(cellName)))
		if err != nil {
			return err
		}
		defer func() {
			phase("retiring the Sandbox")
			s.ExitNs = c.retire(sb, remove).Nanoseconds()
			if cell.LaunchToExit && s.ReadyNs > 0 && s.ExecWallNs > 0 && s.ExitNs > 0 {
				s.LaunchToExitNs = s.ReadyNs + s.ExecWallNs + s.ExitNs
			}
		}()
		defer func() { s.EngineRestarts = sb.restarts }()
		// The time to a usable Sandbox: until its first exec has answered.
		if r, err := sb.exec(ctx, false, "/", "true", nil); err != nil {
			return fmt.Errorf("the Sandbox's first exec (true): %w", err)
		} else if r.code != 0 {
			return fmt.Errorf("the Sandbox's first exec (true) exited %d: %s", r.code, clip(string(r.stderr), 300))
		}
		s.ReadyNs = time.Since(requested).Nanoseconds()
		sm := &sampler{sb: sb, cell: cell, s: &s, native: o.Native, transport: mountTransport(c.Identity)}
		sides := []string{manifests.SideLayerFS}
		why := unsupported(c.Identity, cell)
		if why != "" {
			// LayerFS cannot run here: the sample says why, and the
			// native reference (and with it the exec overhead) runs all
			// the same.
			s.Status, s.Reason = manifests.StatusIneligible, why
			sides = nil
		}
		if o.Native {
			sides = append(sides, manifests.SideNative, manifests.SideNativeRepeat)
		}
		if len(sides) > 0 {
			sides = sideOrder(o.Seed, c.Name, cellName, round, sides)
			if o.Native {
				s.First = sides[0]
			}
		}
		for _, st := range sm.steps(sides) {
			phase(st.phase)
			if err := st.run(ctx); err != nil {
				return err
			}
		}
		if why != "" {
			if sm.s.NativeNs != nil {
				s.CommandNs, s.ExecWallNs = *sm.s.NativeNs, sm.nativeExecWallNs
				s.ExecOverheadNs = s.ExecWallNs - s.CommandNs
			}
			return nil
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

// steps are a sample's steps for sides in their order: the bundle check
// and setup; every side's warm-up (and LayerFS's fresh mount); every
// side's window; LayerFS's tail.
func (sm *sampler) steps(sides []string) []step {
	steps := []step{
		{"sha256sum -c of the bundle", sm.checkBundle},
		{"setup", sm.setup},
	}
	label := map[string]string{manifests.SideLayerFS: "", manifests.SideNative: "native ", manifests.SideNativeRepeat: "native repeat "}
	for _, side := range sides {
		if side == manifests.SideLayerFS {
			steps = append(steps, step{"warm-up", sm.warmUp})
			continue
		}
		steps = append(steps, step{label[side] + "warm-up", func(ctx context.Context) error { return sm.nativeWarmUp(ctx, side) }})
	}
	layerFS := slices.Contains(sides, manifests.SideLayerFS)
	if layerFS {
		steps = append(steps, step{"mounting the timed workspace", sm.mountTimed})
	}
	for _, side := range sides {
		if side == manifests.SideLayerFS {
			steps = append(steps, step{"timed run", sm.timedRun})
			continue
		}
		steps = append(steps, step{label[side] + "timed run", func(ctx context.Context) error { return sm.nativeTimedRun(ctx, side) }})
	}
	if layerFS {
		steps = append(steps,
			step{"telemetry", sm.telemetry},
			step{"verifier", sm.verify},
			step{"commit and unmount", sm.commitAndUnmount})
		if sm.cell == cells.All["C11"] {
			// C11 overwrote the base file in the workspace: the base Layer
			// itself must still hold the original bytes.
			steps = append(steps, step{"commit and unmount", sm.checkBaseUnchanged})
		}
	}
	return steps
}

// mountTransport is how LayerFS is served on the target id describes: over
// /dev/fuse where the run pinned FUSE over io_uring off (the host left it
// off, has none, or the run asked for /dev/fuse with --fuse-uring=off),
// so that the pin holds whatever the kernel parameter reads meanwhile;
// elsewhere layerfsd's default, io_uring where the kernel grants it.
func mountTransport(id *engine.Identity) string {
	if id.FUSEURing == manifests.FUSEURingOff {
		return daemonapi.TransportDev
	}
	return ""
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
// file when the cell has one (into each of the native reference's
// directories too, as LayerFS's workspaces have it from the base Layer),
// and imports the base as a Layer.
func (sm *sampler) setup(ctx context.Context) error {
	// scratch holds the overlays' data (and the native directories):
	// made whether or not a native reference runs.
	dirs := baseDir + " " + outDir + " " + prefaultDir
	natives := []string{}
	if sm.native {
		natives = []string{nativeDir("1"), nativeDir("2"), nativeDir("3"), nativeDir("4")}
		dirs += " " + strings.Join(natives, " ")
	}
	mk := `mkdir -p ` + scratchDir + ` ` + dirs + ` && chown 65534:65534 ` + dirs
	if _, err := runLayerfsd(ctx, sm.sb, "creating the Store", mk, daemonapi.InitCmd{Store: storeDir, Profile: daemonapi.ProfileDisposable}, daemonapi.DecodeInit); err != nil {
		return err
	}
	if sm.cell.Base != "" {
		files := baseDir + "/" + cells.BaseFile
		copyIn := `cat >` + files
		copies := natives
		if sm.cell.Setup != "" {
			copies = nil // the whole base goes to them after the setup
		}
		for _, d := range copies {
			copyIn += ` && cp ` + baseDir + `/` + cells.BaseFile + ` ` + d + `/`
			files += ` ` + d + `/` + cells.BaseFile
		}
		if _, err := sm.sb.must(ctx, "copying in the base file", true, "/", copyIn+` && chown 65534:65534 `+files, cells.BaseReader); err != nil {
			return err
		}
	}
	if sm.cell.Setup != "" {
		// The setup runs as the body's user in the base directory, and
		// what it leaves is the base: the Layer, and each native
		// directory's copy of it (cp -a: owners and times as made).
		if _, err := sm.sb.must(ctx, "the cell's setup", false, baseDir, `/bin/sh `+BundleDir+`/`+sm.cell.SetupPath(), nil); err != nil {
			return err
		}
		if len(natives) > 0 {
			cp := ""
			for _, d := range natives {
				cp += ` && cp -a ` + baseDir + `/. ` + d + `/`
			}
			if _, err := sm.sb.must(ctx, "copying the base into the native directories", true, "/", "true"+cp, nil); err != nil {
				return err
			}
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
		daemonapi.MountCmd{Store: storeDir, OverlayDir: scratchDir, Workspace: workspaceDir(n), Control: controlPath(n), FuseTransport: sm.transport}, daemonapi.DecodeReady)
}

// warmUp is the untimed identical run on an earlier mount, then its
// unmount, which discards its changes: the warm-up's output goes away
// here, as the native side's does in nativeWarmUp.
func (sm *sampler) warmUp(ctx context.Context) error {
	if _, err := sm.mount(ctx, "1"); err != nil {
		return err
	}
	if err := sm.warmUpBody(ctx, manifests.SideLayerFS, workspaceDir("1")); err != nil {
		return err
	}
	if _, err := runLayerfsd(ctx, sm.sb, "unmounting the warm-up workspace", "", daemonapi.UnmountCmd{Control: controlPath("1")}, daemonapi.DecodeUnmount); err != nil {
		return err
	}
	sm.discarded()
	return nil
}

// discarded marks the last phase, a warm-up, as having its output gone.
func (sm *sampler) discarded() { sm.s.Phases[len(sm.s.Phases)-1].Discarded = true }

// mountTimed mounts the fresh workspace of LayerFS's timed run, timed by
// the daemon.
func (sm *sampler) mountTimed(ctx context.Context) error {
	ready, err := sm.mount(ctx, "2")
	if err != nil {
		return err
	}
	sm.s.MountNs = ready.MountNs
	return nil
}

// timedRun runs the barrier, the prefault and the timed body in the
// fresh workspace.
func (sm *sampler) timedRun(ctx context.Context) error {
	commandNs, execWallNs, err := sm.timedBody(ctx, manifests.SideLayerFS, workspaceDir("2"))
	if err != nil {
		return err
	}
	sm.s.CommandNs, sm.s.ExecWallNs = commandNs, execWallNs
	sm.s.ExecOverheadNs = sm.s.ExecWallNs - sm.s.CommandNs
	return nil
}

// nativeWarmUp is side's (the native reference's, or its repeat's)
// untimed identical run in its earlier directory, whose files are then
// emptied: its output's pages go at the point where LayerFS's unmount
// discards the workspace's, so that both sides enter the barrier with the
// same memory freed. (Kept, its pages would stay in use, and the window
// would write into memory freed long before: on a VM whose balloon
// reports free pages, far slower to write.) Emptied, not removed: under
// protocol 5 the runner frees no inode of its own while samples are
// taken, since on ext4 without a journal every file created scans past
// the inodes freed in the last minutes (see manifests.ProtocolVersion).
func (sm *sampler) nativeWarmUp(ctx context.Context, side string) error {
	warm, _ := nativeDirs(side)
	if err := sm.warmUpBody(ctx, side, warm); err != nil {
		return fmt.Errorf("native reference: %w", err)
	}
	if _, err := sm.sb.must(ctx, "emptying the native warm-up's files", true, "/", emptyFiles(warm), nil); err != nil {
		return err
	}
	sm.discarded()
	return nil
}

// nativeTimedRun is side's barrier, prefault and timed body, in a fresh
// directory beside the warm-up's and the overlays' data.
func (sm *sampler) nativeTimedRun(ctx context.Context, side string) error {
	_, dir := nativeDirs(side)
	commandNs, execWallNs, err := sm.timedBody(ctx, side, dir)
	if err != nil {
		return fmt.Errorf("native reference: %w", err)
	}
	if side == manifests.SideNativeRepeat {
		sm.s.NativeRepeatNs = &commandNs
		return nil
	}
	sm.s.NativeNs, sm.nativeExecWallNs = &commandNs, execWallNs
	return nil
}

// bodyCmd runs the cell's body with its output in side's files.
func (sm *sampler) bodyCmd(side string) string {
	return `/bin/sh ` + BundleDir + `/` + sm.cell.Path() + ` >` + outFile(side, "stdout") + ` 2>` + outFile(side, "stderr")
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

// timedBody runs the write-back barrier, the prefault and then the body
// as BodyUser in dir, in one exec, timed on the Sandbox's clock; records
// the phase with its barrier; and fails when the body did. execWallNs is
// the exec's wall time here less everything before the window, so that
// the exec overhead stays the exec's own.
func (sm *sampler) timedBody(ctx context.Context, side, dir string) (commandNs, execWallNs int64, err error) {
	r, err := sm.sb.exec(ctx, false, dir, writeBack.timed(sm.bodyCmd(side), prefaultFor(sm.cell)), nil)
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
	mount := daemonapi.MountCmd{Store: storeDir, Workspace: workspaceDir("3"), Control: controlPath("3"), Layer: sm.baseLayer, FuseTransport: sm.transport}
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

// emptyFiles is a script that empties every regular file under dir, on
// dir's filesystem only, and frees no inode: their pages and blocks go,
// their inodes and names stay.
func emptyFiles(dir string) string {
	return `find ` + dir + ` -xdev -type f -exec truncate -s 0 {} +`
}
