package lima

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/runs"
)

// Unprivileged is the uid and gid limactl runs as when sealbench runs as
// root: limactl refuses root outright, and 65534 (nobody/nogroup) exists
// on every Debian host.
const Unprivileged = 65534

// Instance is the name of the run's one Lima instance (short: Lima's
// sockets live under its directory, and unix socket paths are short).
const Instance = "sb"

// dirBase is the name of the directory that holds every run's Lima
// directory; Remove refuses to delete anything whose parent is not named so.
const dirBase = "sealbench-lima"

// Dir is where every run's Lima directory lives: /var/lib/sealbench-lima
// for root, ~/.local/state/sealbench-lima otherwise.
//
// It is not inside the run directory on purpose: run directories are 0700
// and root's, and limactl, running as uid 65534, must reach its LIMA_HOME.
// Dir is 0711 (others may pass through, not list), each run's directory
// under it is 0711 and root's, and only LIMA_HOME and HOME inside it belong
// to 65534. Lima has no labels: a run's directory here, named by its run
// id, is the handle teardown and the audit use.
func Dir() string {
	if os.Geteuid() == 0 {
		return filepath.Join("/var/lib", dirBase)
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", dirBase)
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d", dirBase, os.Geteuid()))
}

// layout names the files of one run's Lima directory.
type layout struct {
	root     string // Dir()/<run id>, root's, 0711
	info     string // state.json: what teardown needs to know (limactl, uid)
	image    string // image/: the verified copy of the VM image, root's
	bundle   string // bundle/<name>: the verified copy of the bundle, root's
	wrapper  string // qemu-tcg: the QEMU wrapper that forces TCG
	install  string // limactl/: a copy of limactl and its guest agent in Lima's layout, root's
	home     string // home/: limactl's HOME, the unprivileged user's
	limaHome string // lima/: LIMA_HOME, the unprivileged user's
	instDir  string // lima/sb: the instance
	socket   string // lima/sb/sock/engine.sock: the Engine, forwarded from the guest
}

func newLayout(root string) layout {
	limaHome := filepath.Join(root, "lima")
	inst := filepath.Join(limaHome, Instance)
	return layout{
		root: root, info: filepath.Join(root, "state.json"), image: filepath.Join(root, "image"),
		bundle: filepath.Join(root, "bundle"), wrapper: filepath.Join(root, "qemu-tcg"), install: filepath.Join(root, "limactl"),
		home: filepath.Join(root, "home"), limaHome: limaHome, instDir: inst,
		socket: filepath.Join(inst, "sock", "engine.sock"),
	}
}

// layoutOf reads an instance or run-directory key back into a layout: a
// run's Lima directory is Dir()/<run id>, an instance is <that>/lima/sb.
func layoutOf(key string) (layout, bool) {
	if filepath.Base(filepath.Dir(key)) == "lima" {
		return newLayout(filepath.Dir(filepath.Dir(key))), true
	}
	return newLayout(key), false
}

// state is what a run's Lima directory says about how it was made, for
// teardown and the audit, which have no Options.
type state struct {
	Limactl string `json:"limactl"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	QEMU    string `json:"qemu,omitempty"` // the real QEMU binary the wrapper runs
}

func readState(l layout) (*state, error) {
	b, err := os.ReadFile(l.info)
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", l.info, err)
	}
	return &s, nil
}

// limactl runs limactl for the run's Lima directory: as the unprivileged
// user when we are root, with an environment of its own (HOME and
// LIMA_HOME in the run's Lima directory, QEMU through the TCG wrapper), in
// a session of its own so that a Ctrl-C at our terminal does not reach the
// hostagent it leaves running.
type limactl struct {
	exe      string
	uid, gid int
	l        layout
	log      io.Writer // receives every command line and the output of commands whose output is not returned
}

func (c *limactl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.exe, args...)
	cmd.Env = []string{
		"HOME=" + c.l.home,
		"LIMA_HOME=" + c.l.limaHome,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"QEMU_SYSTEM_X86_64=" + c.l.wrapper,
		"LANG=C.UTF-8",
	}
	cmd.Dir = c.l.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid), Groups: []uint32{}}
	}
	// A daemon limactl leaves behind (an ssh ControlMaster, say) may hold
	// our output pipes open: stop waiting for them soon after limactl exits.
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs limactl with args and stdin, returning its stdout; stderr goes
// to the log and, on failure, into the error.
func (c *limactl) run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := c.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	fmt.Fprintf(c.log, "$ limactl %s\n", strings.Join(args, " "))
	err := cmd.Run()
	c.log.Write(stderr.Bytes())
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("limactl %s: %w\n%s", strings.Join(args, " "), err, lastLines(stderr.String(), 30))
	}
	return stdout.Bytes(), nil
}

// runLogged runs limactl with its output going straight to logf (an
// *os.File, so that a daemon it starts holds no pipe of ours).
func (c *limactl) runLogged(ctx context.Context, logf *os.File, args ...string) error {
	cmd := c.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	fmt.Fprintf(logf, "$ limactl %s\n", strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("limactl %s: %w; its output, %s:\n%s", strings.Join(args, " "), err, logf.Name(), tailFile(logf.Name(), 40))
	}
	return nil
}

// status returns the instance's status as limactl list says it
// (Running, Stopped, Broken...), or "" when there is no such instance.
func (c *limactl) status(ctx context.Context) (string, error) {
	if _, err := os.Stat(c.l.instDir); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	out, err := c.run(ctx, nil, "list", "--json", Instance)
	if err != nil {
		return "", err
	}
	var inst struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, &inst); err != nil {
			return "", fmt.Errorf("reading `limactl list --json`: %w", err)
		}
		if inst.Name == Instance {
			return inst.Status, nil
		}
	}
	return "", nil
}

// removeInstance stops the instance by force and deletes it, then makes
// sure nothing of it is left: no process with an argument under its
// directory, no directory.
func removeInstance(ctx context.Context, c *limactl) error {
	var errs []error
	// What the instance runs now: limactl stop -f signals the hostagent
	// and QEMU and returns before they have exited, and a QEMU freeing
	// its guest's memory shows no command line: each is waited for below,
	// by its pid and start time, whatever it shows by then.
	before := procsUnder(c.l.instDir)
	if _, err := os.Stat(c.l.instDir); err == nil && c.exe != "" {
		if _, err := os.Stat(c.exe); err == nil {
			// stop -f kills the hostagent and QEMU; delete -f removes the
			// instance's directory (disks, sockets, logs).
			if _, err := c.run(ctx, nil, "stop", "-f", Instance); err != nil {
				errs = append(errs, err)
			}
			if _, err := c.run(ctx, nil, "delete", "-f", Instance); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, p := range before {
		if err := runs.Kill(ctx, p, argUnder(c.l.instDir), runs.ProcessGrace); err != nil {
			errs = append(errs, err)
		}
	}
	if err := killUnder(ctx, c.l.instDir); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(c.l.instDir); err != nil {
		errs = append(errs, fmt.Errorf("removing the instance directory: %w", err))
	}
	if len(errs) > 0 && !exists(c.l.instDir) && len(procsUnder(c.l.instDir)) == 0 {
		// limactl complained, but the instance is gone: that is what counts.
		fmt.Fprintf(c.log, "the instance is gone despite: %v\n", errors.Join(errs...))
		return nil
	}
	return errors.Join(errs...)
}

// procsUnder lists the processes with an argument naming a path under dir
// (the hostagent's --pidfile, QEMU's -pidfile and disks, ssh's
// ControlPath=...): what a Lima instance in dir runs on the host; and
// those exiting with a file under dir still open (runs.FindExiting),
// which are not gone until they have exited.
func procsUnder(dir string) []runs.Proc {
	return append(runs.FindProcs(argUnder(dir)), runs.FindExiting(dir)...)
}

func argUnder(dir string) func([]string) bool {
	prefix := dir + string(filepath.Separator)
	return func(argv []string) bool {
		for _, a := range argv {
			if strings.Contains(a, prefix) {
				return true
			}
		}
		return false
	}
}

// killUnder stops every process procsUnder(dir) finds, and waits for them.
func killUnder(ctx context.Context, dir string) error {
	var errs []error
	for _, p := range procsUnder(dir) {
		if err := runs.Kill(ctx, p, argUnder(dir), runs.ProcessGrace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// qemuWrapper is the script QEMU_SYSTEM_X86_64 points at. Lima asks for
// KVM on Linux hosts whenever the guest is the host's architecture, and
// KVM hangs on the hosts we run Lima on: this rewrites accel=kvm to
// accel=tcg, -accel kvm to -accel tcg, -cpu host to -cpu qemu64, drops
// -enable-kvm, and runs the real QEMU. Arguments keep their exact bytes
// otherwise.
func qemuWrapper(realQEMU string) []byte {
	return []byte(`#!/bin/sh
# Written by sealbench: QEMU for Lima under TCG (software emulation), never
# KVM. Lima picks KVM on Linux; KVM hangs on the hosts sealbench uses.
prev=
for a do
	shift
	case "$prev $a" in
	"-cpu host") a=` + tcgCPUModel + ` ;;
	"-cpu host,"*) a="` + tcgCPUModel + `,${a#host,}" ;;
	"-accel kvm"|"-accel kvm,"*) a=tcg ;;
	*accel=kvm*) a=$(printf '%s\n' "$a" | sed 's/accel=kvm/accel=tcg/g') ;;
	esac
	prev=$a
	[ "$a" = -enable-kvm ] && continue
	set -- "$@" "$a"
