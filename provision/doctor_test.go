package provision

import (
	"os"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// The doctor warns where a balloon reports free pages, and says what the
// protocol does about it; it is never a failure, since a benchmark must
// not change the host's memory settings to pass.
func TestDoctorPageReporting(t *testing.T) {
	kib := int64(18 << 20)
	active := pageReporting(manifests.Machine{PageReporting: manifests.PageReportingActive, ReportedKiBStart: &kib})
	if !active.OK || !strings.Contains(active.Detail, "18432 MiB reported") || !strings.Contains(active.Warning, "prefault") || active.Fix != "" {
		t.Errorf("active: %+v", active)
	}
	for _, state := range []string{manifests.PageReportingInactive, manifests.PageReportingUnknown} {
		if c := pageReporting(manifests.Machine{PageReporting: state}); !c.OK || c.Warning != "" || !strings.HasPrefix(c.Detail, state) {
			t.Errorf("%s: %+v", state, c)
		}
	}
}

// The doctor warns of ext4 mounted without a journal, naming where, and
// says what it does to the create-heavy cells; never a failure either.
func TestDoctorExt4Journal(t *testing.T) {
	c := ext4Journal(manifests.Machine{UnjournaledExt4: []string{"/", "/var/lib/docker"}})
	if !c.OK || c.Detail != "ext4 without a journal at /, /var/lib/docker" || !strings.Contains(c.Warning, "C01") || c.Fix != "" {
		t.Errorf("unjournaled: %+v", c)
	}
	if c := ext4Journal(manifests.Machine{}); !c.OK || c.Warning != "" || !strings.Contains(c.Detail, "no ext4") {
		t.Errorf("none: %+v", c)
	}
}

// TestDoctorFUSEURing: where enable_uring is off, the doctor says a run
// turns it on (as root) or that it needs root, and what the kernel lacks
// where it has no such parameter.
func TestDoctorFUSEURing(t *testing.T) {
	reads := func(v string, err error) func(string) (string, error) {
		return func(p string) (string, error) {
			if p != runs.FUSEURingParam {
				t.Errorf("the doctor read %s", p)
			}
			return v, err
		}
	}
	if c := fuseURing(reads("N", nil), false); c.OK || !strings.Contains(c.Fix, "as root") || !strings.Contains(c.Detail, "needs root") {
		t.Errorf("off, not root: %+v", c)
	}
	if c := fuseURing(reads("N", nil), true); !c.OK || c.Fix != "" || !strings.Contains(c.Detail, "a run turns it on") || !strings.Contains(c.Detail, "--fuse-uring=off") {
		t.Errorf("off, root: %+v", c)
	}
	if c := fuseURing(reads("Y", nil), false); !c.OK || c.Fix != "" {
		t.Errorf("on: %+v", c)
	}
	if c := fuseURing(reads("", os.ErrNotExist), true); c.OK || !strings.Contains(c.Detail, "has no FUSE over io_uring") || !strings.Contains(c.Fix, "CONFIG_FUSE_IO_URING") {
		t.Errorf("absent: %+v", c)
	}
}

// A target registers once: a second registration of a name is a bug.
func TestRegisterTwicePanics(t *testing.T) {
	New := func(NewOptions) (Target, error) { return nil, ErrNotYet }
	Register(Registration{Name: "twice", New: New})
	defer unregister("twice")
	defer func() {
		if recover() == nil {
			t.Error("registering a name a second time did not panic")
		}
	}()
	Register(Registration{Name: "twice", New: New})
}
