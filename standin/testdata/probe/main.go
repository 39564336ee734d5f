// Command probe runs inside a Sandbox and reports, as JSON, what a process
// there can and cannot do. The stand-in's isolation tests build it.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// bundleDir is where the Sandbox image holds the bundle.
const bundleDir = manifests.SandboxBundleDir

// writeBundle tries every way to change the bundle in the image, and
// returns the first that worked, or what each attempt answered.
func writeBundle() string {
	if _, err := os.Stat(bundleDir); err != nil {
		return err.Error()
	}
	attempts := []struct {
		what string
		do   func() error
	}{
		{"create", func() error {
			f, err := os.Create(bundleDir + "/added")
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"write", func() error {
			f, err := os.OpenFile(bundleDir+"/SHA256SUMS", os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, err = f.WriteString("x")
				f.Close()
			}
			return err
		}},
		{"truncate", func() error { return os.Truncate(bundleDir+"/SHA256SUMS", 0) }},
		{"chmod", func() error { return os.Chmod(bundleDir+"/bin/tool", 0o777) }},
		{"chown", func() error { return os.Chown(bundleDir+"/bin/tool", os.Getuid(), os.Getgid()) }},
		{"rename", func() error { return os.Rename(bundleDir+"/bin/tool", bundleDir+"/bin/moved") }},
		{"remove", func() error { return os.Remove(bundleDir + "/SHA256SUMS") }},
		{"mkdir", func() error { return os.Mkdir(bundleDir+"/bin/new", 0o755) }},
		{"symlink", func() error { return os.Symlink("/tmp", bundleDir+"/bin/link") }},
		{"utimes", func() error { return os.Chtimes(bundleDir+"/bin/tool", time.Now(), time.Now()) }},
	}
	var refused []string
	for _, a := range attempts {
		if err := a.do(); err == nil {
			return "ok: " + a.what
		} else {
			refused = append(refused, a.what+": "+err.Error())
		}
	}
	return strings.Join(refused, "; ")
}

func main() {
	// probe euid: what a setuid copy of the probe runs as.
	if len(os.Args) > 1 && os.Args[1] == "euid" {
		fmt.Print(os.Geteuid())
		return
	}
	r := map[string]string{}
	// First, with raw system calls: Go's poller opens descriptors of its own.
	if d, err := syscall.Open("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
		buf := make([]byte, 4096)
		n, _ := syscall.ReadDirent(d, buf)
		_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
		var fds, targets []string
		for _, name := range names {
			if name == fmt.Sprint(d) {
				continue
			}
			fds = append(fds, name)
			lb := make([]byte, 256)
			ln, _ := syscall.Readlink("/proc/self/fd/"+name, lb)
			if ln < 0 {
				ln = 0
			}
			targets = append(targets, name+"="+string(lb[:ln]))
		}
		syscall.Close(d)
		r["fds"] = strings.Join(fds, ",")
		r["fd_targets"] = strings.Join(targets, ",")
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (strings.HasPrefix(k, "Cap") || k == "NoNewPrivs" || k == "Seccomp") {
			r[k] = strings.TrimSpace(v)
		}
	}
	// chdir through every fd number a leaked descriptor could have.
	escaped := "none"
	for fd := 0; fd < 64; fd++ {
		if err := syscall.Chdir(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil {
			escaped = fmt.Sprint(fd)
			break
		}
	}
	r["chdir_fd"] = escaped
	wd, _ := os.Getwd()
	r["cwd"] = wd
	r["mount"] = errString(syscall.Mount("none", "/tmp", "tmpfs", 0, ""))
	r["unshare_user"] = errString(syscall.Unshare(syscall.CLONE_NEWUSER))
	r["unshare_mount"] = errString(syscall.Unshare(syscall.CLONE_NEWNS))
	r["unshare_net"] = errString(syscall.Unshare(syscall.CLONE_NEWNET))
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP)
	if err == nil {
		syscall.Close(fd)
	}
	r["raw_socket"] = errString(err)
	fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	if err == nil {
		syscall.Close(fd)
	}
	r["packet_socket"] = errString(err)
	c, err := net.DialTimeout("tcp", "192.0.2.1:80", 2*time.Second)
	if err == nil {
		c.Close()
	}
	r["dial_external"] = errString(err)
	c, err = net.DialTimeout("udp", "8.8.8.8:53", 2*time.Second)
	if err == nil {
		_, err = c.Write([]byte("x"))
		c.Close()
	}
	r["udp_external"] = errString(err)
	if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		c, err := net.Dial("tcp", l.Addr().String())
		if err == nil {
			c.Close()
		}
		r["loopback"] = errString(err)
		l.Close()
	} else {
		r["loopback"] = errString(err)
	}
	ifs, _ := net.Interfaces()
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	r["interfaces"] = strings.Join(names, ",")
	f, err := os.Create("/probe-was-here")
	if err == nil {
		f.Close()
		os.Remove("/probe-was-here")
	}
	r["write_root"] = errString(err)
	procs, _ := os.ReadDir("/proc")
	var pids []string
	for _, p := range procs {
		if p.Name()[0] >= '0' && p.Name()[0] <= '9' {
			cmd, _ := os.ReadFile("/proc/" + p.Name() + "/cmdline")
			pids = append(pids, p.Name()+"="+strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " "))
		}
	}
	r["processes"] = strings.Join(pids, ";")
	hn, _ := os.Hostname()
	r["hostname"] = hn
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err == nil {
		r["dev_fuse"] = "ok"
		// What the LayerFS daemon does: mount FUSE with the descriptor.
		// Nothing answers it, but the mount itself is the privilege.
		mnt := "/dev/shm/fuse-probe"
		os.Mkdir(mnt, 0o755)
		err := syscall.Mount("probe", mnt, "fuse", syscall.MS_NOSUID|syscall.MS_NODEV,
			fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", f.Fd()))
		r["fuse_mount"] = errString(err)
		if err == nil {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		os.Remove(mnt)
		f.Close()
	} else {
		r["dev_fuse"] = err.Error()
	}
	r["write_proc_sys"] = errString(os.WriteFile("/proc/sys/kernel/hostname", []byte("x"), 0))
	r["uid"] = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	r["write_bundle"] = writeBundle()
	// A setuid-root copy of the probe, if the image has one: with
	// no_new_privs the kernel ignores the setuid bit.
	if out, err := exec.Command("/bin/probe-suid", "euid").Output(); err == nil {
		r["setuid_euid"] = string(out)
	} else {
		r["setuid_euid"] = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(r)
}
