package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sealbench/sealbench/internal/atomicfile"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision"
	"github.com/sealbench/sealbench/runner/cells"
	"github.com/sealbench/sealbench/runner/stats"
)

// Paths inside a Sandbox. The bundle is the image's, at BundleDir; the
// Store, workspaces and the native reference live under WorkDir.
const (
	BundleDir = "/opt/sealbench"
	WorkDir   = "/run/sealbench"
	// BodyUser runs cell bodies and verifiers: not root, so no capability
	// the container was granted (CAP_SYS_ADMIN, for layerfsd) reaches them,
	// on dockerd and on the stand-in alike.
	BodyUser = "65534:65534"
)

// EngineTarget is one target RunEngine drives: a name for the samples and
// the Engine API endpoint that serves it.
type EngineTarget struct {
	Name     string // local, docker, ...: the target's name in samples and pins
	Endpoint string // e.g. unix:///run/standin.sock
	// Emulated says the target's CPU is emulated (QEMU TCG): pinned, so
	// that the report can say its timings are the emulator's.
	Emulated bool
	// Transport is how the Endpoint reaches the Engine, as pinned:
	// "socket" (the default) or "msb-exec".
	Transport string
}

// EngineOptions says what RunEngine runs, where, and where results go.
type EngineOptions struct {
	// Run is the run whose ledger records every Sandbox before it is
	// created, so that `sealbench teardown --run` finds what a crash left.
	Run     *provision.Run
	Targets []EngineTarget
	// BundleID is build-linux-<hash>, as verified; Image is the Sandbox
	// image, already on every target's Engine under Image.ID.
	BundleID string
	Image    provision.Image
	// RunnerSHA256 and StandinSHA256 are the bundle's digests of the two.
	RunnerSHA256, StandinSHA256 manifests.Digest
	Cells                       []string
	Samples                     int
	Seed                        uint64
	Native                      bool
	OutDir                      string
	LockPath                    string            // the host-wide lock; default /run/lock/sealbench.lock
	Tools                       map[string]string // tool versions to pin (go, docker...), beside each Engine's
	Log                         func(string, ...any)
	// Status, when set, hears the phase of the sample under way ("local
	// C03 3/24: timed run"), for a terminal's status line.
	Status func(string)
}

// engineConn is one target's Engine, connected.
type engineConn struct {
	EngineTarget
	cli     *client.Client
	engine  string // manifests.EngineDockerd or EngineStandin
	version string // the Engine's version
}

