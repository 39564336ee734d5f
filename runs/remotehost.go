package runs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/internal/mountinfo"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/sshx"
)

// remoteHost is one remote host of a run, as teardown and the audit
// reach it: the resources the ledger names there are removed or looked
// for over SSH, as RemoveResource and Exists do here.
type remoteHost struct {
	host    string // ssh://user@host:port
	run     string // the run id
	c       *sshx.Client
	err     error    // why it cannot be reached
	runDirs []string // the run's directories on the host
	done    bool     // hosts.json says teardown finished there
	// ledgersDone says teardown removed what the ledgers of the runners
	// on the host name.
	ledgersDone bool
	// engines are the host's Engine sockets forwarded here, by the
	// endpoint as the host sees it, each in a 0700 directory of its own.
	engines map[string]*sshx.Forward
}

// remoteHosts are the remote hosts of one run's ledger, each reached
// (once) when it is first needed.
type remoteHosts struct {
	runDir string
	recs   map[string]HostRecord
	ssh    SSHOptions
	hosts  map[string]*remoteHost
}

func newRemoteHosts(runDir string, entries []manifests.LedgerEntry, o SSHOptions) (*remoteHosts, error) {
	recs, err := ReadHosts(runDir)
	if err != nil {
		return nil, err
	}
	rh := &remoteHosts{runDir: runDir, recs: recs, ssh: o, hosts: map[string]*remoteHost{}}
	for _, e := range entries {
		if e.Host == "" {
			continue
		}
		h := rh.hosts[e.Host]
		if h == nil {
			h = &remoteHost{host: e.Host, run: e.RunID, done: recs[e.Host].TornDown}
			rh.hosts[e.Host] = h
		}
		// The run's directory on the host is the one named by the run
		// id: every path the ledger names there must lie in it.
		if isRunDir(e) {
			h.runDirs = append(h.runDirs, e.Key)
		}
	}
	return rh, nil
}

// get returns the host, connected unless it cannot be reached (err) or
// is torn down already (done).
func (rh *remoteHosts) get(ctx context.Context, host string) *remoteHost {
	h := rh.hosts[host]
	if h.c != nil || h.err != nil || h.done {
		return h
	}
	cfg, err := sshConfig(host, rh.recs[host], rh.ssh)
	if err == nil {
		cfg.DialTimeout = 15 * time.Second
		h.c, err = sshx.Dial(ctx, cfg)
	}
	if err != nil {
		h.err = err
	}
	return h
}

func (rh *remoteHosts) close() {
	for _, h := range rh.hosts {
		for _, f := range h.engines {
			f.Close()
			os.Remove(filepath.Dir(f.Local()))
		}
		if h.c != nil {
			h.c.Close()
		}
	}
}

// onEngine is e with its Engine the host's endpoint forwarded here: the
// Engine API reached over the SSH connection, as the docker CLI does
// for DOCKER_HOST=ssh://: through the socket itself (direct-streamlocal),
// or, on a host whose sshd forwards none, through `docker system
// dial-stdio` there.
func (h *remoteHost) onEngine(ctx context.Context, e manifests.LedgerEntry) (manifests.LedgerEntry, error) {
	f := h.engines[e.Engine]
	if f == nil {
		dir, err := os.MkdirTemp("", "sealbench-engine-")
		if err != nil {
			return e, err
		}
		if f, err = ForwardEngine(ctx, h.c, filepath.Join(dir, "engine.sock"), e.Engine); err != nil {
			os.Remove(dir)
			return e, err
		}
		if h.engines == nil {
			h.engines = map[string]*sshx.Forward{}
		}
		h.engines[e.Engine] = f
	}
	e.Engine = f.Endpoint()
	return e, nil
}

// ForwardEngine makes local (a socket path in a 0700 directory) carry
// each connection to the Engine at endpoint (unix:///..., as the host
// sees it) on c's host: through the socket itself (direct-streamlocal),
// or, where the host's sshd forwards no sockets, through `docker system
// dial-stdio` there, as the docker CLI does for DOCKER_HOST=ssh://.
func ForwardEngine(ctx context.Context, c *sshx.Client, local, endpoint string) (*sshx.Forward, error) {
	sock, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return nil, fmt.Errorf("the Engine %s on %s is not a unix socket there, which is how sealbench reaches a remote Engine", endpoint, c)
	}
	return c.ForwardUnixOrCommand(ctx, local, sock, "docker", "-H", endpoint, "system", "dial-stdio")
}

// inRunDir refuses a path the ledger names on the host outside the run's
// directory there.
func (h *remoteHost) inRunDir(e manifests.LedgerEntry) error {
	if !e.Kind.IsPath() {
		return nil
	}
	for _, d := range h.runDirs {
		if within(e.Key, d) {
			return nil
		}
	}
	return fmt.Errorf("%s lies outside the run's directory on %s (%s): not touching it", e.Key, h.host, strings.Join(h.runDirs, ", "))
}

