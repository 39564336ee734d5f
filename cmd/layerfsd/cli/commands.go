//go:build linux

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/internal/cliutil"
	"github.com/sealbench/sealbench/internal/sockpath"
	"github.com/sealbench/sealbench/layerfs"
	"github.com/sealbench/sealbench/layerfs/daemonapi"
	"github.com/sealbench/sealbench/layerfs/uring"
	"github.com/spf13/cobra"
)

// onStore makes c a subcommand that works on an existing Store: it adds
// --store, checks it and the other required flags, opens the Store for run
// and closes it afterwards. Every Store subcommand had these lines.
//
// Every Store is checked when opened (layerfs.CheckQuick); --full-check
// runs PRAGMA integrity_check instead. validate, when set, checks the
// other flags before the Store is opened.
func onStore(c *cobra.Command, required []string, validate func() error, run func(ctx context.Context, s *layerfs.Store, args []string) error) *cobra.Command {
	var dir string
	var full bool
	c.Flags().StringVar(&dir, "store", "", "Store directory")
	c.Flags().BoolVar(&full, "full-check", false, fullCheckHelp)
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := requireFlags(c, append([]string{"store"}, required...)...); err != nil {
			return err
		}
		if validate != nil {
			if err := validate(); err != nil {
				return err
			}
		}
		s, err := layerfs.OpenWith(c.Context(), dir, layerfs.OpenOptions{Check: checkLevel(full)})
		if err != nil {
			return err
		}
		defer s.Close()
		return run(c.Context(), s, args)
	}
	return c
}

// fullCheckHelp is --full-check's help.
const fullCheckHelp = "check the whole Store database (PRAGMA integrity_check) before using it, instead of the quick check every command does"

func checkLevel(full bool) layerfs.CheckLevel {
	if full {
		return layerfs.CheckFull
	}
	return layerfs.CheckQuick
}

// resolve finds a Layer for each id or unique prefix, in order.
func resolve(ctx context.Context, s *layerfs.Store, ids ...string) ([]*layerfs.Layer, error) {
	ls := make([]*layerfs.Layer, len(ids))
	for i, id := range ids {
		l, err := s.ResolveLayer(ctx, id)
		if err != nil {
			return nil, err
		}
		ls[i] = l
	}
	return ls, nil
}

// onControl makes c a subcommand that talks to a running daemon: it adds
// --control and --timeout (default timeout), checks --control and hands
// run a client for the socket.
func onControl(c *cobra.Command, timeout time.Duration, run func(ctx context.Context, cl *layerfs.Client) error) *cobra.Command {
	cl := &layerfs.Client{}
	c.Flags().StringVar(&cl.Socket, "control", "", "control socket of the daemon")
	c.Flags().DurationVar(&cl.Timeout, "timeout", timeout, "how long to wait for the daemon")
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := requireFlags(c, "control"); err != nil {
			return err
		}
		if err := sockpath.Check("--control", cl.Socket); err != nil {
			return err
		}
		if cl.Timeout < 0 {
			return usageError{fmt.Errorf("--timeout %v: give a positive duration, such as 10s", cl.Timeout)}
		}
		return run(c.Context(), cl)
	}
	return c
}

func cmdInit(g *globals) *cobra.Command {
	var store, profile string
	c := &cobra.Command{
		Use:   "init --store DIR [--profile disposable|fast|durable]",
		Short: "create a new, empty Store",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireFlags(c, "store"); err != nil {
				return err
			}
			p, err := layerfs.ParseProfile(profile)
			if err != nil {
				return usageError{err}
			}
			s, err := layerfs.Init(c.Context(), store, p)
			if err != nil {
				return err
			}
			defer s.Close()
			return g.print(daemonapi.InitResult{Store: s.Dir(), Profile: p, Schema: layerfs.SchemaVersion}, func(w io.Writer) {
				fmt.Fprintf(w, "initialized %s store in %s\n", p, s.Dir())
			})
		},
	}
	c.Flags().StringVar(&store, "store", "", "Store directory (must not exist, or be empty)")
	c.Flags().StringVar(&profile, "profile", string(layerfs.ProfileDurable), "durability: disposable, fast or durable")
	return c
}

