package mountinfo

import (
	"os"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

func TestParse(t *testing.T) {
	in := "36 35 98:0 / / rw,relatime - ext4 /dev/vda rw\n" +
		"40 36 0:40 / /tmp/a\\040b/mnt rw - fuse.layerfs /work/x rw,user_id=0\n" +
		"41 40 0:41 / /tmp/a\\040b/mnt/deep rw - tmpfs tmpfs rw\n" +
		"garbage line\n"
	got := parse([]byte(in))
	if len(got) != 3 || got[1].Point != "/tmp/a b/mnt" || got[1].FSType != "fuse.layerfs" || got[1].Source != "/work/x" {
		t.Fatalf("parse = %+v", got)
	}
}

func TestUnderAndIsMountpoint(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		testenv.Skip(t, "no /proc/self/mountinfo: %v", err)
	}
	if !IsMountpoint("/") {
		t.Error("/ is not a mount point")
	}
	under, err := Under("/")
	if err != nil || len(under) == 0 || under[len(under)-1].Point != "/" {
		t.Errorf("Under(/) = %v, %v; want every mount, / last", under, err)
	}
	if m, _ := Under("/no/such/dir"); len(m) != 0 {
		t.Errorf("Under(/no/such/dir) = %v", m)
	}
}