// remove removes what e names on the host, and returns nil when it is
// absent.
func (h *remoteHost) remove(ctx context.Context, e manifests.LedgerEntry, grace time.Duration) error {
	if err := h.inRunDir(e); err != nil {
		return err
	}
	switch e.Kind {
	case manifests.ResourceDir, manifests.ResourceStore:
		if err := h.removeTree(ctx, e.Key, false); err != nil || !isRunDir(e) {
			return err
		}
		// HostRunDir's tag directory goes with its last run.
		if tag := path.Dir(e.Key); path.Base(path.Dir(tag)) == path.Base(HostRunsDir("/")) {
			_, err := h.c.Exec(ctx, sshx.Command{Argv: []string{"sh", "-c", `rmdir -- "$1" 2>/dev/null; :`, "sh", tag}, Name: "rmdir"})
			return err
		}
		return nil
	case manifests.ResourceStateDir:
		// A stand-in killed with SIGKILL leaves its Sandboxes' inits, and
		// what they mounted, as here.
		if err := h.kill(ctx, sandboxInitOf(e.Key), grace); err != nil {
			return err
		}
		return h.removeTree(ctx, e.Key, true)
	case manifests.ResourceMount:
		return h.unmountUnder(ctx, e.Key)
	case manifests.ResourceSocket:
		_, err := h.c.Exec(ctx, sshx.Command{Argv: []string{"rm", "-f", "--", e.Key}, Name: "rm"})
		return err
	case manifests.ResourceProcess:
		return h.kill(ctx, MarkedBy(e.Exe, e.Key), grace)
	case manifests.ResourceContainer, manifests.ResourceImage, manifests.ResourceVolume:
		if e.ToolHeld() {
			break
		}
		if up, err := h.runEngineUp(ctx, e); err != nil || !up {
			return err
		}
		fe, err := h.onEngine(ctx, e)
		if err != nil {
			return err
		}
		return RemoveOnEngine(ctx, fe)
	}
	return fmt.Errorf("this sealbench cannot remove a %s on a remote host (%s)", e.Kind, h.host)
}

// exists reports whether what e names is still on the host.
func (h *remoteHost) exists(ctx context.Context, e manifests.LedgerEntry) (bool, string, error) {
	if err := h.inRunDir(e); err != nil {
		return false, "", err
	}
	switch e.Kind {
	case manifests.ResourceMount:
		ms, err := h.mountsUnder(ctx, e.Key)
		if err != nil {
			return false, "", err
		}
		for _, m := range ms {
			if m.Point == e.Key {
				return true, m.FSType + " mount on " + h.host, nil
			}
		}
		return false, "", nil
	case manifests.ResourceDir, manifests.ResourceStore, manifests.ResourceSocket, manifests.ResourceStateDir:
		out, err := h.c.Exec(ctx, sshx.Command{Name: "test",
			Argv: []string{"sh", "-c", `if [ -e "$1" ] || [ -L "$1" ]; then echo yes; else echo no; fi`, "sh", e.Key}})
		if err != nil {
			return false, "", err
		}
		if strings.TrimSpace(string(out)) == "yes" {
			return true, "on " + h.host, nil
		}
		return false, "", nil
	case manifests.ResourceProcess:
		ps, err := h.procs(ctx, MarkedBy(e.Exe, e.Key))
		if err != nil || len(ps) == 0 {
			return false, "", err
		}
		return true, fmt.Sprintf("pid %d on %s", ps[0].Pid, h.host), nil
	case manifests.ResourceContainer, manifests.ResourceImage, manifests.ResourceVolume:
		if e.ToolHeld() {
			break
		}
		if up, err := h.runEngineUp(ctx, e); err != nil || !up {
			return false, "", err
		}
		fe, err := h.onEngine(ctx, e)
		if err != nil {
			return false, "", err
		}
		ok, _, err := Exists(ctx, "/nonexistent", fe)
		return ok, "on " + e.Engine + " on " + h.host, err
	}
	return false, "", fmt.Errorf("this sealbench cannot look for a %s on a remote host (%s)", e.Kind, h.host)
}

// isRunDir reports whether e is the run's directory on the host, which
// holds the ledger the run's runner there keeps: named by the run id
// (HostRunDir's, or runs/<run> in a ledger written before it).
func isRunDir(e manifests.LedgerEntry) bool {
	return e.Host != "" && e.Kind == manifests.ResourceDir && filepath.Base(e.Key) == e.RunID
}