func cmdImport(g *globals) *cobra.Command {
	var from, msg, parent string
	c := onStore(&cobra.Command{
		Use:   "import --store DIR --from DIR [-m MSG]",
		Short: "commit a directory tree as a new Layer and print its id",
		Args:  exactArgs(0),
	}, []string{"from"}, func() error {
		return layerfs.CheckImportSource(from)
	}, func(ctx context.Context, s *layerfs.Store, _ []string) error {
		opts := layerfs.ImportOptions{Message: msg}
		if parent != "" {
			p, err := resolve(ctx, s, parent)
			if err != nil {
				return err
			}
			opts.Parent = p[0].ID
		}
		l, err := s.Import(ctx, from, opts)
		if err != nil {
			return err
		}
		return g.print(l, func(w io.Writer) { fmt.Fprintln(w, l.ID) })
	})
	c.Flags().StringVar(&from, "from", "", "directory to import")
	c.Flags().StringVarP(&msg, "message", "m", "", "Layer message")
	c.Flags().StringVar(&parent, "parent", "", "parent Layer id (default: none)")
	return c
}

type mountFlags struct {
	store, workspace, control, layer string
	overlayDir                       string
	noPassthrough                    bool
	transport                        string
	readyTimeout                     time.Duration
	fullCheck                        bool
}

// fuseTransportHelp is --fuse-transport's help.
const fuseTransportHelp = "how FUSE requests reach the daemon: auto (io_uring where the kernel grants it, /dev/fuse otherwise), uring (io_uring or fail) or dev (/dev/fuse)"

// mountOptions checks the flags that become the Workspace's MountOptions.
func (f *mountFlags) mountOptions() (layerfs.MountOptions, error) {
	tr, err := uring.ParseTransport(f.transport)
	if err != nil {
		return layerfs.MountOptions{}, usageError{fmt.Errorf("--fuse-transport: %w", err)}
	}
	return layerfs.MountOptions{NoPassthrough: f.noPassthrough, OverlayDir: f.overlayDir, Transport: tr}, nil
}

func (f *mountFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.store, "store", "", "Store directory")
	c.Flags().StringVar(&f.workspace, "workspace", "", "mount point: an empty directory")
	c.Flags().StringVar(&f.control, "control", "", "control socket path (created, mode 0600)")
	c.Flags().StringVar(&f.layer, "layer", "", "Layer id or unique prefix (default: the newest Layer)")
	c.Flags().BoolVar(&f.noPassthrough, "no-passthrough", false, "serve file data through the daemon instead of FUSE passthrough")
	c.Flags().StringVar(&f.overlayDir, "overlay-dir", "", "directory for the overlay's data files (default: inside the Store; a tmpfs makes creates faster)")
	c.Flags().StringVar(&f.transport, "fuse-transport", string(uring.Auto), fuseTransportHelp)
	c.Flags().BoolVar(&f.fullCheck, "full-check", false, fullCheckHelp+" (before the mount, outside its timed window)")
}

// validate checks the mount's flags before anything starts.
func (f *mountFlags) validate(c *cobra.Command) error {
	if err := requireFlags(c, "store", "workspace", "control"); err != nil {
		return err
	}
	if _, err := f.mountOptions(); err != nil {
		return err
	}
	if c.Flags().Lookup("ready-timeout") != nil && f.readyTimeout <= 0 {
		return usageError{fmt.Errorf("--ready-timeout %v: give a positive duration, such as 1m", f.readyTimeout)}
	}
	for _, p := range []struct{ flag, path string }{{"--control", f.control}, {"--overlay-dir", f.overlayDir}, {"--store", f.store}} {
		if p.path != "" && within(p.path, f.workspace) {
			return usageError{fmt.Errorf("%s %q is inside --workspace %q, which the mount hides; give it a path outside the Workspace", p.flag, p.path, f.workspace)}
		}
	}
	// A Workspace inside what the daemon itself reads and writes would
	// serve requests by making requests to itself: it would hang.
	for _, p := range []struct{ flag, path, what string }{
		{"--store", f.store, "the Store"},
		{"--overlay-dir", f.overlayDir, "the overlay directory"},
	} {
		if p.path != "" && within(f.workspace, p.path) {
			return usageError{fmt.Errorf("--workspace %q is inside %s %q (%s), which the daemon reads and writes itself; give --workspace a mount point outside it", f.workspace, p.flag, p.path, p.what)}
		}
	}
	if f.overlayDir != "" {
		st, err := os.Stat(f.overlayDir)
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist):
			return usageError{fmt.Errorf("--overlay-dir %q does not exist; create it first (mkdir -p %s), or leave --overlay-dir out to keep the overlay in the Store", f.overlayDir, f.overlayDir)}
		case err != nil:
			return usageError{fmt.Errorf("--overlay-dir %q: %w", f.overlayDir, err)}
		case !st.IsDir():
			return usageError{fmt.Errorf("--overlay-dir %q is not a directory; give it a directory (a tmpfs, say)", f.overlayDir)}
		}
	}
	return layerfs.CheckControl(f.control)
}