// RunEngine runs every cell Samples times on every target under the cache
// protocol, targets and cells in a seeded random interleaving, writing each
// sample to OutDir/samples.jsonl as it completes (fsync'd), and
// OutDir/pins.json at the start and again at the end. A cell that fails is
// kept as failed, never retried. It returns the samples; on an error (the
// context ended, say) the samples so far, all of them already on disk.
func RunEngine(ctx context.Context, o EngineOptions) ([]manifests.Sample, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Status == nil {
		o.Status = func(string) {}
	}
	if o.Samples <= 0 {
		o.Samples = 1
	}
	if o.LockPath == "" {
		o.LockPath = "/run/lock/sealbench.lock"
	}
	if o.Run == nil {
		return nil, errors.New("RunEngine: no run to record Sandboxes in")
	}
	if len(o.Targets) == 0 {
		return nil, errors.New("RunEngine: no targets")
	}
	pins := &manifests.RunPins{
		FormatVersion: manifests.ResultsFormatVersion, RunID: o.Run.ID, BundleID: o.BundleID,
		ImageID: o.Image.ID, ImageLock: o.Image.Lock, ImageRelocked: o.Image.Relocked, RunnerSHA256: o.RunnerSHA256, StandinSHA256: o.StandinSHA256,
		StoreProfile: manifests.StoreDisposable, ConstructionWorkers: 1,
		Tools: map[string]string{}, Cells: o.Cells, Native: o.Native,
		Seed: o.Seed, Samples: o.Samples, Start: time.Now().UTC(),
	}
	for k, v := range o.Tools {
		pins.Tools[k] = v
	}
	conns := map[string]*engineConn{}
	var names []string
	for _, t := range o.Targets {
		if t.Transport == "" {
			t.Transport = "socket"
		}
		if _, dup := conns[t.Name]; dup {
			return nil, fmt.Errorf("target %s named twice", t.Name)
		}
		c, tp, err := connectEngine(ctx, t, o.Image)
		if err != nil {
			return nil, err
		}
		defer c.cli.Close()
		conns[t.Name] = c
		names = append(names, t.Name)
		pins.Targets = append(pins.Targets, tp)
		pins.Tools["engine."+t.Name] = tp.Engine + " " + c.version
	}
	pins.FillDefaults()
	if err := pins.Validate(); err != nil {
		return nil, fmt.Errorf("the run's pins are invalid (a bug): %w", err)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	if err := writePins(o.OutDir, pins); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(o.OutDir, "samples.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()

	var out []manifests.Sample
	slots := stats.Interleave(names, o.Cells, o.Samples, o.Seed)
	for i, slot := range slots {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		c := conns[slot.Target]
		where := fmt.Sprintf("%s %s %d/%d", c.Name, slot.Cell, i+1, len(slots))
		o.Status(where + ": waiting for the host lock")
		unlock, wait, err := lockHost(ctx, o.LockPath)
		if err != nil {
			return out, err
		}
		s := runSample(ctx, c, o, slot.Cell, slot.Round, i, func(phase string) { o.Status(where + ": " + phase) })
		unlock()
		s.LockWaitNs = wait.Nanoseconds()
		if err := s.Validate(); err != nil {
			return out, fmt.Errorf("sample %s round %d is invalid (a bug): %w", s.Cell, s.Round, err)
		}
		line, err := s.MarshalLine()
		if err != nil {
			return out, err
		}
		if _, err := f.Write(line); err != nil {
			return out, fmt.Errorf("writing samples.jsonl: %w", err)
		}
		if err := f.Sync(); err != nil {
			return out, err
		}
		o.Log("%s round %d: %s, command %.1f ms, exec overhead %.2f ms", where, s.Round, sampleSummary(s),
			float64(s.CommandNs)/1e6, float64(s.ExecOverheadNs)/1e6)
		out = append(out, s)
	}
	pins.End = time.Now().UTC()
	return out, writePins(o.OutDir, pins)
}

// connectEngine connects to t's Engine, checks that it holds the pinned
// image, and says what to pin about the target.
func connectEngine(ctx context.Context, t EngineTarget, img provision.Image) (*engineConn, manifests.TargetPins, error) {
	cli, err := provision.NewClient(t.Endpoint)
	if err != nil {
		return nil, manifests.TargetPins{}, fmt.Errorf("target %s: engine %s: %w", t.Name, t.Endpoint, err)
	}
	fail := func(err error) (*engineConn, manifests.TargetPins, error) {
		cli.Close()
		return nil, manifests.TargetPins{}, err
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return fail(fmt.Errorf("target %s: engine %s does not answer: %w", t.Name, t.Endpoint, err))
	}
	ver, err := cli.ServerVersion(ctx)
	if err != nil {
		return fail(fmt.Errorf("target %s: engine %s: %w", t.Name, t.Endpoint, err))
	}
	engine := manifests.EngineDockerd
	if strings.Contains(ver.Platform.Name, "stand-in") {
		engine = manifests.EngineStandin
	}
	have, err := cli.ImageInspect(ctx, img.ID.String())
	if err != nil {
		return fail(fmt.Errorf("the Sandbox image %s is not on %s: %w", img.ID, t.Name, err))
	}
	if have.ID != img.ID.String() {
		return fail(fmt.Errorf("%s reports image id %s for %s, the pinned id is %s: refusing to run on another image", t.Name, have.ID, img.ID, img.ID))
	}
	c := &engineConn{EngineTarget: t, cli: cli, engine: engine, version: ver.Version}
	return c, manifests.TargetPins{Name: t.Name, Engine: engine, Kernel: info.KernelVersion,
		CPUs: info.NCPU, MemoryBytes: info.MemTotal, Emulated: t.Emulated, Transport: t.Transport}, nil
}

func sampleSummary(s manifests.Sample) string {
	if s.Status == manifests.StatusOK {
		return "ok"
	}
	return string(s.Status) + " (" + s.Reason + ")"
}

func writePins(dir string, p *manifests.RunPins) error {
	b, err := p.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "pins.json"), b, 0o644)
}

// lockHost takes the host-wide lock (flock) so that no two samples run at
// once on this host, and says how long it waited.
func lockHost(ctx context.Context, path string) (func(), time.Duration, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, 0, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("opening the host-wide lock %s: %w", path, err)
	}
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, 0, fmt.Errorf("taking the host-wide lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return func() { f.Close() }, time.Since(start), nil
}

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// sandbox runs commands in one container through the Engine API.
type sandbox struct {
	cli    *client.Client
	id     string
	engine string // manifests.EngineDockerd or EngineStandin
}

