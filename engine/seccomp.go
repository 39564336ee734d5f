package engine

import (
	"encoding/json"
	"runtime"
)

// Namespace flags of clone(2) and unshare(2).
const (
	cloneNewTime   = 0x00000080
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000
	errnoEPERM     = 1
	errnoENOSYS    = 38
)

// seccompRule is one entry of a Docker seccomp profile's syscalls.
type seccompRule struct {
	Names    []string     `json:"names"`
	Action   string       `json:"action"`
	Args     []seccompArg `json:"args,omitempty"`
	ErrnoRet *uint        `json:"errnoRet,omitempty"`
	Comment  string       `json:"comment,omitempty"`
}

type seccompArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

// DockerSeccompProfile is the seccomp profile of every Sandbox on dockerd,
// as the JSON that HostConfig.SecurityOpt "seccomp=..." carries.
//
// A Sandbox holds CAP_SYS_ADMIN for layerfsd's FUSE mounts, and Docker's
// default profile lets a container with that capability make namespaces:
// so a cell body (uid 65534, no capabilities) could `unshare -U`, become
// root of a new user namespace and mount there. The stand-in's own filter
// refuses that; this profile makes dockerd's Sandboxes refuse it too. It
// allows by default and refuses: making or entering namespaces (unshare,
// setns, clone with a namespace flag, and clone3, which answers ENOSYS so
// that the C library falls back to clone), and the calls Docker's default
// profile refuses to everyone whatever their capabilities (the kernel
// keyring, bpf, perf events, userfaultfd, modules, kexec,
// open_by_handle_at, clock setting, swap, reboot, accounting). Bodies run
// with no-new-privileges and no capabilities besides, so the kernel's own
// permission checks hold for everything else.
//
// For a Sandbox under gVisor (gvisor true) clone3 is allowed: runsc's
// converter of an OCI profile answers every refused call EPERM whatever
// its errnoRet (google/gvisor#14688), and the C library takes EPERM from
// clone3 as final, so no thread could start (rg's, git's). There a body
// could make a namespace with clone3, inside gVisor's Sentry, which serves
// the call: the host's kernel never sees it.
func DockerSeccompProfile(gvisor bool) string {
	u := func(n uint) *uint { return &n }
	rules := []seccompRule{
		{Names: []string{"unshare", "setns"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: u(errnoEPERM), Comment: "no new namespaces in a Sandbox"},
	}
	if !gvisor {
		rules = append(rules, seccompRule{Names: []string{"clone3"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: u(errnoENOSYS), Comment: "clone3's flags are behind a pointer: ENOSYS, so the C library uses clone"})
	}
	for _, flag := range []uint64{cloneNewNS, cloneNewCgroup, cloneNewUTS, cloneNewIPC, cloneNewUser, cloneNewPID, cloneNewNet, cloneNewTime} {
		rules = append(rules, seccompRule{Names: []string{"clone"}, Action: "SCMP_ACT_ERRNO", ErrnoRet: u(errnoEPERM),
			Args: []seccompArg{{Index: 0, Value: flag, ValueTwo: flag, Op: "SCMP_CMP_MASKED_EQ"}}})
	}
	rules = append(rules, seccompRule{Names: []string{
		"add_key", "request_key", "keyctl", "bpf", "perf_event_open", "userfaultfd",
		"init_module", "finit_module", "delete_module", "create_module", "kexec_load", "kexec_file_load",
		"open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "acct", "swapon", "swapoff", "reboot",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime", "quotactl", "nfsservctl",
	}, Action: "SCMP_ACT_ERRNO", ErrnoRet: u(errnoEPERM), Comment: "refused by Docker's default profile whatever the capabilities"})
	arches := []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"}
	if runtime.GOARCH == "arm64" {
		arches = []string{"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"}
	}
	b, err := json.Marshal(struct {
		DefaultAction string        `json:"defaultAction"`
		Architectures []string      `json:"architectures"`
		Syscalls      []seccompRule `json:"syscalls"`
	}{"SCMP_ACT_ALLOW", arches, rules})
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return string(b)
}
