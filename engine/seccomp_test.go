package engine

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestSeccompProfile: the Sandboxes' profile refuses making or entering
// namespaces; clone3 answers ENOSYS (the C library then uses clone, whose
// namespace flags are refused) except under gVisor, whose converter would
// answer it EPERM and so stop every thread from starting.
func TestSeccompProfile(t *testing.T) {
	for _, gvisor := range []bool{false, true} {
		var p struct {
			DefaultAction string
			Syscalls      []seccompRule
		}
		if err := json.Unmarshal([]byte(DockerSeccompProfile(gvisor)), &p); err != nil {
			t.Fatal(err)
		}
		errno := map[string]uint{}
		cloneFlags := 0
		for _, r := range p.Syscalls {
			for _, n := range r.Names {
				if r.ErrnoRet != nil && len(r.Args) == 0 {
					errno[n] = *r.ErrnoRet
				}
				if n == "clone" && len(r.Args) == 1 && r.Args[0].Op == "SCMP_CMP_MASKED_EQ" {
					cloneFlags++
				}
			}
		}
		if p.DefaultAction != "SCMP_ACT_ALLOW" || errno["unshare"] != errnoEPERM || errno["setns"] != errnoEPERM || cloneFlags != 8 {
			t.Errorf("gvisor %v: default %s, unshare %d, setns %d, %d clone flags refused; want allow, EPERM, EPERM, 8", gvisor, p.DefaultAction, errno["unshare"], errno["setns"], cloneFlags)
		}
		if n, ok := errno["clone3"]; gvisor == ok || !gvisor && n != errnoENOSYS {
			t.Errorf("gvisor %v: clone3 refused %v with %d; want ENOSYS, and allowed under gVisor", gvisor, ok, n)
		}
		if !slices.ContainsFunc(p.Syscalls, func(r seccompRule) bool { return slices.Contains(r.Names, "bpf") }) {
			t.Errorf("gvisor %v: bpf is not refused", gvisor)
		}
	}
}