type execResult struct {
	stdout, stderr []byte
	code           int
	wall           time.Duration
}

// exec runs sh -c script in the Sandbox: with the container's grant
// (layerfsd's steps) or as BodyUser; its wall time covers create, start with
// the stream read to EOF, and inspect, as the runner sees them. A root exec
// keeps the container's capabilities on dockerd, but none on the stand-in
// unless it is privileged; a privileged exec on dockerd asks for every
// capability, which a container without them cannot be given.
func (s *sandbox) exec(ctx context.Context, privileged bool, dir, script string, stdin io.Reader) (execResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cells.Timeout)
	defer cancel()
	opts := container.ExecOptions{
		Cmd: []string{"/bin/sh", "-c", script}, AttachStdout: true, AttachStderr: true,
		AttachStdin: stdin != nil, WorkingDir: dir, Privileged: privileged && s.engine == manifests.EngineStandin,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LC_ALL=C", "TZ=UTC"},
	}
	if !privileged {
		opts.User = BodyUser
	}
	t0 := time.Now()
	created, err := s.cli.ContainerExecCreate(ctx, s.id, opts)
	if err != nil {
		return execResult{}, err
	}
	hr, err := s.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return execResult{}, err
	}
	if stdin != nil {
		go func() {
			io.Copy(hr.Conn, stdin)
			hr.CloseWrite()
		}()
	}
	var stdout, stderr bytes.Buffer
	_, err = stdcopy.StdCopy(&stdout, &stderr, hr.Reader)
	hr.Close()
	if err != nil {
		return execResult{}, err
	}
	insp, err := s.cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return execResult{}, err
	}
	return execResult{stdout: stdout.Bytes(), stderr: stderr.Bytes(), code: insp.ExitCode, wall: time.Since(t0)}, nil
}

// must runs a step that has to succeed, and says which one failed and how.
func (s *sandbox) must(ctx context.Context, step string, privileged bool, dir, script string, stdin io.Reader) (execResult, error) {
	r, err := s.exec(ctx, privileged, dir, script, stdin)
	if err != nil {
		return r, fmt.Errorf("%s: %w", step, err)
	}
	if r.code != 0 {
		return r, fmt.Errorf("%s: exit %d: %s", step, r.code, clip(strings.TrimSpace(string(r.stderr)), 300))
	}
	return r, nil
}

// sandboxShell runs a verifier's scripts in a workspace of the Sandbox.
type sandboxShell struct {
	sb  *sandbox
	dir string
}

func (sh sandboxShell) Sh(ctx context.Context, script string, stdin []byte) ([]byte, error) {
	r, err := sh.sb.exec(ctx, false, sh.dir, script, bytes.NewReader(stdin))
	if err != nil {
		return nil, err
	}
	if r.code != 0 {
		return r.stdout, &cells.ScriptError{ExitCode: r.code, Stderr: string(r.stderr)}
	}
	return r.stdout, nil
}

// layerfsd picks the bundle's daemon for the Sandbox's architecture.
const layerfsd = `case $(uname -m) in x86_64) a=amd64;; aarch64) a=arm64;; *) a=$(uname -m);; esac; L=` + BundleDir + `/bin/linux-$a/layerfsd; `

// timedBody runs a body and prints "start end exit" on the Sandbox's clock.
func timedBody(body string) string {
	return `t0=$(date +%s%N); /bin/sh ` + BundleDir + `/cells/` + body + ` >` + WorkDir + `/out/stdout 2>` + WorkDir + `/out/stderr; rc=$?; t1=$(date +%s%N); echo "$t0 $t1 $rc"`
}

func parseTimed(out []byte) (ns int64, rc int, err error) {
	f := strings.Fields(string(out))
	if len(f) != 3 {
		return 0, 0, fmt.Errorf("timing the body: unexpected output %q", clip(string(out), 200))
	}
	t0, err0 := strconv.ParseInt(f[0], 10, 64)
	t1, err1 := strconv.ParseInt(f[1], 10, 64)
	rc, err2 := strconv.Atoi(f[2])
	if err0 != nil || err1 != nil || err2 != nil || t1 < t0 {
		return 0, 0, fmt.Errorf("timing the body: unexpected output %q", clip(string(out), 200))
	}
	return t1 - t0, rc, nil
}