// within says whether path is dir or under it, after symbolic links (of
// the parts that exist) are followed.
func within(path, dir string) bool {
	p, err1 := realPath(path)
	d, err2 := realPath(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// realPath is path made absolute, with the symbolic links of its longest
// existing prefix followed.
func realPath(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest), nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest), nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// precheck is what mount checks before it starts a daemon, so that a
// refusal leaves nothing behind (not even a line in daemon.log): the Store
// (opened, checked at level, closed), the Layer, the mount point. The
// daemon then reads the Store's header only; this check is outside the
// mount's timed window, and leaves it nothing to do (see daemonize).
func (f *mountFlags) precheck(ctx context.Context) error {
	// The check's garbage is collected, and its memory given back, before
	// the daemon starts, not by this process's collector and scavenger
	// while the daemon times its mount.
	defer debug.FreeOSMemory()
	s, err := layerfs.OpenWith(ctx, f.store, layerfs.OpenOptions{Check: checkLevel(f.fullCheck)})
	if err != nil {
		return err
	}
	defer s.Close()
	if f.layer != "" {
		if _, err := s.ResolveLayer(ctx, f.layer); err != nil {
			return err
		}
	}
	return layerfs.CheckMountpoint(f.workspace)
}

// readyMsg is what the daemon writes on its ready pipe: its ReadyInfo, or
// why it failed and with which exit code.
type readyMsg struct {
	Ready    *layerfs.ReadyInfo `json:"ready,omitempty"`
	Error    string             `json:"error,omitempty"`
	ExitCode int                `json:"exitCode,omitempty"`
}

func cmdMount(g *globals) *cobra.Command {
	var f mountFlags
	c := &cobra.Command{
		Use:   "mount --store DIR --workspace MNT --control SOCK [--layer ID] [--fuse-transport auto|uring|dev]",
		Short: "mount a Workspace in a background daemon; returns once it is ready",
		Long: `Mount a Workspace in a background daemon; returns once it is ready.

The Store is checked first, outside the mount's timed window (mountNs): the
quick check every command does (the database's header, and PRAGMA
quick_check up to 64 MiB), or PRAGMA integrity_check with --full-check. A
damaged Store is refused with exit 3. The daemon logs to daemon.log in the
Store: every I/O error it answers the kernel with, once per cause.

--fuse-transport auto (the default) serves the kernel's requests over FUSE
over io_uring (Linux 6.14+, root, and the fuse module's enable_uring on:
echo Y > /sys/module/fuse/parameters/enable_uring) where the kernel grants
it, and over /dev/fuse otherwise; the mount's answer (and stats) says which,
and why not io_uring.`,
		Example: `  layerfsd mount --store /s/store --workspace /s/ws --control /s/ctl
  layerfsd mount --store /s/store --workspace /s/ws --control /s/ctl --fuse-transport uring --json`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.validate(c); err != nil {
				return err
			}
			if err := f.precheck(c.Context()); err != nil {
				return err
			}
			info, err := daemonize(c.Context(), &f)
			if err != nil {
				return err
			}
			return g.print(info, func(w io.Writer) {
				for _, s := range info.StaleFixed {
					fmt.Fprintf(w, "cleaned up: %s\n", s)
				}
				fmt.Fprintf(w, "mounted %s at %s (daemon pid %d, control %s, mount %.2f ms, %s)\n",
					orEmpty(info.Layer), info.Workspace, info.PID, info.Control, float64(info.MountNs)/1e6, transportLine(info.Features))
			})
		},
	}
	f.add(c)
	c.Flags().DurationVar(&f.readyTimeout, "ready-timeout", time.Minute, "how long to wait for the daemon to be ready")
	return c
}

