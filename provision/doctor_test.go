package provision

import (
	"strings"
	"testing"

	"github.com/sealbench/sealbench/manifests"
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
