// Command probe runs inside a Sandbox and reports, as JSON, what a process
// there can and cannot do. The stand-in's isolation tests build it.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func main() {
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
	json.NewEncoder(os.Stdout).Encode(r)
}