// HostRunsDir is the directory, under a remote host's state directory,
// of the directories runs made elsewhere keep on that host. It is not the
// host's own runs/: a host may be the machine a run is made on too, or
// the same machine as another host of the run (two addresses, two
// sshds), and the directories of each must never be one.
func HostRunsDir(hostState string) string { return path.Join(hostState, "remote") }

// HostRunDir is run's directory on the remote host host (ssh://...),
// whose state directory is hostState: HostRunsDir/<tag>/<run>, tag the
// first 8 hex digits of the SHA-256 of host. It is apart from the run's
// directory on this machine and from its directory on every other host
// of the run, even where several of them are one machine; short, as a
// unix socket in it must be; and named by the run id, as the runner
// there reads its ledger's run from its directory's name. Teardown
// removes the tag's directory too once it is empty.
func HostRunDir(hostState, run, host string) string {
	sum := sha256.Sum256([]byte(host))
	return path.Join(HostRunsDir(hostState), hex.EncodeToString(sum[:4]), run)
}

// ledgerIn reads the ledger a runner kept on the host in dir, the run's
// directory there (none there: none), each entry marked as the host's.
// It is the same run's, or it is refused.
func (h *remoteHost) ledgerIn(ctx context.Context, dir string) ([]manifests.LedgerEntry, error) {
	p := filepath.Join(dir, manifests.LedgerFile)
	out, err := h.c.Exec(ctx, sshx.Command{Name: "ledger", Argv: []string{"sh", "-c", `if [ -f "$1" ]; then cat -- "$1"; fi`, "sh", p}})
	if err != nil {
		return nil, err
	}
	entries, _, err := manifests.ReadLedger(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("the ledger %s on %s: %w", p, h.host, err)
	}
	entries = manifests.Standing(entries)
	for i := range entries {
		if entries[i].RunID != h.run || entries[i].Host != "" && entries[i].Host != h.host {
			return nil, fmt.Errorf("the ledger %s on %s: entry %d is run %s's on %q, not run %s's there", p, h.host, entries[i].Seq, entries[i].RunID, entries[i].Host, h.run)
		}
		entries[i].Host = h.host
	}
	return entries, nil
}

// runEngineUp reports whether e's Engine can be reached: true for any
// Engine but a stand-in of the run on the host (its socket in the run's
// directory there), which is up when its socket answers. A stand-in that
// is gone took its containers with it, and its images go with its state
// directory, which teardown removes after them.
func (h *remoteHost) runEngineUp(ctx context.Context, e manifests.LedgerEntry) (bool, error) {
	sock, ok := strings.CutPrefix(e.Engine, "unix://")
	if !ok || h.inRunDir(manifests.LedgerEntry{Kind: manifests.ResourceSocket, Key: sock}) != nil {
		return true, nil
	}
	conn, err := h.c.DialUnix(ctx, sock)
	if sshx.IsRefused(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	conn.Close()
	return true, nil
}

// removeTree removes dir on the host, and first, when detach, what is
// mounted under it (lazily, as teardown does here); it refuses while
// anything is still mounted there.
func (h *remoteHost) removeTree(ctx context.Context, dir string, detach bool) error {
	if detach {
		if err := h.unmountUnder(ctx, dir); err != nil {
			return err
		}
	}
	ms, err := h.mountsUnder(ctx, dir)
	if err != nil {
		return err
	}
	if len(ms) > 0 {
		return fmt.Errorf("still mounted under %s on %s: %s; not removing", dir, h.host, ms[0].Point)
	}
	_, err = h.c.Exec(ctx, sshx.Command{Argv: []string{"rm", "-rf", "--", dir}, Name: "rm"})
	return err
}

// unmountUnder detaches every mount at or below dir on the host, deepest
// first, and fails naming one still there.
func (h *remoteHost) unmountUnder(ctx context.Context, dir string) error {
	ms, err := h.mountsUnder(ctx, dir)
	if err != nil || len(ms) == 0 {
		return err
	}
	argv := []string{"sh", "-c", `for m; do umount -l -- "$m" 2>/dev/null; done; :`, "sh"}
	for i := len(ms) - 1; i >= 0; i-- {
		argv = append(argv, ms[i].Point)
	}
	if _, err := h.c.Exec(ctx, sshx.Command{Argv: argv, Name: "umount"}); err != nil {
		return err
	}
	if ms, err = h.mountsUnder(ctx, dir); err != nil {
		return err
	} else if len(ms) > 0 {
		return fmt.Errorf("unmounting %s (%s) on %s: still mounted", ms[0].Point, ms[0].FSType, h.host)
	}
	return nil
}

// mountsUnder lists the host's mounts at or below dir.
func (h *remoteHost) mountsUnder(ctx context.Context, dir string) ([]mountinfo.Mount, error) {
	out, err := h.c.Exec(ctx, sshx.Command{Argv: []string{"cat", "/proc/self/mountinfo"}, Name: "mountinfo"})
	if err != nil {
		return nil, err
	}
	return mountinfo.UnderOf(mountinfo.Parse(out), dir), nil
}

// listProcs prints, per process, its pid, its start time (/proc/PID/stat
// field 22, after the name, which may hold anything) and its argv
// (/proc/PID/cmdline, NUL-separated) in base64: arguments may hold any
// byte but NUL.
const listProcs = `for d in /proc/[0-9]*; do c=$(base64 -w0 "$d/cmdline" 2>/dev/null) && [ -n "$c" ] && s=$(cat "$d/stat" 2>/dev/null) && s=${s##*) } && set -- $s && printf '%s %s %s\n' "${d#/proc/}" "${20}" "$c"; done; :`

// signalProcs, given a signal (or - for none) and PID:START pairs, sends
// the signal to each process that is still that one (the same start time)
// and has not exited (not a zombie), and prints the pid of each such: the
// ones still alive. A process shows no command line while it exits, so
// this, not listProcs, says whether it is gone.
const signalProcs = `sig=$1; shift
alive() { want=$1; shift; [ "$1" != Z ] && [ "${20}" = "$want" ]; }
for p; do pid=${p%%:*}; s=$(cat "/proc/$pid/stat" 2>/dev/null) || continue; s=${s##*) }
alive "${p#*:}" $s || continue
[ "$sig" = - ] || kill -s "$sig" "$pid" 2>/dev/null
echo "$pid"
done; :`

// procs lists the host's processes whose argv match: as FindProcs does
// here, by what they run and their marker, never by a pid alone.
func (h *remoteHost) procs(ctx context.Context, match func([]string) bool) ([]Proc, error) {
	out, err := h.c.Exec(ctx, sshx.Command{Argv: []string{"sh", "-c", listProcs}, Name: "procs"})
	if err != nil {
		return nil, err
	}
	var ps []Proc
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		pid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[1], 10, 64)
		raw, err3 := base64.StdEncoding.DecodeString(f[2])
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		if match(argv) {
			ps = append(ps, Proc{Pid: pid, Argv: argv, StartTime: start})
		}
	}
	return ps, sc.Err()
}