// transportLine says which transport serves a mount, and why not io_uring
// when it could have been.
func transportLine(f daemonapi.Features) string {
	s := "over /dev/fuse"
	if f.Transport == daemonapi.TransportURing {
		s = "over io_uring"
	}
	if f.TransportReason != "" {
		s += " (" + f.TransportReason + ")"
	}
	return s
}

func orEmpty(layer string) string {
	if layer == "" {
		return "an empty Layer"
	}
	return "layer " + layer
}

// daemonize starts `layerfsd serve` in a new session, detached from the
// terminal, and waits until it says it is ready (or why not) on a pipe.
func daemonize(ctx context.Context, f *mountFlags) (*layerfs.ReadyInfo, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting daemon: %w", err)
	}
	args := []string{"serve", "--store", f.store, "--workspace", f.workspace, "--control", f.control, "--ready-fd", "3"}
	if f.layer != "" {
		args = append(args, "--layer", f.layer)
	}
	if f.noPassthrough {
		args = append(args, "--no-passthrough")
	}
	if f.overlayDir != "" {
		args = append(args, "--overlay-dir", f.overlayDir)
	}
	// precheck checked the Store: the daemon reads its header only, and
	// so does no work it would carry into the mount's timed window.
	args = append(args, "--fuse-transport", f.transport, "--store-checked")
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting daemon: %w", err)
	}
	defer r.Close()
	logPath := filepath.Join(os.TempDir(), "layerfsd.log")
	if st, err := os.Stat(f.store); err == nil && st.IsDir() {
		logPath = filepath.Join(f.store, "daemon.log")
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("starting daemon: opening log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("starting daemon %s: %w", exe, err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	line := make(chan []byte, 1)
	go func() {
		b, _ := bufio.NewReader(r).ReadBytes('\n')
		line <- b
	}()
	var b []byte
	select {
	case b = <-line:
	case <-time.After(f.readyTimeout):
		cmd.Process.Kill()
		return nil, &codedError{daemonapi.ExitDaemonDied, fmt.Sprintf("daemon pid %d not ready within %v; killed it (log: %s)", cmd.Process.Pid, f.readyTimeout, logPath)}
	case <-ctx.Done():
		cmd.Process.Kill()
		return nil, ctx.Err()
	}
	var m readyMsg
	if len(b) == 0 || json.Unmarshal(b, &m) != nil {
		err := <-exited
		return nil, &codedError{daemonapi.ExitDaemonDied, fmt.Sprintf("daemon exited before it was ready (%v); log: %s", err, logPath)}
	}
	if m.Ready == nil {
		<-exited
		return nil, &codedError{m.ExitCode, m.Error}
	}
	cmd.Process.Release()
	return m.Ready, nil
}

func cmdServe(g *globals) *cobra.Command {
	var f mountFlags
	var readyFD int
	var wait time.Duration
	var checked bool
	c := &cobra.Command{
		Use:    "serve --store DIR --workspace MNT --control SOCK [--layer ID]",
		Short:  "serve a Workspace in the foreground (what mount runs in the background)",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.validate(c); err != nil {
				return err
			}
			var ready *os.File
			if readyFD > 0 {
				ready = os.NewFile(uintptr(readyFD), "ready")
			}
			mo, err := f.mountOptions()
			if err != nil {
				return err
			}
			cfg := layerfs.ServeConfig{Store: f.store, Workspace: f.workspace, Control: f.control, Layer: f.layer,
				UnmountWait: wait, Mount: mo, Check: checkLevel(f.fullCheck)}
			if checked {
				cfg.Check = layerfs.CheckHeader
			}
			err = layerfs.Serve(c.Context(), cfg, func(info layerfs.ReadyInfo) {
				if ready != nil {
					b, _ := json.Marshal(readyMsg{Ready: &info})
					ready.Write(append(b, '\n'))
					ready.Close()
					ready = nil
				} else {
					g.print(info, func(w io.Writer) { fmt.Fprintf(w, "ready: %s at %s\n", orEmpty(info.Layer), info.Workspace) })
				}
			})
			if err != nil && ready != nil {
				b, _ := json.Marshal(readyMsg{Error: err.Error(), ExitCode: ExitCode(err)})
				ready.Write(append(b, '\n'))
				ready.Close()
			}
			return err
		},
	}
	f.add(c)
	c.Flags().IntVar(&readyFD, "ready-fd", 0, "descriptor to report readiness on")
	c.Flags().BoolVar(&checked, "store-checked", false, "the Store was checked a moment ago (by mount): read its header only")
	c.Flags().DurationVar(&wait, "unmount-wait", 2*time.Second, "how long unmount waits for open files before unmounting lazily")
	return c
}