done
exec ` + vmtarget.ShellQuote(realQEMU) + ` "$@"
`)
}

// copyVerified copies src to dst (mode perm, replacing dst) through a
// reader that fails unless the bytes are exactly size long and hash to
// want, so that what is used later is what was verified, not what the
// source holds by then.
func copyVerified(src, dst string, size int64, want manifests.Digest, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, manifests.NewVerifyingReader(in, size, want))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return os.Rename(tmp, dst)
}

// copyExecutable copies src to dst (mode 0755, through a temporary file
// renamed into place).
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o755)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return os.Rename(tmp, dst)
}

// secureDir makes dir (and its parents) when missing, and checks that it
// is a real directory owned by us that nobody else can write, then sets
// its mode: a path root uses must not be one another user prepared.
func secureDir(dir string, perm os.FileMode) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not a directory owned by uid %d: remove it, or find out who made it", dir, os.Geteuid())
	}
	return os.Chmod(dir, perm)
}

// ownedDir makes dir with mode 0700 for uid and gid (when we are root).
func ownedDir(dir string, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return fmt.Errorf("giving %s to uid %d: %w", dir, uid, err)
	}
	return nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func tailFile(p string, n int) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Sprintf("(cannot read it: %v)", err)
	}
	return lastLines(string(b), n)
}