// runSample runs one cell once under the cache protocol in a fresh
// Sandbox: bundle check; a Disposable Store with the cell's base imported
// (an empty base owned by BodyUser otherwise); a warm-up mount, run and
// unmount; a fresh mount, the timed body, the verifier, telemetry, Commit and
// unmount; the native reference when asked.
func runSample(ctx context.Context, c *engineConn, o EngineOptions, cellName string, round, order int, phase func(string)) manifests.Sample {
	s := manifests.Sample{
		FormatVersion: manifests.ResultsFormatVersion, RunID: o.Run.ID, BundleID: o.BundleID,
		Target: c.Name, Cell: cellName, Round: round, Order: order,
		Verifier: manifests.VerifierNotRun, FUSERequests: map[string]int64{},
		Load1: load1(), Start: time.Now().UTC(),
	}
	err := func() error {
		cell, err := cells.Lookup(cellName)
		if err != nil {
			return err
		}
		phase("creating the Sandbox")
		cli := c.cli
		name := fmt.Sprintf("%s-%03d-%s", c.Name, order, strings.ToLower(cellName))
		id, err := provision.CreateSandbox(ctx, o.Run, c.Name, c.Endpoint, cli, o.Image, name, []string{"sleep", "infinity"})
		if err != nil {
			return err
		}
		defer cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
		if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
			return fmt.Errorf("starting the Sandbox: %w", err)
		}
		sb := &sandbox{cli: cli, id: id, engine: c.engine}
		phase("sha256sum -c of the bundle")
		if _, err := sb.must(ctx, "checking the bundle with sha256sum -c", false, BundleDir, "sha256sum -c --quiet SHA256SUMS", nil); err != nil {
			return err
		}
		w := WorkDir
		// The overlays' data files and the native reference's directory
		// are made side by side in scratch: on ext4 what creating a file
		// costs depends on where its directory lands (here 30 µs in one
		// block group, 700 µs in another), so LayerFS and native must be
		// neighbours for their ratio to mean anything.
		native := w + "/scratch/native"
		setup := layerfsd + `mkdir -p ` + w + `/base ` + w + `/out ` + native + ` && chown 65534:65534 ` + w + `/base ` + w + `/out ` + native + ` && ` +
			`$L init --store ` + w + `/store --profile disposable >/dev/null`
		if _, err := sb.must(ctx, "creating the Store", true, "/", setup, nil); err != nil {
			return err
		}
		if cell.Base != "" {
			if _, err := sb.must(ctx, "copying in the base file", true, "/", `cat >`+w+`/base/`+cells.BaseFile+` && chown 65534:65534 `+w+`/base/`+cells.BaseFile, cells.BaseReader()); err != nil {
				return err
			}
		}
		phase("setup")
		imp, err := sb.must(ctx, "importing the base Layer", true, "/", layerfsd+`$L import --store `+w+`/store --from `+w+`/base -m base`, nil)
		if err != nil {
			return err
		}
		baseLayer := strings.TrimSpace(string(imp.stdout))
		mount := func(n string) (int64, error) {
			r, err := sb.must(ctx, "mounting workspace "+n, true, "/", layerfsd+`mkdir -p `+w+`/ws`+n+` && $L mount --json --store `+w+`/store --overlay-dir `+w+`/scratch --workspace `+w+`/ws`+n+` --control `+w+`/ctl`+n, nil)
			if err != nil {
				return 0, err
			}
			var m struct{ MountNs int64 }
			if err := json.Unmarshal(r.stdout, &m); err != nil {
				return 0, fmt.Errorf("mounting workspace %s: reading layerfsd's answer %q: %w", n, clip(string(r.stdout), 200), err)
			}
			return m.MountNs, nil
		}
		layerfsdJSON := func(step, args string, v any) error {
			r, err := sb.must(ctx, step, true, "/", layerfsd+`$L `+args+` --json`, nil)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(r.stdout, v); err != nil {
				return fmt.Errorf("%s: reading layerfsd's answer %q: %w", step, clip(string(r.stdout), 200), err)
			}
			return nil
		}
		// Warm-up: an identical run on an earlier mount, then its unmount.
		phase("warm-up")
		if _, err := mount("1"); err != nil {
			return err
		}
		if _, err := sb.exec(ctx, false, w+"/ws1", timedBody(cell.Body), nil); err != nil {
			return fmt.Errorf("warm-up run: %w", err)
		}
		var um struct{ DurationNs int64 }
		if err := layerfsdJSON("unmounting the warm-up workspace", "unmount --control "+w+"/ctl1", &um); err != nil {
			return err
		}
		// The timed run, on a fresh mount.
		phase("timed run")
		if s.MountNs, err = mount("2"); err != nil {
			return err
		}
		r, err := sb.exec(ctx, false, w+"/ws2", timedBody(cell.Body), nil)
		if err != nil {
			return fmt.Errorf("timed run: %w", err)
		}
		ns, rc, err := parseTimed(r.stdout)
		if err != nil {
			return err
		}
		s.CommandNs, s.ExecWallNs = ns, r.wall.Nanoseconds()
		s.ExecOverheadNs = s.ExecWallNs - s.CommandNs
		if rc != 0 {
			stderr, _ := sb.exec(ctx, false, "/", "cat "+w+"/out/stderr", nil)
			return fmt.Errorf("the body exited %d: %s", rc, clip(strings.TrimSpace(string(stderr.stdout)), 300))
		}
		// Telemetry first, so that its counts cover the body alone and not
		// the verifier's reads.
		var st struct {
			Requests      map[string]struct{ Count int64 }
			SQLStatements int64
			StoreUsage    struct{ DBBytes, BlobBytes int64 }
			OverlayBytes  int64
		}
		if err := layerfsdJSON("reading telemetry", "stats --control "+w+"/ctl2", &st); err != nil {
			return err
		}
		for op, c := range st.Requests {
			s.FUSERequests[op] = c.Count
		}
		s.Statements, s.StoreBytes, s.OverlayBytes = st.SQLStatements, st.StoreUsage.DBBytes+st.StoreUsage.BlobBytes, st.OverlayBytes
		phase("verifier")
		stdout, err := sb.must(ctx, "reading the body's output", false, "/", "cat "+w+"/out/stdout", nil)
		if err != nil {
			return err
		}
		v, err := cell.Verifier().Verify(ctx, sandboxShell{sb: sb, dir: w + "/ws2"}, stdout.stdout)
		if err != nil {
			return err
		}
		s.Files, s.Bytes = v.Files, v.Bytes
		s.Verifier, s.VerifierDetail = manifests.VerifierPass, ""
		if !v.Pass {
			s.Verifier, s.VerifierDetail = manifests.VerifierFail, v.Detail
		}
		phase("commit and unmount")
		var cm struct{ DurationNs int64 }
		if err := layerfsdJSON("committing", "commit --control "+w+"/ctl2 -m "+cellName, &cm); err != nil {
			return err
		}
		s.CommitNs = cm.DurationNs
		if err := layerfsdJSON("unmounting", "unmount --control "+w+"/ctl2", &um); err != nil {
			return err
		}
		s.UnmountNs = um.DurationNs
		if cellName == "C11" {
			// C11 overwrote the base file in the workspace: the base Layer
			// itself must still hold the original bytes.
			r, err := sb.must(ctx, "checking the base Layer is unchanged", true, "/", layerfsd+`mkdir -p `+w+`/ws3 && $L mount --store `+w+`/store --workspace `+w+`/ws3 --control `+w+`/ctl3 --layer `+baseLayer+` >/dev/null && `+
				`sha256sum `+w+`/ws3/`+cells.BaseFile+`; rc=$?; $L unmount --control `+w+`/ctl3 >/dev/null; exit $rc`, nil)
			if err != nil {
				return err
			}
			if f := strings.Fields(string(r.stdout)); len(f) == 0 || "sha256:"+f[0] != cells.BaseDigest().String() {
				s.Verifier, s.VerifierDetail = manifests.VerifierFail, "the base Layer changed: its "+cells.BaseFile+" is "+clip(string(r.stdout), 80)
				v.Pass = false
			}
		}
		if o.Native {
			phase("native reference")
			prep := "true"
			if cell.Base != "" {
				prep = "cp " + w + "/base/" + cells.BaseFile + " " + native + "/"
			}
			if _, err := sb.must(ctx, "preparing the native reference", false, native, prep, nil); err != nil {
				return err
			}
			r, err := sb.exec(ctx, false, native, timedBody(cell.Body), nil)
			if err != nil {
				return fmt.Errorf("native reference: %w", err)
			}
			ns, rc, err := parseTimed(r.stdout)
			if err != nil || rc != 0 {
				return fmt.Errorf("native reference: exit %d %v", rc, err)
			}
			s.NativeNs = &ns
		}
		if !v.Pass {
			return fmt.Errorf("the verifier failed: %s", clip(v.Detail, 300))
		}
		return nil
	}()
	s.End = time.Now().UTC()
	s.Status = manifests.StatusOK
	if err != nil {
		s.Status, s.Reason = manifests.StatusFailed, clip(err.Error(), 500)
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