func cmdCommit(g *globals) *cobra.Command {
	var msg string
	c := onControl(&cobra.Command{
		Use:   "commit --control SOCK [-m MSG]",
		Short: "commit the Workspace as a new Layer; prints its id, or UpToDate",
		Args:  exactArgs(0),
	}, 10*time.Minute, func(ctx context.Context, cl *layerfs.Client) error {
		res, err := cl.Commit(ctx, msg)
		if err != nil {
			return err
		}
		return g.print(res, func(w io.Writer) {
			if res.UpToDate {
				fmt.Fprintln(w, "UpToDate")
			} else {
				fmt.Fprintln(w, res.Layer.ID)
			}
		})
	})
	c.Flags().StringVarP(&msg, "message", "m", "", "Layer message")
	return c
}

func cmdStats(g *globals) *cobra.Command {
	return onControl(&cobra.Command{
		Use:   "stats --control SOCK [--json]",
		Short: "print the Workspace's telemetry",
		Args:  exactArgs(0),
	}, 10*time.Second, func(ctx context.Context, cl *layerfs.Client) error {
		st, err := cl.Stats(ctx)
		if err != nil {
			return err
		}
		return g.print(st, func(w io.Writer) { printStats(w, st) })
	})
}

func printStats(w io.Writer, st *layerfs.Stats) {
	fmt.Fprintf(w, "workspace     %s\nstore         %s (%s)\nbase layer    %s\n", st.Mountpoint, st.Store, st.Profile, st.Base)
	fmt.Fprintf(w, "mount         %.3f ms\nlast commit   %.3f ms (%d commits)\n", float64(st.MountNs)/1e6, float64(st.LastCommitNs)/1e6, st.Commits)
	fmt.Fprintf(w, "store bytes   db %d, blobs %d (%d blobs, %d trees, %d layers)\n", st.StoreUsage.DBBytes, st.StoreUsage.BlobBytes, st.StoreUsage.Blobs, st.StoreUsage.Trees, st.StoreUsage.Layers)
	fmt.Fprintf(w, "overlay       %d bytes in %d files; %d copy-ups (%d lazy, %d cloned, %d bytes copied), %d whiteouts, %d opaque dirs\n", st.OverlayBytes, st.OverlayFiles, st.CopyUps, st.LazyCopyUps, st.ClonedCopyUps, st.CopyUpBytes, st.Whiteouts, st.OpaqueDirs)
	fmt.Fprintf(w, "sql           %d statements\n", st.SQLStatements)
	f := st.Features
	fmt.Fprintf(w, "features      passthrough=%v writeback=%v maxWrite=%d entry/attr/negative timeout=%v/%v/%v readdirplus=%v killpriv_v2=%v protocol=%s\n",
		f.Passthrough, f.WritebackCache, f.MaxWrite, time.Duration(f.EntryTimeoutNs), time.Duration(f.AttrTimeoutNs), time.Duration(f.NegativeTimeoutNs), f.ReaddirPlus, f.KillPrivV2, f.KernelProtocol)
	ts := st.TransportStats
	fmt.Fprintf(w, "transport     %s: %d requests on the rings, %d on /dev/fuse, %d forgets\n", transportLine(f), ts.RingRequests, ts.DevRequests, ts.Forgets)
	for _, q := range ts.Queues {
		fmt.Fprintf(w, "  queue %-3d    %8d  pinned=%v\n", q.CPU, q.Requests, q.Pinned)
	}
	fmt.Fprintf(w, "requests      %d, median %.2f µs\n", st.AllRequests.Count, float64(st.AllRequests.MedianNs)/1e3)
	var names []string
	for k := range st.Requests {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		o := st.Requests[k]
		fmt.Fprintf(w, "  %-14s %8d  median %7.2f µs  total %9.3f ms\n", k, o.Count, float64(o.MedianNs)/1e3, float64(o.TotalNs)/1e6)
	}
}