// kill sends the matching processes SIGTERM, and SIGKILL to those still
// there after grace, and returns once each has exited (up to
// KillPatience after SIGKILL): a process counts as removed only then.
// Each signal goes only to a pid that is still the process listed (its
// start time), and one that exits shows no command line, so it is
// followed by its pid and start time, not by what it runs.
func (h *remoteHost) kill(ctx context.Context, match func([]string) bool, grace time.Duration) error {
	ps, err := h.procs(ctx, match)
	if err != nil || len(ps) == 0 {
		return err
	}
	signal := func(sig string) ([]string, error) {
		argv := []string{"sh", "-c", signalProcs, "sh", sig}
		for _, p := range ps {
			argv = append(argv, fmt.Sprintf("%d:%d", p.Pid, p.StartTime))
		}
		out, err := h.c.Exec(ctx, sshx.Command{Argv: argv, Name: "kill"})
		return strings.Fields(string(out)), err
	}
	waitGone := func(d time.Duration) ([]string, error) {
		deadline := time.Now().Add(d)
		for {
			alive, err := signal("-")
			if err != nil || len(alive) == 0 || time.Now().After(deadline) {
				return alive, err
			}
			select {
			case <-ctx.Done():
				return alive, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if _, err := signal("TERM"); err != nil {
		return err
	}
	alive, err := waitGone(grace)
	if err != nil || len(alive) == 0 {
		return err
	}
	if _, err := signal("KILL"); err != nil {
		return err
	}
	if alive, err = waitGone(KillPatience); err != nil || len(alive) == 0 {
		return err
	}
	return fmt.Errorf("process %s on %s has not exited %s after SIGKILL", strings.Join(alive, ", "), h.host, KillPatience)
}

// unreachable is the error of a host teardown could not reach, naming
// what is left there.
func (h *remoteHost) unreachable(left []string) error {
	return fmt.Errorf("host %s cannot be reached (%v); left there, for a later `sealbench teardown --run %s`: %s",
		h.host, h.err, h.run, strings.Join(left, "; "))
}

// remoteLogDir is where teardown keeps the output of the commands it ran
// on a run's remote hosts: in the run directory while it lasts.
func remoteLogDir(runDir string) string {
	if _, err := os.Stat(runDir); err != nil {
		return ""
	}
	return filepath.Join(runDir, "logs", "ssh-teardown")
}