func cmdUnmount(g *globals) *cobra.Command {
	var workspace, store string
	c := onControl(&cobra.Command{
		Use:   "unmount --control SOCK [--workspace MNT] [--store DIR]",
		Short: "unmount the Workspace (uncommitted changes are discarded); the daemon exits",
		Long: `Unmount the Workspace (uncommitted changes are discarded); the daemon exits.

When nobody answers on the control socket because the daemon died, the
mount it left (which answers "Transport endpoint is not connected") is
cleared given --workspace or --store: detached lazily, its FUSE connection
aborted (/sys/fs/fuse/connections/N/abort) so that nothing hangs on it, the
stale socket removed, and with --store the mount record and overlay; then
unmount exits 0. With --store it clears only when the Store's mount lock is
free, which only a dead daemon leaves it; with --workspace alone, only a
mount that answers as dead.`,
		Example: `  layerfsd unmount --control /s/ctl
  layerfsd unmount --control /s/ctl --store /s/store   # also when the daemon died`,
		Args: exactArgs(0),
	}, time.Minute, func(ctx context.Context, cl *layerfs.Client) error {
		res, err := cl.Unmount(ctx)
		if errors.Is(err, layerfs.ErrNoAnswer) {
			if workspace == "" && store == "" {
				return fmt.Errorf("%w; if its daemon died, give --workspace or --store to clear the mount it left", err)
			}
			fixed, cerr := layerfs.ClearDeadMount(store, workspace, cl.Socket)
			if cerr != nil {
				return fmt.Errorf("%w; %v", err, cerr)
			}
			return g.print(daemonapi.UnmountResult{Cleared: fixed}, func(w io.Writer) {
				fmt.Fprintln(w, "nobody answered on", cl.Socket, "(the daemon is gone)")
				for _, s := range fixed {
					fmt.Fprintln(w, "cleared:", s)
				}
			})
		}
		if err != nil {
			return err
		}
		return g.print(res, func(w io.Writer) {
			how := "unmounted"
			if res.Lazy {
				how = "unmounted lazily (files were still open; their connection was aborted)"
			}
			fmt.Fprintf(w, "%s in %.3f ms\n", how, float64(res.DurationNs)/1e6)
		})
	})
	c.Flags().StringVar(&workspace, "workspace", "", "the Workspace's mount point, to clear if its daemon died")
	c.Flags().StringVar(&store, "store", "", "the Store, to clear its mount if its daemon died (the Store's lock tells)")
	return c
}

func cmdLog(g *globals) *cobra.Command {
	return onStore(&cobra.Command{
		Use:   "log --store DIR [--json]",
		Short: "list the Store's Layers, newest first",
		Args:  exactArgs(0),
	}, nil, nil, func(ctx context.Context, s *layerfs.Store, _ []string) error {
		ls, err := s.Log(ctx)
		if err != nil {
			return err
		}
		if ls == nil {
			ls = []*layerfs.Layer{}
		}
		return g.print(ls, func(w io.Writer) {
			for _, l := range ls {
				parent := "-"
				if !l.Parent.IsZero() {
					parent = l.Parent.Short()
				}
				fmt.Fprintf(w, "%s  %s  parent %s  %s\n", l.ID, l.Time.UTC().Format(time.RFC3339), parent, cliutil.Printable(l.Message))
			}
		})
	})
}

func cmdShow(g *globals) *cobra.Command {
	return onStore(&cobra.Command{
		Use:   "show --store DIR ID",
		Short: "show one Layer",
		Args:  exactArgs(1),
	}, nil, nil, func(ctx context.Context, s *layerfs.Store, args []string) error {
		ls, err := resolve(ctx, s, args...)
		if err != nil {
			return err
		}
		l := ls[0]
		return g.print(l, func(w io.Writer) {
			parent := "-"
			if !l.Parent.IsZero() {
				parent = l.Parent.String()
			}
			fmt.Fprintf(w, "layer   %s\nparent  %s\ntime    %s\ntree    %s\nmessage %s\n", l.ID, parent, l.Time.UTC().Format(time.RFC3339Nano), l.Root.Content, cliutil.Printable(l.Message))
		})
	})
}

func cmdDiff(g *globals) *cobra.Command {
	return onStore(&cobra.Command{
		Use:   "diff --store DIR A B",
		Short: "list how Layer B differs from Layer A (A added, D deleted, M modified, m metadata only)",
		Args:  exactArgs(2),
	}, nil, nil, func(ctx context.Context, s *layerfs.Store, args []string) error {
		ls, err := resolve(ctx, s, args...)
		if err != nil {
			return err
		}
		changes, err := s.Diff(ctx, ls[0], ls[1])
		if err != nil {
			return err
		}
		if changes == nil {
			changes = []layerfs.Change{}
		}
		return g.print(changes, func(w io.Writer) {
			for _, ch := range changes {
				fmt.Fprintf(w, "%s %s\n", ch.Kind, cliutil.Printable(ch.Path))
			}
		})
	})
}

func cmdCheck(g *globals) *cobra.Command {
	var store string
	var quick bool
	c := &cobra.Command{
		Use:   "check --store DIR [--quick]",
		Short: "check a Store whole: its database and every blob; exit 3 when it is damaged",
		Long: `Check a Store: PRAGMA integrity_check, which reads every page of the
database and checks every index against its table, then every blob, read
whole and compared with its digest. Each damaged or missing blob is listed
with the Layers and paths it breaks. With --quick, only the check every
command does when it opens a Store (the database's header against the
file's size, and PRAGMA quick_check up to 64 MiB), no blob read.

It prints what ran, on how large a database and how many blobs, and how
long it took. A damaged Store (a bad database page, a blob damaged or
missing) exits 3 with the problems found. A damaged Store is restored from
a backup, or its trees re-imported into a new Store (layerfsd init, then
layerfsd import); a Workspace answers EIO for a damaged or missing blob.`,
		Example: `  layerfsd check --store /s/store
  layerfsd check --store /s/store --quick --json`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := requireFlags(c, "store"); err != nil {
				return err
			}
			level := layerfs.CheckFull
			if quick {
				level = layerfs.CheckQuick
			}
			res, err := layerfs.Check(c.Context(), store, level, !quick)
			if err != nil {
				return err
			}
			if !res.OK {
				if !g.json {
					for _, p := range res.Problems {
						fmt.Fprintf(g.stdout, "%s: %s\n", res.FoundBy, p)
					}
				}
				return &layerfs.DamageError{Store: store, Check: res.FoundBy, Problems: res.Problems}
			}
			return g.print(res, func(w io.Writer) {
				fmt.Fprintf(w, "store %s: ok (%s of %.1f MiB", res.Store, res.Check, float64(res.DBBytes)/(1<<20))
				if !quick {
					fmt.Fprintf(w, ", %d blobs, %.1f MiB read", res.Blobs, float64(res.BlobBytes)/(1<<20))
				}
				fmt.Fprintf(w, " in %.1f ms)\n", float64(res.DurationNs)/1e6)
			})
		},
	}
	c.Flags().StringVar(&store, "store", "", "Store directory")
	c.Flags().BoolVar(&quick, "quick", false, "only the quick database check every command does when it opens a Store; no blob read")
	return c
}

func cmdGC(g *globals) *cobra.Command {
	return onStore(&cobra.Command{
		Use:   "gc --store DIR [--json]",
		Short: "remove the blobs, rows and trees no Layer references, and temporary files; print what it freed",
		Long: `Remove what no Layer references: blob files and their rows, trees, and
the Store's temporary files. A failed or stopped commit or import removes
what it wrote itself; gc removes what a killed one left.

gc is safe beside a mounted Workspace and beside commits and imports: it
holds the Store's gc.lock exclusive, which every commit, import and check
holds shared while it runs, so it waits for them and never sees blobs that a
Layer is about to name; and a Workspace reads only blobs of Layers, which gc
never removes. A Store whose trees cannot all be read is not collected
(exit 3): what they reference is unknown.`,
		Example: `  layerfsd gc --store /s/store`,
		Args:    exactArgs(0),
	}, nil, nil, func(ctx context.Context, s *layerfs.Store, _ []string) error {
		res, err := s.GC(ctx)
		if err != nil {
			return err
		}
		return g.print(res, func(w io.Writer) {
			fmt.Fprintf(w, "freed %.1f MiB: %d blob files, %d blob rows, %d trees, %d temporary files (%.1f ms)\n",
				float64(res.Bytes)/(1<<20), res.Blobs, res.BlobRows, res.Trees, res.TempFiles, float64(res.DurationNs)/1e6)
		})
	})
}
